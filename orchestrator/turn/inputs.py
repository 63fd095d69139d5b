"""What an inbound message becomes for the model: its user message (architecture §3 "Inputs").

Pure. :func:`user_message` composes the :class:`~providers.base.ChatMessage` of a turn from the
screened inbound message:

* **Reply context.** A message that replies to another (``InboundMessage.quoted``) starts with
  that message's text, marked as quoted and as the bot's or a user's, cut to
  :data:`QUOTE_MAX_CHARS` characters (with ``…``), then the user's own text
  (:func:`quote_block`). Each quoted line is prefixed with ``> `` so that the quote cannot pass
  for the user's words.
* **Images** as :class:`~providers.base.ImagePart` (:mod:`orchestrator.turn.images`).
* **Documents** as :class:`~providers.base.DocumentPart` (:mod:`orchestrator.turn.documents`):
  each provider sends them in its own form, marked as untrusted input.
* **History** keeps a note of each document and voice note (name, type, pages or seconds, the
  SHA-256 of the bytes: never the bytes) and each document's text, so that the turns after read
  the document as text (:func:`history_note`).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from channels.base import Attachment, InboundMessage, Quoted
from orchestrator.turn.images import image_parts
from providers.base import ChatMessage, DocumentPart

__all__ = [
    "QUOTE_MAX_CHARS",
    "REPLAY_MAX_CHARS",
    "audio_note",
    "document_note",
    "history_note",
    "quote_block",
    "user_message",
    "user_text",
]

QUOTE_MAX_CHARS = 2000
"""Characters of a replied-to message sent to the model at most (the rest is cut, with ``…``)."""
REPLAY_MAX_CHARS = 20000
"""Characters of a document's text kept in history for the turns after the one it came with."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def document_note(document: DocumentPart) -> str:
    """``[document NAME, TYPE, N pages, sha256 HEX16]`` (the first 16 hex digits of the
    SHA-256 of its bytes)."""
    pages = f", {document.pages} page{'s' if document.pages != 1 else ''}" if document.pages else ""
    return (
        f"[document {document.file_name}, {document.mime_type}{pages}, "
        f"sha256 {_digest(document.data)}]"
    )


def audio_note(audio: Attachment) -> str:
    """``[voice note NAME, TYPE, N s, sha256 HEX16]``: what history keeps of a voice note
    (its transcript is the message's text)."""
    seconds = f", {audio.duration:.0f} s" if audio.duration is not None else ""
    name = audio.file_name or "voice"
    return f"[voice note {name}, {audio.mime_type}{seconds}, sha256 {_digest(audio.data)}]"


def history_note(message: InboundMessage, documents: tuple[DocumentPart, ...]) -> str:
    """What history keeps of the message's voice note and documents: a note of each, and each
    document's text (cut to :data:`REPLAY_MAX_CHARS`, between its untrusted-input markers), so
    the turns after read it as text whatever their provider."""
    notes = [audio_note(a) for a in message.attachments if a.kind == "audio"]
    for document in documents:
        notes.append(document_note(document))
        text = document.text
        if len(text) > REPLAY_MAX_CHARS:
            text = text[:REPLAY_MAX_CHARS] + "\n[… the rest of this document is not kept]"
        notes.append(replace(document, text=text).as_text())
    return "\n".join(notes)


def quote_block(quoted: Quoted, *, max_chars: int = QUOTE_MAX_CHARS) -> str:
    """The replied-to message as the model reads it: a header naming whose it is, its lines
    prefixed with ``> ``, and an end line.

    >>> print(quote_block(Quoted("Paris.", from_bot=True)))
    [The user replies to this earlier message of yours, quoted:]
    > Paris.
    [End of the quoted message]
    """
    text = quoted.text.strip()
    if len(text) > max_chars:
        text = text[:max_chars].rstrip() + "…"
    if quoted.from_bot:
        whose = "this earlier message of yours"
    else:
        whose = f"this message from {quoted.sender_name or 'another user'}"
    lines = "\n".join(f"> {line}" if line else ">" for line in text.splitlines() or [""])
    return f"[The user replies to {whose}, quoted:]\n{lines}\n[End of the quoted message]"


def user_text(message: InboundMessage) -> str:
    """The message's text, after the quote of the message it replies to (when it does)."""
    if message.quoted is None or not message.quoted.text.strip():
        return message.text
    block = quote_block(message.quoted)
    return f"{block}\n\n{message.text}" if message.text else block


def user_message(message: InboundMessage, documents: tuple[DocumentPart, ...] = ()) -> ChatMessage:
    """The turn's user message: :func:`user_text`, the images and ``documents``, and what
    history keeps of its inputs (:func:`history_note`)."""
    return ChatMessage(
        "user",
        user_text(message),
        images=image_parts(message),
        documents=documents,
        history_note=history_note(message, documents),
    )
