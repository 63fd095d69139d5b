"""Anthropic Messages API answers → stream events (pure, sans-I/O).

Theory of operation
-------------------
A streamed Messages answer (https://docs.anthropic.com/en/api/messages-streaming) is SSE whose
events are dispatched on the JSON ``type`` field (the ``event:`` line may be missing, and proxies
drop it):

* ``message_start``: ``message.usage`` opens the counts (input, cache read, cache creation, and
  a provisional output count).
* ``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` per block ``index``:
  ``text_delta`` → text, ``thinking_delta`` → reasoning (emitted as they arrive);
  ``input_json_delta`` fragments of a ``tool_use`` block are concatenated and parsed once, at
  ``content_block_stop`` (an empty concatenation means ``{}``, case C06); the
  :class:`ToolCall` events are emitted at ``message_stop``, in content order (by ``index``,
  not in the order their blocks stopped: parallel blocks may stop in any order, architecture
  §5), so a cut stream never yields a half-built call.
  ``server_tool_use`` blocks and ``*_tool_result`` blocks are tools Anthropic ran itself:
  :class:`PreExecutedToolCall` / :class:`PreExecutedToolResult`.
* ``message_delta``: ``delta.stop_reason`` and cumulative ``usage`` (the last value wins).
* ``message_stop``: the terminal signal. :class:`Usage` (if any count was reported) and
  :class:`Final` are emitted here, so a ``stop_reason`` without ``message_stop`` is no end: EOF
  then is :class:`StreamTruncated`.
* ``ping`` and unknown types are ignored; ``error`` raises a typed error (case C04:
  ``overloaded_error`` → retryable :class:`ProviderServerError`).

A blocking answer (``stream: false``) is folded by the same reducer, as the events its stream
would send (:meth:`AnthropicStreamReducer._answer_objects`).

Usage: input = uncached + cache read + cache creation (the API reports them apart), cached =
cache read, output = the last reported output count; a count never reported is ``None``.

When the answer holds ``thinking``/``redacted_thinking`` blocks, its content blocks are kept as
``provider_items``: the API wants them back verbatim before a ``tool_result`` (extended thinking
with tool use).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from providers.bounded_json import MAX_JSON_DEPTH, within_depth
from providers.error_events import error_from_code
from providers.errors import StreamProtocolError
from providers.events import (
    Final,
    FinishReason,
    PreExecutedToolCall,
    PreExecutedToolResult,
    StreamChunk,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
    text_delta,
)
from providers.fast_shapes import ANTHROPIC_DELTA, REFUSED
from providers.sse import SSEDecoder, parse_event_json
from providers.stream_reducer import StreamReducer, arguments_json, type_field

__all__ = ["AnthropicStreamReducer", "map_stop_reason", "message_events"]

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def map_stop_reason(stop_reason: str | None) -> FinishReason:
    """Normalise ``stop_reason``; ``None`` (never reported) counts as a normal ``stop``."""
    if stop_reason is None:
        return "stop"
    return _STOP_REASONS.get(stop_reason, "other")


@dataclass
class _UsageCounts:
    """Token counts as reported so far (``None`` = never reported)."""

    uncached: int | None = None
    cache_read: int | None = None
    cache_creation: int | None = None
    output: int | None = None

    def update(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key, attr in (
            ("input_tokens", "uncached"),
            ("cache_read_input_tokens", "cache_read"),
            ("cache_creation_input_tokens", "cache_creation"),
            ("output_tokens", "output"),
        ):
            value = usage.get(key)
            if isinstance(value, int):
                setattr(self, attr, value)

    def event(self) -> Usage | None:
        parts = [n for n in (self.uncached, self.cache_read, self.cache_creation) if n is not None]
        total_input = sum(parts) if parts else None
        if total_input is None and self.output is None:
            return None
        return Usage(total_input, self.output, self.cache_read)


@dataclass
class _Block:
    """One content block being streamed; ``start`` is its ``content_block`` object."""

    start: dict[str, Any]
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)

    @property
    def type(self) -> str:
        return str(self.start.get("type", ""))

    def finished(self) -> dict[str, Any]:
        """The block as the blocking API would return it."""
        block = dict(self.start)
        if self.type == "text":
            block["text"] = str(block.get("text") or "") + "".join(self.text)
        elif self.type == "thinking":
            block["thinking"] = str(block.get("thinking") or "") + "".join(self.text)
            block["signature"] = str(block.get("signature") or "") + "".join(self.signature)
        elif self.type in ("tool_use", "server_tool_use") and self.text:
            block["input"] = _parse_input("".join(self.text))
        return block


def _parse_input(text: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(arguments_json(text))
    return value


def _block_events(block: dict[str, Any], names: dict[str, str]) -> list[StreamEvent]:
    """Events of a complete non-text block (``names``: server tool id → name, updated)."""
    kind = block.get("type")
    if kind == "tool_use":
        return [ToolCall(str(block.get("id", "")), str(block["name"]), _input_text(block))]
    if kind == "server_tool_use":
        names[str(block.get("id", ""))] = str(block.get("name", ""))
        return [PreExecutedToolCall(str(block.get("name", "")), _input_text(block))]
    if isinstance(kind, str) and kind.endswith("_tool_result"):
        name = names.get(str(block.get("tool_use_id", "")), kind.removesuffix("_tool_result"))
        content = block.get("content")
        output = json.dumps(content, ensure_ascii=False)
        return [PreExecutedToolResult(name, output, _result_error(content))]
    return []


def _result_error(content: Any) -> str | None:
    """A server tool's failure: its result content is one ``*_error`` object (such as
    ``{"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}``); the
    error code, with spaces, is the cause."""
    if not isinstance(content, dict):
        return None
    kind = content.get("type")
    if not isinstance(kind, str) or not kind.endswith("_error"):
        return None
    code = content.get("error_code")
    return code.replace("_", " ") if isinstance(code, str) and code else "failed"


def _input_text(block: dict[str, Any]) -> str:
    if "name" not in block:
        raise StreamProtocolError("tool_use block without a name")
    return arguments_json(block.get("input"))


class AnthropicStreamReducer(StreamReducer):
    """SSE body of ``POST /v1/messages`` with ``stream: true`` → events."""

    terminal_signal = "message_stop"

    def __init__(self) -> None:
        super().__init__()
        self._sse = SSEDecoder()
        self._blocks: dict[int, _Block] = {}
        self._finished: dict[int, dict[str, Any]] = {}
        self._calls: dict[int, list[StreamEvent]] = {}
        self._server_tools: dict[str, str] = {}
        self._usage = _UsageCounts()
        self._stop_reason: str | None = None

    def _frames(self, chunk: bytes, *, final: bool) -> Iterable[Any]:
        """The events of the read as dicts, lazily (a bad one fails after the good ones),
        except text and thinking deltas: those are decoded into
        :data:`providers.fast_shapes.ANTHROPIC_DELTA` and reduced here, as
        :meth:`_on_delta` reduces their dicts."""
        read, fast, blocks = self._read, ANTHROPIC_DELTA, self._blocks
        add_text = read.text
        # Within the depth bound as a whole, a read that continues no event of an earlier one has
        # no event past it: two counts a read, not two an event (bounded_json.within_depth).
        shallow = not final and not self._sse.continues_event and within_depth(chunk)
        for payload in self._sse.close_payloads() if final else self._sse.feed_payloads(chunk):
            if fast is not None and (
                shallow or len(payload) <= MAX_JSON_DEPTH or within_depth(payload)
            ):
                try:
                    event = fast(payload)
                except REFUSED:
                    pass  # not a content_block_delta: parsed as a dict below
                else:
                    delta = event.delta
                    if delta.type == "text_delta":
                        text = delta.text or ""
                        block = blocks.get(event.index)
                        if block is None:  # see _block_text
                            self._block_text(event.index, "text", text)
                        else:
                            block.text.append(text)
                        if text:
                            add_text(text)
                        continue
                    if delta.type == "thinking_delta":
                        text = self._block_text(event.index, "thinking", delta.thinking or "")
                        if text:
                            read.thought(text)
                        continue
            yield parse_event_json(payload.decode("utf-8", "replace"))

    def _answer_objects(self, answer: Any) -> Iterable[Any]:
        """A blocking ``Message`` as the events its stream would send: ``message_start`` with
        its usage, a start and a stop per content block (the block whole), ``message_delta``
        with the ``stop_reason``, ``message_stop``. An ``error`` object (``{"type": "error",
        "error": {…}}``, as the API and proxies send it with a 2xx status too) is the ``error``
        event it would be in a stream, so it raises its typed error; so is a bare
        ``{"error": {…}}`` without ``content`` (the OpenAI error shape some proxies send)."""
        if isinstance(answer, dict) and answer.get("type") == "error":
            yield answer
            return
        if isinstance(answer, dict) and "content" not in answer and "error" in answer:
            yield {"type": "error", "error": answer["error"]}
            return
        if not isinstance(answer, dict) or not isinstance(answer.get("content", []), list):
            raise StreamProtocolError("the answer is not a Messages API message")
        yield {"type": "message_start", "message": {"usage": answer.get("usage")}}
        for index, block in enumerate(answer.get("content") or ()):
            yield {"type": "content_block_start", "index": index, "content_block": block}
            yield {"type": "content_block_stop", "index": index}
        yield {"type": "message_delta", "delta": {"stop_reason": answer.get("stop_reason") or None}}
        yield {"type": "message_stop"}

    def _on_object(self, obj: dict[str, Any]) -> list[StreamEvent]:
        kind = type_field(obj)
        if kind == "message_start":
            message = obj.get("message")
            if isinstance(message, dict):
                self._usage.update(message.get("usage"))
        elif kind == "content_block_start":
            start = obj.get("content_block")
            if not isinstance(start, dict):
                raise StreamProtocolError("content_block_start without a content_block")
            block = self._blocks[_index(obj)] = _Block(start)
            if block.type == "text" and start.get("text"):
                return [TextDelta(StreamChunk(delta=str(start["text"])))]
            if block.type == "thinking" and start.get("thinking"):
                return [TextDelta(StreamChunk(reasoning=str(start["thinking"])))]
        elif kind == "content_block_delta":
            return self._on_delta(_index(obj), obj.get("delta"))
        elif kind == "content_block_stop":
            index = _index(obj)
            stopped = self._blocks.pop(index, None)
            if stopped is not None:
                finished = self._finished[index] = stopped.finished()
                if stopped.type == "tool_use":
                    self._calls[index] = _block_events(finished, self._server_tools)
                elif stopped.type not in ("text", "thinking"):
                    return _block_events(finished, self._server_tools)
        elif kind == "message_delta":
            delta = obj.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                self._stop_reason = str(delta["stop_reason"])
            self._usage.update(obj.get("usage"))
        elif kind == "message_stop":
            return self._on_stop()
        elif kind == "error":
            error = obj.get("error")
            error = error if isinstance(error, dict) else {}
            raise error_from_code(
                _str_or_none(error.get("type")), _str_or_none(error.get("message")), what="error"
            )
        return []  # ping, and types this reducer does not know

    def _on_delta(self, index: int, delta: Any) -> list[StreamEvent]:
        if not isinstance(delta, dict):
            raise StreamProtocolError("content_block_delta without a delta")
        block = self._blocks.get(index)
        kind = type_field(delta)
        if kind == "text_delta":
            text = self._block_text(index, "text", str(delta.get("text") or ""))
            return [text_delta(text)] if text else []
        if kind == "thinking_delta":
            text = self._block_text(index, "thinking", str(delta.get("thinking") or ""))
            return [text_delta("", text)] if text else []
        if kind == "input_json_delta":
            if block is None:
                raise StreamProtocolError(f"input_json_delta for block {index}, never started")
            block.text.append(str(delta.get("partial_json") or ""))
        elif kind == "signature_delta" and block is not None:
            block.signature.append(str(delta.get("signature") or ""))
        return []  # citations_delta and unknown delta types carry no text

    def _block_text(self, index: int, kind: str, text: str) -> str:
        """Add ``text`` to block ``index``; a block never started (a proxy that drops
        ``content_block_start``) is one of ``kind`` (``"text"``, ``"thinking"``). Returns
        ``text``."""
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block({"type": kind, kind: ""})
        block.text.append(text)
        return text

    def _on_stop(self) -> list[StreamEvent]:
        self.done = True
        blocks = [self._finished[index] for index in sorted(self._finished)]
        if any(block.get("type") in _THINKING_TYPES for block in blocks):
            self.provider_items = tuple(blocks)
        out: list[StreamEvent] = [e for i in sorted(self._calls) for e in self._calls[i]]
        usage = self._usage.event()
        if usage is not None:
            out.append(usage)
        out.append(Final(map_stop_reason(self._stop_reason), self._stop_reason))
        return out


def _index(obj: dict[str, Any]) -> int:
    index = obj.get("index", 0)
    if not isinstance(index, int):
        raise StreamProtocolError(f"block index is not an integer: {index!r}")
    return index


def _str_or_none(value: Any) -> str | None:
    return str(value) if value else None


def message_events(message: Any) -> tuple[list[StreamEvent], tuple[dict[str, Any], ...]]:
    """The events and provider items of a blocking answer (a ``Message`` object), folded by
    :class:`AnthropicStreamReducer` (:meth:`StreamReducer.answer`), so they fold like the
    streamed answer's by construction.

    Returns:
        ``(events, provider_items)``.

    Raises:
        StreamProtocolError: the body is not a Message (or a tool input is not an object).
        ProviderError: the body is an ``error`` event.
    """
    reducer = AnthropicStreamReducer()
    events = reducer.answer(message)
    return events, reducer.provider_items
