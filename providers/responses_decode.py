"""OpenAI Responses API answers → stream events (pure, sans-I/O).

Theory of operation
-------------------
A streamed Responses answer (https://platform.openai.com/docs/api-reference/responses-streaming)
is SSE whose events are dispatched on the JSON ``type`` field; there is no ``[DONE]``:

* ``response.output_text.delta`` (and ``response.refusal.delta``) → text;
  ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta`` → reasoning.
* Function calls: ``response.output_item.added`` opens a ``function_call`` item (item ``id``,
  ``call_id``, ``name``); ``response.function_call_arguments.delta`` appends to its arguments and
  ``.done`` *replaces* them with the final text; ``response.output_item.done`` carries the whole
  item, and the :class:`ToolCall` is emitted there, once. Its ``id`` is the ``call_id`` (what a
  ``function_call_output`` must reference), never the item id (``fc_…``).
* ``response.completed`` is the terminal signal: calls not yet emitted are taken from its
  ``output[]``; when no text delta was seen, the text of its ``message`` items is emitted as one
  delta (proxies that send only the final object), likewise reasoning; then :class:`Usage`
  (``input_tokens``, ``output_tokens``, ``input_tokens_details.cached_tokens``) and
  :class:`Final` (``tool_calls`` when calls were made, else ``stop``; raw value: the status).
  Its ``output[]`` becomes ``provider_items``: sent back verbatim with the next request, since
  reasoning models reject a ``function_call`` without its ``reasoning`` item.
* ``response.incomplete`` is also terminal, a finish reason and not an error:
  ``incomplete_details.reason`` ``max_output_tokens`` → ``length``, ``content_filter`` →
  ``content_filter``, else ``other`` (case C05).
* ``response.failed`` (with or without ``error``) and bare ``error`` events raise typed errors:
  ``rate_limit_exceeded`` → :class:`ProviderRateLimited`, ``server_error`` or no code →
  :class:`ProviderServerError` (case C05).

Everything after the terminal signal is ignored; the driver stops reading there. A blocking
answer (``stream: false``) is folded by the same reducer, as the terminal event carrying it
(:meth:`ResponsesStreamReducer._answer_objects`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from providers.error_events import error_from_code
from providers.errors import ProviderError, StreamProtocolError
from providers.events import (
    Final,
    FinishReason,
    StreamChunk,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)
from providers.sse import SSEDecoder, parse_event_json
from providers.stream_reducer import StreamReducer, arguments_json, type_field

__all__ = ["ResponsesStreamReducer", "map_incomplete_reason", "output_items", "response_events"]

_INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}
_TERMINAL_EVENTS = {"failed": "response.failed", "incomplete": "response.incomplete"}
_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_REASONING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)


def map_incomplete_reason(reason: str | None) -> FinishReason:
    """Normalise ``incomplete_details.reason``."""
    return _INCOMPLETE_REASONS.get(reason or "", "other")


@dataclass
class _Call:
    """A ``function_call`` item being streamed."""

    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Seen:
    """What the stream already delivered before its terminal event."""

    text: bool = False
    reasoning: bool = False
    call_ids: set[str] = field(default_factory=set)


def _call_event(item: dict[str, Any], seen: _Seen) -> list[StreamEvent]:
    """The :class:`ToolCall` of a complete ``function_call`` item, unless already emitted."""
    call_id = str(item.get("call_id") or item.get("id") or "")
    if call_id in seen.call_ids:
        return []
    if not item.get("name"):
        raise StreamProtocolError("function_call item without a name")
    seen.call_ids.add(call_id)
    return [ToolCall(call_id, str(item["name"]), arguments_json(item.get("arguments")))]


def _output_text(items: list[dict[str, Any]]) -> tuple[str, str]:
    """(text, reasoning) of ``output[]``: message text/refusal parts, reasoning summaries."""
    text: list[str] = []
    reasoning: list[str] = []
    for item in items:
        if item.get("type") == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    text.append(str(part.get("text") or ""))
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    text.append(str(part.get("refusal") or ""))
        elif item.get("type") == "reasoning":
            for key in ("summary", "content"):
                for part in item.get(key) or ():
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        reasoning.append(part["text"])
    return "".join(text), "".join(reasoning)


def output_items(response: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The ``output[]`` items of a response: the ``provider_items`` to send back verbatim."""
    return tuple(item for item in response.get("output") or () if isinstance(item, dict))


def _usage(response: dict[str, Any]) -> Usage | None:
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    counts = (usage.get("input_tokens"), usage.get("output_tokens"), cached)
    if all(n is None for n in counts):
        return None
    return Usage(*(n if isinstance(n, int) else None for n in counts))


def _failure(response: Any, *, what: str) -> ProviderError:
    """The typed error of a failed ``response`` (its ``error`` may be ``null``, case C05)."""
    error = response.get("error") if isinstance(response, dict) else None
    if not isinstance(error, dict):
        return error_from_code(None, None, what=what)
    code = error.get("code") or (error.get("type") if error.get("type") != "error" else None)
    message = error.get("message")
    return error_from_code(
        str(code) if code else None, str(message) if message else None, what=what
    )


