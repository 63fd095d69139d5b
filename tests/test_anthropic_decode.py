"""The Anthropic Messages reducer, fed recorded and case bodies at every byte offset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.anthropic_decode import AnthropicStreamReducer, map_stop_reason, message_events
from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    StreamProtocolError,
    StreamTruncated,
)
from providers.events import (
    Final,
    PreExecutedToolCall,
    PreExecutedToolResult,
    StreamEvent,
    ToolCall,
    Usage,
)
from tests.stream_helpers import decode, every_split, reasoning, sse, text

WEATHER = json.dumps({"location": "San Francisco, CA", "unit": "celsius"})

# fixture name → (events, type of the error that ends the stream or None)
FIXTURES: dict[str, tuple[list[StreamEvent], type[ProviderError] | None]] = {
    "anthropic_text_with_usage.sse": (
        [text("hi"), Usage(456, 27, 42), Final("stop", "end_turn")],
        None,
    ),
    "anthropic_truncated_before_message_stop.sse": ([text("partial")], StreamTruncated),
    "anthropic_no_usage.sse": ([Final("stop", None)], None),
    "anthropic_tool_use_with_ping.sse": (
        [
            text("Okay, let me check "),
            text("the weather."),
            ToolCall("toolu_01", "get_weather", WEATHER),
            Usage(472, 89, 0),
            Final("tool_calls", "tool_use"),
        ],
        None,
    ),
    "anthropic_thinking_then_text.sse": (
        [
            reasoning("27 * 453 = 12231."),
            text("27 × 453 = 12,231"),
            Usage(30, 40, None),
            Final("stop", "end_turn"),
        ],
        None,
    ),
}
SPLIT = ([text("hi"), Usage(None, 1, None), Final("stop", "end_turn")], None)


def _body(fixtures_dir: Path, name: str) -> bytes:
    if name == "split":
        return b"".join(
            (fixtures_dir / f"anthropic_split_delivery_segment{n}.sse").read_bytes() for n in (1, 2)
        )
    return (fixtures_dir / name).read_bytes()


def _check(body: bytes, expected: tuple[list[StreamEvent], type[ProviderError] | None]) -> None:
    events, error_type = expected
    for chunks in every_split(body):
        got, failure = decode(AnthropicStreamReducer, chunks)
        assert got == events, chunks
        if error_type is None:
            assert failure is None
        else:
            assert type(failure) is error_type


@pytest.mark.parametrize("name", [*FIXTURES, "split"])
def test_fixture_at_every_byte_offset(fixtures_dir: Path, name: str) -> None:
    _check(_body(fixtures_dir, name), FIXTURES.get(name, SPLIT))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fixture_in_random_reads(fixtures_dir: Path, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(FIXTURES)))
    body = _body(fixtures_dir, name)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    got, _ = decode(AnthropicStreamReducer, chunks)
    assert got == FIXTURES[name][0]


MESSAGE_START = {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 5}}}
STOP = [
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
    {"type": "message_stop"},
]


def _tool_body(fragments: list[str]) -> bytes:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t1", "name": "now", "input": {}},
    }
    deltas = [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": fragment},
        }
        for fragment in fragments
    ]
    return sse(MESSAGE_START, start, *deltas, {"type": "content_block_stop", "index": 0}, *STOP)


@pytest.mark.parametrize(
    ("fragments", "arguments"),
    [([""], {}), (['{"pa', 'th": "a.', 'py"}'], {"path": "a.py"}), ([], {})],
    ids=["C06-empty", "C06-fragments", "no-delta"],
)
def test_c06_tool_arguments_parsed_once_at_block_stop(
    fragments: list[str], arguments: dict[str, str]
) -> None:
    for chunks in every_split(_tool_body(fragments)):
        events, failure = decode(AnthropicStreamReducer, chunks)
        assert failure is None
        call, usage, final = events
        assert isinstance(call, ToolCall) and (call.id, call.name) == ("t1", "now")
        assert json.loads(call.arguments) == arguments
        assert (usage, final) == (Usage(5, 3, None), Final("tool_calls", "tool_use"))


def test_tool_call_cut_before_block_stop_is_never_emitted() -> None:
    body = _tool_body(['{"pa', 'th": "a.py"}'])
    cut = body.index(b"event: content_block_stop")
    events, failure = decode(AnthropicStreamReducer, [body[:cut]])
    assert events == [] and isinstance(failure, StreamTruncated)


def test_c04_overloaded_error_after_text_is_a_retryable_server_error() -> None:
    body = sse(
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "The answer is"},
        },
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    for chunks in every_split(body):
        events, failure = decode(AnthropicStreamReducer, chunks)
        assert events == [text("The answer is")]  # never followed by a Final
        assert isinstance(failure, ProviderServerError) and failure.retryable
        assert failure.code == "overloaded_error" and "Overloaded" in failure.message


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        ("overloaded_error", ProviderServerError),
        ("api_error", ProviderServerError),
        ("rate_limit_error", ProviderRateLimited),
        ("authentication_error", ProviderAuthError),
        ("permission_error", ProviderAuthError),
        ("invalid_request_error", ProviderBadRequest),
        ("something_new", ProviderServerError),
    ],
)
def test_error_events_are_typed(code: str, error_type: type[ProviderError]) -> None:
    body = sse({"type": "error", "error": {"type": code, "message": "m"}}, event_lines=False)
    events, failure = decode(AnthropicStreamReducer, [body])
    assert events == [] and type(failure) is error_type and failure.code == code


def test_data_that_is_not_json_is_a_protocol_error() -> None:
    body = sse(MESSAGE_START) + b"event: content_block_delta\ndata: {not json\n\n"
    events, failure = decode(AnthropicStreamReducer, [body])
    assert events == [] and isinstance(failure, StreamProtocolError)


def test_events_after_message_stop_are_ignored() -> None:
    body = sse(MESSAGE_START, {"type": "message_stop"}) + b"data: not json\n\n"
    reducer = AnthropicStreamReducer()
    assert reducer.feed(body) == [Usage(5, None, None), Final("stop", None)]
    assert reducer.done and reducer.failure is None and reducer.close() == []


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
        (None, "stop"),
    ],
)
def test_stop_reasons(raw: str | None, normalised: str) -> None:
    assert map_stop_reason(raw) == normalised


def test_thinking_blocks_become_provider_items(fixtures_dir: Path) -> None:
    reducer = AnthropicStreamReducer()
    reducer.feed((fixtures_dir / "anthropic_thinking_then_text.sse").read_bytes())
    assert reducer.done
    thinking, answer = reducer.provider_items
    assert thinking["type"] == "thinking" and thinking["thinking"] == "27 * 453 = 12231."
    assert thinking["signature"].startswith("EqQB")
    assert answer == {"type": "text", "text": "27 × 453 = 12,231"}


def test_server_tools_are_pre_executed() -> None:
    blocks = [
        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [{"title": "X"}]},
    ]
    starts = [
        {"type": "content_block_start", "index": i, "content_block": block}
        for i, block in enumerate(blocks)
    ]
    stops = [{"type": "content_block_stop", "index": i} for i in range(2)]
    body = sse(MESSAGE_START, starts[0], stops[0], starts[1], stops[1], *STOP)
    events, failure = decode(AnthropicStreamReducer, [body])
    assert failure is None
    assert events[:2] == [
        PreExecutedToolCall("web_search", '{"query": "x"}'),
        PreExecutedToolResult("web_search", '[{"title": "X"}]'),
    ]
    blocking, _ = message_events({"content": blocks, "stop_reason": "end_turn"})
    assert blocking[:2] == events[:2]


def test_a_server_tool_error_result_carries_its_error_code() -> None:
    """A server tool's ``*_tool_result`` whose content is an ``*_error`` object failed."""
    error = {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
    blocks = [
        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "s1", "content": error},
    ]
    events, _ = message_events({"content": blocks, "stop_reason": "end_turn"})
    assert events[1] == PreExecutedToolResult(
        "web_search", json.dumps(error), error="max uses exceeded"
    )


def test_blocking_message_events() -> None:
    message = {
        "type": "message",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "now", "input": {"tz": "UTC"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 4, "output_tokens": 7},
    }
    events, items = message_events(message)
    assert events == [
        text("Let me look."),
        ToolCall("t1", "now", '{"tz": "UTC"}'),
        Usage(14, 7, 4),
        Final("tool_calls", "tool_use"),
    ]
    assert items == ()
    with pytest.raises(StreamProtocolError):
        message_events(["not", "a", "message"])


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            ProviderServerError,
        ),
        ({"error": {"type": "rate_limit_error", "message": "slow down"}}, ProviderRateLimited),
    ],
)
def test_a_blocking_error_object_raises_its_typed_error(
    body: dict[str, object], error_type: type[ProviderError]
) -> None:
    """An error object as a 2xx blocking answer (some proxies send one) is the ``error`` event
    it would be in a stream, not an empty answer."""
    with pytest.raises(error_type):
        message_events(body)
