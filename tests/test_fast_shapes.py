"""The typed shapes of the plain text events (providers/fast_shapes.py) change no event: an
event framed in a body yields what its dict, reduced the generic way, yields — for events of
the plain shape and for every near miss (another type, another value, a field more)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.anthropic_decode import AnthropicStreamReducer
from providers.fast_shapes import ANTHROPIC_DELTA, CHAT_CHUNK
from providers.openai_chat_decode import ChatCompletionsStreamReducer
from providers.stream_reducer import StreamReducer

pytestmark = pytest.mark.skipif(CHAT_CHUNK is None, reason="msgspec is not installed")

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 2**70, 0.0, 1.5]),
    st.text(max_size=4),
    st.sampled_from(["", "hi", "\u00e9\u4e2d", "stop", "text_delta", "thinking_delta"]),
    st.just([]),
    st.just({}),
    st.just([{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]),
    st.just({"name": "search", "arguments": {"q": 1}}),
    st.just({"prompt_tokens": 3, "completion_tokens": 4}),
    st.just({"message": "boom", "code": "server_error"}),
)


def optional(keys: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=keys)


def mostly(plain: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The plain case four times in five, else any JSON value (a near miss)."""
    return st.integers(0, 4).flatmap(lambda n: _VALUES if n == 0 else plain)


_TEXT = mostly(st.one_of(st.text(max_size=6), st.none()))
_DELTA = optional(
    {
        "role": _VALUES,
        "content": _TEXT,
        "refusal": mostly(st.none()),
        "reasoning_content": _TEXT,
        "reasoning": _TEXT,
        "tool_calls": mostly(st.none()),
        "other": _VALUES,
    }
)
_CHOICE = st.fixed_dictionaries(
    {"delta": mostly(_DELTA)},
    optional={
        "index": mostly(st.sampled_from([0, None])),
        "finish_reason": mostly(st.none()),
        "logprobs": _VALUES,
    },
)
_CHUNK = st.fixed_dictionaries(
    {"choices": mostly(st.lists(_CHOICE, min_size=1, max_size=2))},
    optional={
        "id": st.just("chatcmpl-1"),
        "error": mostly(st.none()),
        "usage": mostly(st.none()),
        "x_tool_start": mostly(st.none()),
        "x_tool_result": mostly(st.none()),
    },
)
_CHAT_END = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def outcome(reducer: StreamReducer, first: list[Any], then: bytes) -> tuple[Any, ...]:
    """The events of ``first`` (already fed), then of ``then``, and the failures."""
    failure = reducer.failure
    rest = reducer.feed(then) + reducer.close()
    later = reducer.failure
    return first, repr(failure), rest, repr(later), reducer.provider_items


def framed(text: bytes) -> bytes:
    return b"data: " + text + b"\n\n"