def response_events(
    response: Any,
    seen: _Seen | None = None,
    *,
    pending: Iterable[_Call] = (),
    status: str | None = None,
) -> list[StreamEvent]:
    """The closing events of a final ``response`` object (blocking answer or terminal event).

    Args:
        response: the ``response`` object.
        seen: what the stream already delivered (``None`` for a blocking answer).
        pending: streamed calls that ``output[]`` may lack (emitted for a completed response).
        status: ``completed``/``incomplete`` as told by the terminal event's type; default:
            the object's own ``status``.

    Raises:
        ProviderError: the response failed (typed by its error code).
        StreamProtocolError: the object is not a response.
    """
    if not isinstance(response, dict) or not isinstance(response.get("output", []), list):
        raise StreamProtocolError("the answer is not a Responses API response object")
    seen = seen or _Seen()
    status = status or str(response.get("status") or "completed")
    if status == "failed":
        raise _failure(response, what="response.failed")
    items = [item for item in response.get("output") or () if isinstance(item, dict)]
    out: list[StreamEvent] = []
    text, reasoning = _output_text(items)
    chunk = StreamChunk(
        delta="" if seen.text else text, reasoning="" if seen.reasoning else reasoning
    )
    if chunk.delta or chunk.reasoning:
        out.append(TextDelta(chunk))
    for item in items:
        if item.get("type") == "function_call" and (
            status == "completed" or item.get("status") == "completed"
        ):
            out.extend(_call_event(item, seen))
    if status == "completed":
        for call in pending:
            item = {
                "call_id": call.call_id,
                "name": call.name,
                "arguments": "".join(call.arguments),
            }
            out.extend(_call_event(item, seen))
    if (usage := _usage(response)) is not None:
        out.append(usage)
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        out.append(Final(map_incomplete_reason(reason), str(reason or status)))
    else:
        out.append(Final("tool_calls" if seen.call_ids else "stop", status))
    return out


class ResponsesStreamReducer(StreamReducer):
    """SSE body of ``POST /v1/responses`` with ``stream: true`` → events."""

    terminal_signal = "response.completed"

    def __init__(self) -> None:
        super().__init__()
        self._sse = SSEDecoder()
        self._seen = _Seen()
        self._calls: dict[str, _Call] = {}  # by item id

    def _frames(self, chunk: bytes, *, final: bool) -> Iterable[Any]:
        frames = self._sse.close_data() if final else self._sse.feed_data(chunk)
        return map(parse_event_json, frames)  # lazy: a bad frame fails after the good ones

    def _answer_objects(self, answer: Any) -> Iterable[Any]:
        """A blocking response object as the terminal event its stream ends with
        (``response.failed``/``.incomplete`` by its ``status``, else ``response.completed``).
        An error object instead of a response (``{"type": "error", …}``, or ``{"error": {…}}``
        without a ``status``, as servers and proxies send it with a 2xx status too) is the
        ``error`` event it would be in a stream, so it raises its typed error."""
        if not isinstance(answer, dict):
            raise StreamProtocolError("the answer is not a Responses API response object")
        if answer.get("type") == "error":
            return (answer,)
        if answer.get("status") is None and answer.get("error") is not None:
            return ({"type": "error", "error": answer["error"]},)
        kind = _TERMINAL_EVENTS.get(str(answer.get("status")), "response.completed")
        return ({"type": kind, "response": answer},)

    def _on_object(self, obj: dict[str, Any]) -> list[StreamEvent]:
        kind = type_field(obj)
        if kind in _TEXT_DELTAS:
            text = str(obj.get("delta") or "")
            self._seen.text = self._seen.text or bool(text)
            return [TextDelta(StreamChunk(delta=text))] if text else []
        if kind in _REASONING_DELTAS:
            text = str(obj.get("delta") or "")
            self._seen.reasoning = self._seen.reasoning or bool(text)
            return [TextDelta(StreamChunk(reasoning=text))] if text else []
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = obj.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                if kind == "response.output_item.done":
                    self._calls.pop(str(item.get("id")), None)
                    return _call_event(item, self._seen)
                call = _Call(str(item.get("call_id") or item.get("id")), str(item.get("name")))
                call.arguments.append(str(item.get("arguments") or ""))
                self._calls[str(item.get("id"))] = call
        elif kind == "response.function_call_arguments.delta":
            if (delta_call := self._calls.get(str(obj.get("item_id")))) is not None:
                delta_call.arguments.append(str(obj.get("delta") or ""))
        elif kind == "response.function_call_arguments.done":
            if (done_call := self._calls.get(str(obj.get("item_id")))) is not None:
                done_call.arguments = [str(obj.get("arguments") or "")]  # replaces the deltas
        elif kind == "response.failed":
            raise _failure(obj.get("response"), what="response.failed")
        elif kind in ("response.completed", "response.incomplete"):
            response = obj.get("response")
            status = "completed" if kind == "response.completed" else "incomplete"
            events = response_events(
                response, self._seen, pending=self._calls.values(), status=status
            )
            self.done = True
            self.provider_items = output_items(response if isinstance(response, dict) else {})
            return events
        elif kind == "error":
            error = obj.get("error")
            raise _failure({"error": error if isinstance(error, dict) else obj}, what="error")
        return []
