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
"""

from __future__ import annotations

from channels.base import InboundMessage, Quoted
from orchestrator.turn.images import image_parts
from providers.base import ChatMessage, DocumentPart

__all__ = ["QUOTE_MAX_CHARS", "quote_block", "user_message", "user_text"]

QUOTE_MAX_CHARS = 2000
"""Characters of a replied-to message sent to the model at most (the rest is cut, with ``…``)."""


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
    """The turn's user message: :func:`user_text`, the images and ``documents``."""
    return ChatMessage("user", user_text(message), images=image_parts(message), documents=documents)
