"""Chat Completions answers → stream events (pure, sans-I/O).

Theory of operation
-------------------
A streamed Chat Completions answer (https://platform.openai.com/docs/api-reference/chat-streaming)
is a sequence of SSE events whose data is a ``chat.completion.chunk`` JSON object, ended by the
literal data ``[DONE]``. OpenAI-compatible servers vary, so the reducer accepts:

* ``choices[0].delta``: ``content`` is answer text; ``reasoning_content`` (DeepSeek, vLLM) or its
  alias ``reasoning`` (OpenRouter, newer vLLM) is reasoning, ``reasoning_content`` winning when
  both are set. Text and reasoning of one delta make one :class:`StreamChunk`.
* ``delta.tool_calls``: fragments of calls. A fragment with an ``index`` continues the call of
  that index, unless it carries an ``id`` different from that call's (a new call). A fragment
  whose ``index`` is missing or ``null`` continues the latest call unless it carries a new ``id``
  (case C01). ``arguments`` strings are concatenated; an object is serialised. A call is
  emitted once, complete, when the ``finish_reason`` (or ``[DONE]``) arrives, so a stream cut
  before that never yields a half-built call.
* ``usage`` (usually in a last chunk with ``choices: []``, case C02, sent because we ask with
  ``stream_options.include_usage``): kept, the last one winning, and emitted once just before
  :class:`Final`; nothing is emitted when the server reported none.
* ``x_tool_start`` / ``x_tool_result``: a proxy's own tool runs, reported as
  :class:`PreExecutedToolCall` / :class:`PreExecutedToolResult`.
* ``{"error": {...}}``: an error after HTTP 200, raised as a typed error at that point.

The decoder is a :class:`providers.stream_reducer.StreamReducer`, the shape the other three
formats share: states *open* → (non-null ``finish_reason``) → *finishing* → (``[DONE]``, EOF, or
the idle timeout) → *done*; *open* → (``[DONE]``) → *done*; *open* → (EOF) → ``StreamTruncated``.
Once *done*, everything further is ignored: the caller stops reading at ``[DONE]`` instead of
waiting for the server to close the socket (case C08 B). A blocking ``chat.completion`` is
folded by the same reducer, as the one chunk its stream adds up to followed by ``[DONE]``
(:meth:`ChatCompletionsStreamReducer._answer_objects`), so both fold equal by construction.

``<think>`` tags inside ``content`` are left as they are: the orchestrator strips them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from providers.bounded_json import MAX_JSON_DEPTH, within_depth
from providers.error_events import error_from_event
from providers.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    StreamProtocolError,
    StreamTruncated,
)
from providers.events import (
    Final,
    FinishReason,
    PreExecutedToolCall,
    PreExecutedToolResult,
    StreamEvent,
    ToolCall,
    Usage,
    text_delta,
)
from providers.fast_shapes import CHAT_CHUNK, REFUSED
from providers.sse import SSEDecoder, parse_event_json
from providers.stream_reducer import StreamReducer

__all__ = [
    "DONE_SENTINEL",
    "ChatCompletionsStreamReducer",
    "map_finish_reason",
    "normalise_arguments",
    "parse_reasoning",
    "parse_usage",
    "proxy_tool_event",
    "visible_content",
]

DONE_SENTINEL = "[DONE]"
"""The data of the event that ends a Chat Completions stream."""

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",  # the deprecated single-function form
    "content_filter": "content_filter",
}


def map_finish_reason(raw: str | None, *, has_tool_calls: bool = False) -> FinishReason:
    """Normalise a Chat Completions ``finish_reason`` (unknown values → ``"other"``).

    ``None`` (a stream ended by ``[DONE]`` alone) is ``"tool_calls"`` when calls were made, else
    ``"stop"``.
    """
    if raw is None:
        return "tool_calls" if has_tool_calls else "stop"
    return _FINISH_REASONS.get(raw, "other")


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_usage(usage: Any) -> Usage | None:
    """A ``usage`` object as :class:`Usage`; ``None`` when absent or not an object.

    Cached input tokens: DeepSeek's ``prompt_cache_hit_tokens`` wins over
    ``prompt_tokens_details.cached_tokens`` (DeepSeek sends both, and only its own is right).
    """
    if not isinstance(usage, dict):
        return None
    cached = _int_or_none(usage.get("prompt_cache_hit_tokens"))
    if cached is None:
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = _int_or_none(details.get("cached_tokens"))
    return Usage(
        input_tokens=_int_or_none(usage.get("prompt_tokens")),
        output_tokens=_int_or_none(usage.get("completion_tokens")),
        cached_input_tokens=cached,
    )


def _content_text(content: Any) -> str:
    """``message.content``: a string, ``null``, or (some servers) a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def visible_content(message: dict[str, Any]) -> str:
    """The visible text of a delta or message: ``content``, or the ``refusal`` text OpenAI
    sends instead when the model declines (API reference, "refusal": shown to the user)."""
    text = ""
    for key in ("content", "refusal"):
        value = message.get(key)
        if isinstance(value, str):
            text += value
    return text


