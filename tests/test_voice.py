"""Voice notes through the Telegram wire server and a provider wire server that also speaks the
audio endpoints (issue 32; architecture §3 "Inputs"): the real daemon, the Bot API peer (voice
notes, getFile, downloads, sendVoice) and a local OpenAI-compatible server
(``/v1/chat/completions``, ``/v1/audio/transcriptions``, ``/v1/audio/speech``).

A voice note → a transcription request carrying its bytes → the transcript quoted in the chat
and as the user's text in the chat request; with ``speech.reply`` on, the answer also as a
``sendVoice`` of the speech bytes, after the text. No speech configured, a failed
transcription, an over-long note: one clear line, no model call.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio
import pytest

from config.errors import ConfigError
from config.loader import load_config_text
from orchestrator.store import Store
from tests.channel_harness import daemon_config
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_chats import PATH, config_text, daemon_running, observed
from tests.telegram_harness import CHAT, reply, text_stream

VOICE = b"OggS\x00\x02 a voice note"
SPEECH = b"OggS\x00\x02 the spoken answer"
TRANSCRIPTIONS = "/v1/audio/transcriptions"
SPEECH_PATH = "/v1/audio/speech"


def _speech(reply_mode: str = "never") -> str:
    return f"speech:\n  provider: main\n  model: whisper-1\n  reply: {reply_mode}\n  voice: nova\n"


def _last_user(request_json: dict[str, Any]) -> Any:
    return [m for m in request_json["messages"] if m["role"] == "user"][-1]["content"]


async def _voice_note(
    peer: TelegramBotApiServer, daemon: Any, *, duration: int = 3, replies: int = 1
) -> None:
    peer.inject_media(CHAT, {"voice": peer.files.voice(VOICE, duration=duration)})
    with anyio.fail_after(15):
        await observed(daemon).wait_replies(replies)


async def test_a_voice_note_is_transcribed_answered_and_spoken(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(TRANSCRIPTIONS, [Reply.json({"text": " What time is it? "})])
        provider.script(PATH, [reply(text_stream(["It is noon."]))])
        provider.script(SPEECH_PATH, [Reply(body=SPEECH, content_type="audio/ogg")])
        text = config_text(peer, provider, tmp_path) + _speech("voice_notes_only")
        async with daemon_running(text, tmp_path) as daemon:
            await _voice_note(peer, daemon)
        heard, chat, spoken = (
            provider.requests_to(TRANSCRIPTIONS),
            provider.requests_to(PATH),
            provider.requests_to(SPEECH_PATH),
        )
        form = heard[0].form()
        assert form["file"].data == VOICE and form["file"].content_type == "audio/ogg"
        assert form["model"].text == "whisper-1"
        assert heard[0].headers["authorization"] == "Bearer local-test-key"
        assert _last_user(chat[0].json) == "What time is it?"
        assert spoken[0].json == {
            "model": "tts-1",
            "input": "It is noon.",
            "voice": "nova",
            "response_format": "opus",
        }
        # The transcript (quoted, replying to the note), the answer, then the voice note.
        assert peer.texts(CHAT)[:2] == ["🎤 “What time is it?”", "It is noon."]
        (voice,) = peer.calls_to("sendVoice", CHAT)
        assert voice.params["voice"] == SPEECH  # the speech bytes, unchanged
        (answer,) = peer.calls_to("sendMessage", CHAT)[1:]
        assert answer.answered_at is not None and answer.answered_at <= voice.at
        assert "voice" in peer.messages(CHAT)[-1].raw
        # History keeps a note of the voice note (never its bytes) and the transcript.
        digest = hashlib.sha256(VOICE).hexdigest()[:16]
        history = Store(tmp_path / "relaybot.db").history("tg", str(CHAT))
        assert history[0].content == (
            f"[voice note voice.ogg, audio/ogg, 3 s, sha256 {digest}]\nWhat time is it?"
        )


async def test_an_audio_file_is_heard_and_voice_replies_stay_off_by_default(
    tmp_path: Path,
) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(TRANSCRIPTIONS, [Reply.json({"text": "hello"})])
        provider.script(PATH, [reply(text_stream(["Hi."]))])
        text = config_text(peer, provider, tmp_path) + _speech()
        async with daemon_running(text, tmp_path) as daemon:
            peer.inject_document(CHAT, b"ID3 an mp3", mime_type="audio/mpeg", file_name="m.mp3")
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(1)
        form = provider.requests_to(TRANSCRIPTIONS)[0].form()
        assert (form["file"].data, form["file"].filename) == (b"ID3 an mp3", "m.mp3")
        assert peer.texts(CHAT) == ["🎤 “hello”", "Hi."]
        assert peer.calls_to("sendVoice") == [] and provider.requests_to(SPEECH_PATH) == []


async def test_without_speech_a_voice_note_gets_the_clear_line(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        async with daemon_running(config_text(peer, provider, tmp_path), tmp_path) as daemon:
            await _voice_note(peer, daemon)
        assert peer.texts(CHAT) == [
            "I cannot listen to voice messages here: no speech-to-text is configured for this "
            "bot. Please type your message."
        ]
        assert provider.requests == []


async def test_a_failed_transcription_and_a_long_note_get_their_lines(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        failure = {"error": {"message": "boom", "type": "server_error"}}
        provider.script(TRANSCRIPTIONS, [Reply.json(failure, status=500)])
        text = (
            config_text(peer, provider, tmp_path, agent="max_audio_seconds: 60")
            + _speech()
            + "  timeout_secs: 5\n"
        )
        async with daemon_running(text, tmp_path) as daemon:
            await _voice_note(peer, daemon)
            await _voice_note(peer, daemon, duration=61, replies=2)
        assert peer.texts(CHAT) == [
            "I could not transcribe your voice message: the speech-to-text service failed. "
            "Please try again, or type your message.",
            "This voice message is too long (61 s; the limit is 60 s). Please send a shorter "
            "one, or type your message.",
        ]
        assert provider.requests_to(PATH) == []
        assert len(provider.requests_to(TRANSCRIPTIONS)) == 1


def test_speech_must_name_an_openai_compatible_provider(tmp_path: Path) -> None:
    base = daemon_config("http://127.0.0.1:9", tmp_path, "  c:\n    kind: console\n")
    claude = "  claude:\n    kind: anthropic\n    api_key: k\n    model: c\n"
    with_claude = base.replace("agent:\n", claude + "agent:\n", 1)
    for text, message in [
        (base + "speech:\n  provider: nope\n", "unknown provider 'nope' (configured: main)"),
        (
            with_claude + "speech:\n  provider: claude\n",
            "provider 'claude' is anthropic; speech needs an OpenAI-compatible one "
            "(openai_chat or openai_responses)",
        ),
    ]:
        with pytest.raises(ConfigError) as info:
            load_config_text(text, source_name="s.yaml", environ={})
        (issue,) = info.value.errors
        assert (issue.path, issue.message) == ("speech.provider", message)
    config = load_config_text(base + "speech:\n  provider: main\n", environ={})
    assert config.speech is not None and config.speech.reply == "never"
