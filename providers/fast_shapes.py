"""The common stream event of two wire formats as typed msgspec shapes (pure, sans-I/O).

Theory of operation
-------------------
Nearly every event of a streamed answer is a plain text delta: a Chat Completions
``chat.completion.chunk`` whose one choice carries ``delta.content``
(https://platform.openai.com/docs/api-reference/chat-streaming), an Anthropic
``content_block_delta`` carrying a ``text_delta`` or ``thinking_delta``
(https://docs.anthropic.com/en/api/messages-streaming). Parsed into dicts, each such event
builds three or four dicts and a dozen strings the decoder drops. Decoded into the typed
shapes here instead (msgspec, ``relaybot[fast]``), only the fields the decoder reads are
built, and their JSON types are checked in C.

The shapes are *strict*: every field the decoder of that format reads is declared, with the
types of the plain case only (``error``, ``usage``, ``finish_reason``, ``refusal``,
``tool_calls``, ``x_tool_start``/``x_tool_result`` may only be ``null`` or absent; a Chat
Completions chunk has exactly one choice, whose ``index`` is ``0`` or ``null``). Anything else
— another type, another value, a lone surrogate, text that is not JSON — fails the typed decode
(``msgspec.DecodeError``, ``RecursionError``), and the decoder then parses the event as it
parses every other one (:func:`providers.bounded_json.parse_json`) and reduces the dict, so
an event taken here yields exactly the events the dict would (tests/test_fast_shapes.py
checks it on generated events). Fields the decoders ignore are ignored here too; a repeated
key counts its last value in both.

Without msgspec, :data:`CHAT_CHUNK` and :data:`ANTHROPIC_DELTA` are ``None`` and every event
goes the dict way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

__all__ = ["ANTHROPIC_DELTA", "CHAT_CHUNK", "REFUSED"]

CHAT_CHUNK: Callable[[bytes], Any] | None
"""Decodes a plain ``chat.completion.chunk`` (``.choices[0].delta.content`` /
``.reasoning_content`` / ``.reasoning``: ``str | None``), else raises :data:`REFUSED`."""

ANTHROPIC_DELTA: Callable[[bytes], Any] | None
"""Decodes a ``content_block_delta`` (``.index: int``, ``.delta.type: str``, ``.delta.text`` /
``.delta.thinking``: ``str | None``), else raises :data:`REFUSED`."""

REFUSED: tuple[type[Exception], ...]
"""What the typed decoders raise for an event that is not of their shape."""

try:
    import msgspec
except ImportError:  # pragma: no cover - depends on the install
    CHAT_CHUNK = ANTHROPIC_DELTA = None
    REFUSED = ()
else:

    class _ChatDelta(msgspec.Struct):
        content: str | None = None
        reasoning_content: str | None = None
        reasoning: str | None = None
        refusal: None = None
        tool_calls: None = None

    class _ChatChoice(msgspec.Struct):
        delta: _ChatDelta
        index: Literal[0] | None = None
        finish_reason: None = None

    class _ChatChunk(msgspec.Struct):
        choices: tuple[_ChatChoice]
        error: None = None
        usage: None = None
        x_tool_start: None = None
        x_tool_result: None = None

    class _BlockDelta(msgspec.Struct):
        type: str
        text: str | None = None
        thinking: str | None = None

    class _ContentBlockDelta(msgspec.Struct):
        type: Literal["content_block_delta"]
        delta: _BlockDelta
        index: int = 0

    CHAT_CHUNK = msgspec.json.Decoder(_ChatChunk).decode
    ANTHROPIC_DELTA = msgspec.json.Decoder(_ContentBlockDelta).decode
    REFUSED = (msgspec.DecodeError, RecursionError)