def parse_reasoning(message: dict[str, Any]) -> str:
    """Reasoning text of a delta or message: ``reasoning_content``, else ``reasoning``."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def normalise_arguments(arguments: Any) -> str:
    """Tool arguments as JSON text: a string as sent (``"{}"`` when blank), an object serialised."""
    if isinstance(arguments, str):
        return arguments if arguments.strip() else "{}"
    if arguments is None:
        return "{}"
    return json.dumps(arguments, ensure_ascii=False)


def proxy_tool_event(chunk: dict[str, Any]) -> PreExecutedToolCall | PreExecutedToolResult | None:
    """A proxy's ``x_tool_start`` / ``x_tool_result`` as an event; ``None`` for other chunks.

    A start without a ``name`` is ignored (there is nothing to show); a result without one is
    named ``"unknown"``; missing arguments are ``"{}"`` and a missing output ``""``. A result
    with ``"is_error": true`` failed (its ``error`` string, if any, is the cause, else
    ``"failed"``).
    """
    start = chunk.get("x_tool_start")
    if isinstance(start, dict):
        name = start.get("name")
        if not isinstance(name, str) or not name:
            return None
        return PreExecutedToolCall(name=name, arguments=normalise_arguments(start.get("arguments")))
    result = chunk.get("x_tool_result")
    if isinstance(result, dict):
        name = result.get("name")
        output = result.get("output")
        error = result.get("error")
        return PreExecutedToolResult(
            name=name if isinstance(name, str) and name else "unknown",
            output=output if isinstance(output, str) else "" if output is None else str(output),
            error=(error if isinstance(error, str) and error else "failed")
            if result.get("is_error") is True
            else None,
        )
    return None


@dataclass(slots=True)
class _CallBuilder:
    id: str
    name: str
    arguments: list[str]

    def build(self, position: int) -> ToolCall:
        if not self.name:
            raise StreamProtocolError(f"tool call {self.id or position} has no function name")
        return ToolCall(
            id=self.id or f"call_{position}",
            name=self.name,
            arguments=normalise_arguments("".join(self.arguments)),
        )


_DONE: dict[str, Any] = {}
"""Stands for the ``[DONE]`` event among the decoded objects (compared by identity)."""


class ChatCompletionsStreamReducer(StreamReducer):
    """SSE body of ``POST {base_url}/chat/completions`` with ``stream: true`` (or one blocking
    ``chat.completion``, :meth:`StreamReducer.answer`) → events (see the module docstring).

    Attributes:
        finish_seen: a non-null ``finish_reason`` arrived: EOF, the idle timeout or a dropped
            connection now end the stream properly (the HTTP side then calls :meth:`close`).
    """

    terminal_signal = "[DONE] or a finish_reason"

    def __init__(self) -> None:
        super().__init__()
        self._sse = SSEDecoder()
        self.finish_seen = False
        self._raw_finish: str | None = None
        self._calls: list[_CallBuilder] = []
        self._by_index: dict[int, _CallBuilder] = {}
        self._calls_emitted = False
        self._usage: Usage | None = None

    def ends_at(self, error: ProviderError) -> bool:
        """After a ``finish_reason`` the answer is whole: the idle bound or a dropped
        connection then ends the stream as EOF does (architecture §2)."""
        idle = isinstance(error, ProviderConnectionError) or (
            isinstance(error, ProviderTimeout) and error.phase == "idle"
        )
        return idle and self.finish_seen

    def _frames(self, chunk: bytes, *, final: bool) -> Iterable[Any]:
        """The chunks of the read as dicts, except the plain text ones: those are decoded into
        :data:`providers.fast_shapes.CHAT_CHUNK` and their text added to the read's events
        here (the events :meth:`_on_object` would give for their dicts)."""
        read, fast = self._read, CHAT_CHUNK
        add_text = read.text
        # Within the depth bound as a whole, a read that continues no event of an earlier one has
        # no event past it: two counts a read, not two an event (bounded_json.within_depth).
        shallow = not final and not self._sse.continues_event and within_depth(chunk)
        for payload in self._sse.close_payloads() if final else self._sse.feed_payloads(chunk):
            if fast is not None and (
                shallow or len(payload) <= MAX_JSON_DEPTH or within_depth(payload)
            ):
                try:
                    delta = fast(payload).choices[0].delta
                except REFUSED:
                    pass  # not the plain shape: parsed as a dict below
                else:
                    text = delta.content
                    reasoning = delta.reasoning_content or delta.reasoning
                    if not reasoning:
                        if text:
                            add_text(text)
                    elif text:
                        read.extend([text_delta(text, reasoning)])
                    else:
                        read.thought(reasoning)
                    continue
            data = payload.decode("utf-8", "replace")
            if data[:1] != "{" or data[-1:] != "}":  # else stripping would change nothing
                data = data.strip()
                if not data:
                    continue  # a keep-alive
                if data == DONE_SENTINEL:
                    yield _DONE
                    continue
            yield parse_event_json(data)
        if final and not self.done:
            if not self.finish_seen:
                message = "the stream ended without finish_reason or [DONE]"
                if self._calls:
                    message += f" ({len(self._calls)} unfinished tool call(s) dropped)"
                raise StreamTruncated(message)
            yield _DONE  # architecture §2: after a finish_reason, EOF ends the stream properly

    def _answer_objects(self, answer: Any) -> Iterable[Any]:
        """A blocking ``chat.completion`` as the one chunk its stream would add up to, then
        ``[DONE]``: ``choices[0].message`` becomes the delta (list ``content`` parts joined,
        tool calls given their position as ``index``)."""
        if not isinstance(answer, dict):
            raise StreamProtocolError("answer is not a JSON object")
        if answer.get("error") is not None:
            return (answer,)
        choice = _first_choice(answer.get("choices"))
        message = choice.get("message") if choice is not None else None
        if choice is None or not isinstance(message, dict):
            raise StreamProtocolError("answer has no choices[0].message")
        delta = {
            **message,
            "content": _content_text(message.get("content")),
            "refusal": _content_text(message.get("refusal")),
        }
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [
                {**call, "index": position} if isinstance(call, dict) else {"index": position}
                for position, call in enumerate(calls)
            ]
        finish = {"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}
        return ({"choices": [finish], "usage": answer.get("usage")}, _DONE)

    def _on_object(self, obj: dict[str, Any]) -> list[StreamEvent]:
        """Reduce one parsed ``chat.completion.chunk`` (or proxy/error object, or ``[DONE]``).

        Raises:
            StreamProtocolError: a tool call has no name, or a fragment follows the finish.
            ProviderError: the chunk is an error object (typed by its code, see
                :func:`providers.error_events.error_from_event`).
        """
        if obj is _DONE:
            return self._finish()
        if obj.get("error") is not None:
            raise error_from_event(obj["error"])
        events: list[StreamEvent] = []
        if "x_tool_start" in obj or "x_tool_result" in obj:
            proxy = proxy_tool_event(obj)
            if proxy is not None:
                events.append(proxy)
        choices = obj.get("choices")
        if type(choices) is list and len(choices) == 1:  # as every server sends: inline
            choice = choices[0]
            if not isinstance(choice, dict) or choice.get("index") not in (0, None):
                choice = None
        else:
            choice = _first_choice(choices)
        if choice is not None:
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._on_delta(delta, events)
            raw_finish = choice.get("finish_reason")
            if isinstance(raw_finish, str) and raw_finish and not self.finish_seen:
                self.finish_seen = True
                self._raw_finish = raw_finish
                events.extend(self._emit_calls())
        usage = obj.get("usage")
        if usage is not None:
            parsed = parse_usage(usage)
            if parsed is not None:
                self._usage = parsed
        return events

    def _on_delta(self, delta: dict[str, Any], events: list[StreamEvent]) -> None:
        """Append the events of one ``delta``: its text (``visible_content``, inlined for the
        plain ``content`` string) and reasoning (``parse_reasoning``), then fold its tool-call
        fragments."""
        get = delta.get
        text = get("content")
        if type(text) is not str:
            text = ""
        refusal = get("refusal")
        if refusal is not None:
            text = visible_content(delta)
        reasoning = get("reasoning_content")
        if not (isinstance(reasoning, str) and reasoning):
            reasoning = parse_reasoning(delta) if "reasoning" in delta else ""
        if text or reasoning:
            events.append(text_delta(text, reasoning))
        fragments = get("tool_calls")
        if fragments and isinstance(fragments, list):
            if self._calls_emitted:
                raise StreamProtocolError("tool call fragment after the finish_reason")
            for fragment in fragments:
                if isinstance(fragment, dict):
                    self._on_call_fragment(fragment)

    def _on_call_fragment(self, fragment: dict[str, Any]) -> None:
        index = _int_or_none(fragment.get("index"))
        raw_id = fragment.get("id")
        call_id = raw_id if isinstance(raw_id, str) else ""
        if index is not None:
            call = self._by_index.get(index)
            if call is None or (call_id and call.id and call_id != call.id):
                call = self._new_call(call_id)
                self._by_index[index] = call
        elif not self._calls or (call_id and call_id != self._calls[-1].id):
            call = self._new_call(call_id)
        else:
            call = self._calls[-1]  # C01: no index and no new id continues the latest call
        if call_id and not call.id:
            call.id = call_id
        function = fragment.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and name and name != call.name:
                # Servers send the name once, whole; a few repeat it in every fragment.
                call.name = name if not call.name else call.name + name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call.arguments.append(arguments)
            elif arguments is not None:
                call.arguments.append(json.dumps(arguments, ensure_ascii=False))

    def _new_call(self, call_id: str) -> _CallBuilder:
        call = _CallBuilder(id=call_id, name="", arguments=[])
        self._calls.append(call)
        return call

    def _emit_calls(self) -> list[StreamEvent]:
        if self._calls_emitted:
            return []
        self._calls_emitted = True
        return [call.build(position) for position, call in enumerate(self._calls)]

    def _finish(self) -> list[StreamEvent]:
        events = self._emit_calls()
        if self._usage is not None:
            events.append(self._usage)
        self.done = True
        finish = map_finish_reason(self._raw_finish, has_tool_calls=bool(self._calls))
        events.append(Final(finish, self._raw_finish))
        return events


def _first_choice(choices: Any) -> dict[str, Any] | None:
    """The choice with index 0 (we never ask for ``n > 1``); a missing index counts as 0."""
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index") in (0, None):
            return choice
    return None