def chat_outcomes(text: bytes, obj: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    fast = ChatCompletionsStreamReducer()
    fast.feed(b": warm-up\n\n")  # later reads: the bulk framing too
    fast_events = fast.feed(framed(text))
    generic = ChatCompletionsStreamReducer()
    generic_events = generic.feed_object(obj)
    return outcome(fast, fast_events, _CHAT_END), outcome(generic, generic_events, _CHAT_END)


@settings(max_examples=600, deadline=None)
@given(_CHUNK)
def test_property_a_chat_chunk_yields_what_its_dict_yields(chunk: dict[str, Any]) -> None:
    text = json.dumps(chunk, ensure_ascii=False).encode()
    fast, generic = chat_outcomes(text, chunk)
    assert fast == generic


@pytest.mark.parametrize(
    "text",
    [
        b'{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[{"delta":{"content":"b"}}]}',
        b'{"choices":[{"delta":{"content":"a","content":null}}]}',
        b'{"choices":[{"delta":{"content":"a"},"index":0,"index":1}]}',
        b'{"choices":[{"delta":{"content":"\\ud83d"}}]}',
        b'  {"choices":[{"delta":{"content":"a"}}]}  ',
        b'{"choices":[{"delta":{"content":"a","refusal":"no"}}]}',
        b'{"choices":[{"delta":{"content":"a","tool_calls":[{"index":0,"id":"c","function":{"name":"f"}}]}}]}',
        b'{"choices":[{"delta":{"content":"a"},"finish_reason":"length"}]}',
        b'{"choices":[{"delta":{"content":"a"},"index":1}]}',
        b'{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1}}',
        b'{"choices":[{"delta":{"content":"a"}}],"error":{"message":"x"}}',
        b'{"choices":[{"delta":{"content":"a"}}],"x_tool_start":{"name":"s"}}',
        b'{"choices":[{"delta":{"content":5,"reasoning":"r"}}]}',
        b'{"choices":[{"delta":{"reasoning_content":"","reasoning":"r"}}]}',
    ],
)
def test_repeated_keys_and_odd_text_yield_what_the_dict_yields(text: bytes) -> None:
    fast, generic = chat_outcomes(text, json.loads(text))
    assert fast == generic


def test_a_deeply_nested_field_is_refused_as_the_dict_way_refuses_it() -> None:
    deep = b'{"choices":[{"delta":{"content":"a"}}],"x":' + b"[" * 300 + b"]" * 300 + b"}"
    reducer = ChatCompletionsStreamReducer()
    assert reducer.feed(framed(deep)) == []
    assert "nested deeper" in str(reducer.failure)


@pytest.mark.parametrize("fields", [b"", b"event: content_block_delta\n"])
def test_a_deep_event_split_over_reads_is_refused_at_every_split(fields: bytes) -> None:
    # A read's own brackets bound its events only when it continues none of an earlier read:
    # here the second read alone holds fewer than 256 brackets, the event it ends 300 levels.
    head = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}'
    chat = b'{"choices":[{"delta":{"content":"a"}}]'
    for start, reducer in ((chat, ChatCompletionsStreamReducer()),
                           (head, AnthropicStreamReducer())):  # fmt: skip
        event = fields + framed(start + b',"x":' + b"[" * 300 + b"]" * 300 + b"}")
        for split in range(1, len(event)):
            fresh = type(reducer)()
            fresh.feed(b": warm-up\n\n")  # later reads: the bulk framing too
            events = fresh.feed(event[:split]) + fresh.feed(event[split:])
            assert events == [] and "nested deeper" in str(fresh.failure), (start, split)


_BLOCK_DELTA = st.fixed_dictionaries(
    {"type": mostly(st.sampled_from(["text_delta", "thinking_delta", "input_json_delta"]))},
    optional={"text": _TEXT, "thinking": _TEXT, "partial_json": _TEXT},
)
_ANTHROPIC_EVENT = st.fixed_dictionaries(
    {"type": mostly(st.just("content_block_delta")), "delta": mostly(_BLOCK_DELTA)},
    optional={"index": mostly(st.sampled_from([0, 1]))},
)
_STARTS = {
    "none": b"",
    "text": b'data: {"type":"content_block_start","index":0,"content_block":'
    b'{"type":"text","text":""}}\n\n',
    "thinking": b'data: {"type":"content_block_start","index":0,"content_block":'
    b'{"type":"thinking","thinking":"","signature":""}}\n\n',
}
_ANTHROPIC_END = b"".join(
    framed(json.dumps(event).encode())
    for event in (
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    )
)


@settings(max_examples=600, deadline=None)
@given(_ANTHROPIC_EVENT, st.sampled_from(sorted(_STARTS)))
def test_property_an_anthropic_event_yields_what_its_dict_yields(
    event: dict[str, Any], start: str
) -> None:
    assert ANTHROPIC_DELTA is not None
    text = json.dumps(event, ensure_ascii=False).encode()
    fast = AnthropicStreamReducer()
    fast.feed(_STARTS[start] + b": warm-up\n\n")
    fast_events = fast.feed(framed(text))
    generic = AnthropicStreamReducer()
    generic.feed(_STARTS[start] + b": warm-up\n\n")
    generic_events = generic.feed_object(event)
    assert outcome(fast, fast_events, _ANTHROPIC_END) == outcome(
        generic, generic_events, _ANTHROPIC_END
    )
