"""Bounded JSON parsing for every provider decoder (pure, sans-I/O; architecture §2 "Wire formats").

Theory of operation
-------------------
Provider bodies are untrusted. The standard library's ``json`` recurses once per nesting level,
so ``[`` × 100000 raises ``RecursionError``, which is no :class:`ProviderError` and so neither
retried nor handed to the next provider. Every JSON text a decoder reads (an SSE event's data, an
NDJSON line, streamed tool arguments, a blocking answer) goes through :func:`parse_json` (or
:func:`parse_json_prefix`), which turns each of these into a :class:`StreamProtocolError`:

* text longer than :data:`MAX_FRAME_BYTES` (8 MiB; counted in characters, which never exceed
  the UTF-8 bytes they came from; the framing decoders bound the bytes themselves);
* nesting deeper than :data:`MAX_JSON_DEPTH` (256) arrays/objects;
* text that is not JSON (RFC 8259).

Cost: two ``str.count`` passes (C speed) decide whether the text holds more than 256 brackets
at all; only then is the depth measured, once, linearly and without recursion, stopping at the
first bracket past the limit (strings are skipped, so brackets inside them do not count). An
ordinary event (a few dozen brackets) pays only the two counts. The implementation is one
small module so that it can switch to another parser later without touching the decoders.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from providers.errors import StreamProtocolError, snippet
from providers.json_fast import loads

__all__ = [
    "MAX_FRAME_BYTES",
    "MAX_JSON_DEPTH",
    "nested_deeper_than",
    "parse_json",
    "parse_json_prefix",
    "within_depth",
]

MAX_FRAME_BYTES = 8 * 1024 * 1024
"""The largest line, event or JSON text a decoder accepts (8 MiB)."""

MAX_JSON_DEPTH = 256
"""The deepest nesting of arrays and objects accepted (256 levels; ``[[1]]`` is 2)."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = str.maketrans({"[": "+", "{": "+", "]": "-", "}": "-"})
_DECODER = json.JSONDecoder()


def nested_deeper_than(text: str, limit: int) -> bool:
    """True when the brackets of ``text`` nest deeper than ``limit`` levels (strings skipped);
    linear time, and it stops at the first bracket past the limit.

    For text that is not JSON the answer is only an estimate (an unterminated string is not
    skipped), which is enough: such text is rejected by the parser anyway.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).translate(_STEP)
    return any(depth > limit for depth in accumulate(1 if s == "+" else -1 for s in brackets))


def within_depth(text: bytes) -> bool:
    """True when ``text`` (JSON as UTF-8) has too few brackets to nest deeper than
    :data:`MAX_JSON_DEPTH` (the two counts :func:`parse_json` starts with; a text for which
    this is False is then measured by :func:`parse_json`)."""
    return len(text) <= MAX_JSON_DEPTH or text.count(b"[") + text.count(b"{") <= MAX_JSON_DEPTH


def _check(text: str, what: str) -> None:
    if len(text) > MAX_FRAME_BYTES:
        raise StreamProtocolError(f"{what} is larger than {MAX_FRAME_BYTES} bytes")
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and nested_deeper_than(
        text, MAX_JSON_DEPTH
    ):
        raise StreamProtocolError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")


def _text(data: bytes, what: str) -> str:
    if len(data) > MAX_FRAME_BYTES:
        raise StreamProtocolError(f"{what} is larger than {MAX_FRAME_BYTES} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise StreamProtocolError(f"{what} is not UTF-8 JSON") from exc


def parse_json(text: str | bytes, *, what: str = "event data") -> Any:
    """Parse one JSON text within the bounds (see the module docstring).

    Args:
        text: the JSON text; bytes are decoded as UTF-8 (invalid bytes are a protocol error).
        what: names the text in the error message (``"event data"``, ``"line"``, ``"answer"``).

    Raises:
        StreamProtocolError: too large, nested too deep, or not JSON.
    """
    if isinstance(text, bytes):
        text = _text(text, what)
    if len(text) > MAX_FRAME_BYTES or text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        _check(text, what)  # the rare case: measure it
    try:
        return loads(text)  # msgspec when installed, with json's results (providers/json_fast.py)
    except (ValueError, RecursionError) as exc:
        raise StreamProtocolError(f"{what} is not JSON: {snippet(text)!r}") from exc


def parse_json_prefix(text: str, *, what: str = "text") -> tuple[Any, int]:
    """Parse the JSON value at the start of ``text`` (``json.JSONDecoder.raw_decode``) within
    the bounds; returns ``(value, end)``, ``end`` being the index just after the value.

    Raises:
        ValueError: no complete JSON value starts the text (it may still be arriving).
        StreamProtocolError: the text is too large or nested too deep.
    """
    _check(text, what)
    try:
        value, end = _DECODER.raw_decode(text)
    except RecursionError as exc:  # unreachable within the depth bound; kept typed anyway
        raise StreamProtocolError(f"{what} is nested too deeply") from exc
    return value, end
