"""Ollama native ``/api/chat`` answers → stream events (pure, sans-I/O).

Theory of operation
-------------------
A streamed answer (https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion)
is NDJSON (``application/x-ndjson``): one JSON object per line.

* ``message.content`` → text, ``message.thinking`` → reasoning.
* ``message.tool_calls``: complete calls whose ``function.arguments`` is an *object*; it is
  serialised to JSON text. Ollama sends no call ids, so ``call_<n>`` is generated (n counts the
  calls of this answer from 0; a wire ``id``, when present, is kept). Calls may come in any
  record, the final one included (case C11: a one-record answer).
* ``done: true`` is the terminal record: :class:`Usage` from ``prompt_eval_count`` /
  ``eval_count`` (no cache count: ``None``) and :class:`Final` (``done_reason`` ``stop`` →
  ``stop``, ``length`` → ``length``, anything else → ``other``; ``tool_calls`` when calls were
  made). EOF before it is :class:`StreamTruncated` (a cut last line too).
* ``{"error": "..."}`` → :class:`ProviderServerError` carrying the server's message.

Raw tool JSON (case C11): some models write the call as text (``[{"name": "get_weather",
"parameters": {}}]``) instead of using ``tool_calls``. While tools are offered and the content
so far could be the start of such JSON (its first non-space character is ``[`` or ``{``, and the
next ones fit ``[{"<key>`` or ``{"<key>`` with a tool-call key), the content is *held*:

* held → text: as soon as it is clearly not a tool call (another first character, a prefix that
  cannot be a call, or a complete JSON value that is not a call);
* held → tool calls: a complete JSON value that is a call (an object, or a non-empty array of
  objects, with ``name`` an offered tool, or any name with ``parameters``/``arguments`` an
  object, or the ``{"function": {...}}`` shape); text after it streams normally;
* at ``done``: whatever is still held is parsed once more, then emitted as calls or as text.

So no raw tool JSON reaches the chat, and an ordinary answer is delayed only while it could
still be one. Without tools nothing is held.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from providers.bounded_json import parse_json, parse_json_prefix
from providers.errors import ProviderServerError, StreamProtocolError, StreamTruncated, snippet
from providers.events import (
    Final,
    FinishReason,
    StreamChunk,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)
from providers.ndjson import NDJSONDecoder
from providers.stream_reducer import StreamReducer, arguments_json

__all__ = ["OllamaStreamReducer", "map_done_reason"]

_DONE_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length"}
_CALL_KEYS = ("name", "arguments", "parameters", "function", "type", "id")
"""Keys that may open a tool call written as JSON text."""

_Hold = Literal["undecided", "json", "call", "text"]
"""Content state while tools are offered: nothing decided yet (only spaces), possible tool JSON
held, a complete call held, or plain text streaming."""


def map_done_reason(done_reason: str | None) -> FinishReason:
    """Normalise ``done_reason``; ``None`` (older servers send none) counts as ``stop``."""
    if done_reason is None:
        return "stop"
    return _DONE_REASONS.get(done_reason, "other")


def could_be_tool_json(text: str) -> bool:
    """True while ``text`` (no leading space) may still be the start of a tool call in JSON."""
    pos = 0
    if text.startswith("["):
        pos = _skip_space(text, 1)
        if pos == len(text):
            return True
    if text[pos] != "{":
        return False
    pos = _skip_space(text, pos + 1)
    if pos == len(text):
        return True
    if text[pos] != '"':
        return False
    key, quote, _ = text[pos + 1 :].partition('"')
    if quote:
        return key in _CALL_KEYS
    return any(k.startswith(key) for k in _CALL_KEYS)


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


class OllamaStreamReducer(StreamReducer):
    """NDJSON body of ``POST /api/chat`` (or one blocking answer object) → events.

    Args:
        tool_names: the names of the tools offered with the request (empty: nothing is held).
    """

    terminal_signal = 'a record with "done": true'

    def __init__(self, tool_names: Iterable[str] = ()) -> None:
        super().__init__()
        self._ndjson = NDJSONDecoder()
        self._tools = frozenset(tool_names)
        self._hold: _Hold = "undecided" if self._tools else "text"
        self._held = ""
        self._calls = 0

    def _frames(self, chunk: bytes, *, final: bool) -> Iterable[Any]:
        lines = self._ndjson.close() if final else self._ndjson.feed(chunk)
        for line in lines:
            try:
                yield parse_json(line, what="line")
            except StreamProtocolError as exc:
                if final and isinstance(exc.__cause__, ValueError):  # cut before its newline
                    raise StreamTruncated(f"the stream ended mid-line: {snippet(line)!r}") from exc
                raise

    def _on_object(self, obj: dict[str, Any]) -> list[StreamEvent]:
        if "error" in obj:
            error = obj["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise ProviderServerError(f"Ollama error: {message}")
        message = obj.get("message")
        message = message if isinstance(message, dict) else {}
        out: list[StreamEvent] = []
        thinking = message.get("thinking")
        if isinstance(thinking, str) and thinking:
            out.append(TextDelta(StreamChunk(reasoning=thinking)))
        content = message.get("content")
        if isinstance(content, str) and content:
            out.extend(self._on_content(content))
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not function.get("name"):
                raise StreamProtocolError(f"tool call without a function name: {call!r:.80}")
            arguments = arguments_json(function.get("arguments"))
            out.append(ToolCall(self._call_id(call.get("id")), str(function["name"]), arguments))
        if obj.get("done") is True:
            out.extend(self._on_done(obj))
        return out

    def _call_id(self, wire_id: Any) -> str:
        self._calls += 1
        return wire_id if isinstance(wire_id, str) and wire_id else f"call_{self._calls - 1}"

    def _on_content(self, text: str) -> list[StreamEvent]:
        if self._hold == "text":
            return [TextDelta(StreamChunk(delta=text))]
        self._held += text
        if self._hold == "undecided":
            start = self._held.lstrip()
            if not start:
                return []  # only spaces so far: cannot tell yet
            if not could_be_tool_json(start):
                return self._release()
            self._hold = "json"
        if self._hold == "json" and "]" not in text and "}" not in text:
            return []  # no JSON value can have completed in this piece
        return self._settle(final=False)

    def _settle(self, *, final: bool) -> list[StreamEvent]:
        """Decide what the held JSON is: calls, text, or (unless ``final``) not known yet."""
        start = self._held.lstrip()
        try:
            value, end = parse_json_prefix(start, what="content held as possible tool JSON")
        except StreamProtocolError:
            return self._release()  # beyond the JSON bounds: no tool call, so it is text
        except ValueError:
            return self._release() if final else []  # incomplete JSON
        calls = self._as_calls(value)
        if calls is None:
            return self._release()
        rest = start[end:]
        if not final and not rest.strip():
            self._hold = "call"  # a complete call: hold while only spaces follow
            return []
        self._held, self._hold = "", "text"
        out = self._tool_calls(calls)
        if rest.strip():
            out.append(TextDelta(StreamChunk(delta=rest)))
        return out

    def _release(self) -> list[StreamEvent]:
        held, self._held, self._hold = self._held, "", "text"
        return [TextDelta(StreamChunk(delta=held))] if held else []

    def _as_calls(self, value: Any) -> list[tuple[str, str]] | None:
        """``(name, arguments)`` of the calls ``value`` writes as JSON, or ``None`` when it is
        not a call. A call of a tool that was not offered still counts when it carries
        ``parameters``/``arguments``: the tool registry answers it with a tool error, which beats
        showing raw tool JSON in the chat."""
        entries = value if isinstance(value, list) else [value]
        found: list[tuple[str, str]] = []
        for entry in entries:
            if not isinstance(entry, dict):
                return None
            function = entry.get("function")
            spec = function if isinstance(function, dict) else entry
            name = spec.get("name")
            if not isinstance(name, str) or not name:
                return None
            if name not in self._tools and not ({"parameters", "arguments"} & spec.keys()):
                return None  # a name alone is too weak a sign for a tool nobody offered
            arguments = spec.get("parameters", spec.get("arguments"))
            try:
                found.append((str(name), arguments_json(arguments)))
            except StreamProtocolError:
                return None
        return found or None

    def _tool_calls(self, calls: list[tuple[str, str]]) -> list[StreamEvent]:
        return [ToolCall(self._call_id(None), name, arguments) for name, arguments in calls]

    def _on_done(self, obj: dict[str, Any]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if self._hold in ("json", "call"):
            out.extend(self._settle(final=True))
        out.extend(self._release())  # spaces still undecided
        self.done = True
        counts = (obj.get("prompt_eval_count"), obj.get("eval_count"))
        if any(isinstance(n, int) for n in counts):
            out.append(Usage(*(n if isinstance(n, int) else None for n in counts)))
        reason = obj.get("done_reason")
        reason = str(reason) if reason is not None else None
        finish = "tool_calls" if self._calls else map_done_reason(reason)
        out.append(Final(finish, reason))
        return out
