"""Voice notes in and out: what the user is told, what the model reads (architecture §3 "Inputs").

Pure. A message's audio (a Telegram voice note or audio file, a Discord audio attachment, a
Matrix ``m.audio``) is transcribed through ``speech`` after the access check (the orchestrator
answers only allowed senders) and within ``agent.max_audio_bytes`` / ``max_audio_seconds``
(:func:`audio_refusal` says when not, in one line). The transcript is shown to the user, quoted
(:func:`transcript_line`, through the outbound policy), above the answer, and is the user's
text to the model (:func:`heard_text`). Without ``speech``, or when transcription fails or
hears nothing, the user gets one line: never silence.

Voice out: :func:`speaks` decides from ``speech.reply`` whether the answer is also sent as a
voice note.
"""

from __future__ import annotations

from channels.base import Attachment

__all__ = [
    "NOTHING_HEARD",
    "NO_SPEECH",
    "TRANSCRIPTION_FAILED",
    "audio_refusal",
    "heard_text",
    "speaks",
    "transcript_line",
]

NO_SPEECH = (
    "I cannot listen to voice messages here: no speech-to-text is configured for this bot. "
    "Please type your message."
)
TRANSCRIPTION_FAILED = (
    "I could not transcribe your voice message: the speech-to-text service failed. "
    "Please try again, or type your message."
)
NOTHING_HEARD = "I heard no words in your voice message; please try again, or type your message."


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def audio_refusal(
    audio: Attachment, *, configured: bool, max_bytes: int, max_seconds: float
) -> str | None:
    """The one line refusing ``audio``, or ``None`` when it may be transcribed.

    ``configured``: a ``speech`` section exists; ``max_bytes``/``max_seconds``:
    ``agent.max_audio_bytes`` / ``agent.max_audio_seconds``.
    """
    if not configured:
        return NO_SPEECH
    size = max(audio.size or 0, len(audio.data))
    if size > max_bytes:
        return (
            f"This voice message is too large ({_megabytes(size)}; the limit is "
            f"{_megabytes(max_bytes)}). Please send a shorter one, or type your message."
        )
    if audio.duration is not None and audio.duration > max_seconds:
        return (
            f"This voice message is too long ({audio.duration:.0f} s; the limit is "
            f"{max_seconds:.0f} s). Please send a shorter one, or type your message."
        )
    if not audio.fetched:
        return "This voice message could not be downloaded; please send it again."
    return None


def transcript_line(transcript: str) -> str:
    """The transcript as the user sees it above the answer: quoted, after a microphone.

    >>> transcript_line("what time is it")
    '🎤 “what time is it”'
    """
    return f"🎤 “{transcript}”"


def heard_text(caption: str, transcript: str) -> str:
    """The user's text to the model: the transcript, after the caption when there is one."""
    return f"{caption}\n\n{transcript}" if caption.strip() else transcript


def speaks(reply: str, *, voice_note: bool) -> bool:
    """Whether the answer is also sent as a voice note: ``speech.reply`` is ``always``, or
    ``voice_notes_only`` and the message was a voice note (``never``: no)."""
    return reply == "always" or (reply == "voice_notes_only" and voice_note)
