"""The Ollama NDJSON reducer, fed recorded and case bodies at every byte offset (incl. C11)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.base import fold
from providers.errors import (
    ProviderError,
    ProviderServerError,
    StreamProtocolError,
    StreamTruncated,
)
from providers.events import Final, StreamEvent, TextDelta, ToolCall, Usage
from providers.ollama_decode import OllamaStreamReducer, could_be_tool_json, map_done_reason
from tests.stream_helpers import decode, every_split, ndjson, reasoning, text

FIXTURES: dict[str, tuple[list[StreamEvent], type[ProviderError] | None]] = {
    "ollama_chat_stream.ndjson": (
        [text("The"), text(" sky"), text(" is blue."), Usage(26, 4, None), Final("stop", "stop")],
        None,
    ),
    "ollama_chat_tool_call.ndjson": (
        [
            ToolCall("call_0", "get_weather", json.dumps({"city": "Tokyo"})),
            Usage(120, 18, None),
            Final("tool_calls", "stop"),
        ],
        None,
    ),
    "ollama_chat_error_midstream.ndjson": ([text("Once upon")], ProviderServerError),
}
WEATHER = partial(OllamaStreamReducer, ["get_weather"])


def _check(
    body: bytes,
    events: list[StreamEvent],
    error_type: type[ProviderError] | None,
    make: Any = WEATHER,
) -> None:
    for chunks in every_split(body):
        got, failure = decode(make, chunks)
        assert got == events, chunks
        assert type(failure) is error_type if error_type else failure is None


@pytest.mark.parametrize("make", [WEATHER, OllamaStreamReducer], ids=["tools", "no-tools"])
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_at_every_byte_offset(fixtures_dir: Path, name: str, make: Any) -> None:
    _check((fixtures_dir / name).read_bytes(), *FIXTURES[name], make=make)


def test_error_line_carries_the_server_message(fixtures_dir: Path) -> None:
    body = (fixtures_dir / "ollama_chat_error_midstream.ndjson").read_bytes()
    _, failure = decode(OllamaStreamReducer, [body])
    assert isinstance(failure, ProviderServerError)
    assert "an error was encountered while running the model: unexpected EOF" in failure.message


def _record(content: str = "", done: bool = False, **message: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "model": "m",
        "message": {"role": "assistant", "content": content, **message},
        "done": done,
    }
    if done:
        record["done_reason"] = "stop"
    return record


C11_LINES = ndjson(
    _record('[{"'),
    _record('name":"get_weather","parameters":{}}]'),
    _record("", done=True),
)


def test_c11_tool_json_in_content_becomes_a_call_and_never_text() -> None:
    _check(C11_LINES, [ToolCall("call_0", "get_weather", "{}"), Final("tool_calls", "stop")], None)


def test_c11_tool_json_naming_a_tool_not_offered_is_still_a_call() -> None:
    body = ndjson(
        _record('[{"name":"get_time","parameters":{"zone":"UTC"}}]'), _record("", done=True)
    )
    _check(
        body, [ToolCall("call_0", "get_time", '{"zone": "UTC"}'), Final("tool_calls", "stop")], None
    )


def test_c11_json_with_a_name_alone_is_text_when_that_tool_was_not_offered() -> None:
    body = ndjson(_record('{"name": "Ada"}'), _record("", done=True))
    events, failure = decode(WEATHER, [body])
    assert failure is None and fold(events).text == '{"name": "Ada"}'


def test_c11_a_single_final_record_carrying_tool_calls() -> None:
    call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    body = ndjson({**_record("", done=True, tool_calls=[call]), "eval_count": 9})
    _check(
        body,
        [
            ToolCall("call_0", "get_weather", '{"city": "Paris"}'),
            Usage(None, 9, None),
            Final("tool_calls", "stop"),
        ],
        None,
    )


def test_without_tools_json_content_is_plain_text() -> None:
    events, failure = decode(OllamaStreamReducer, [C11_LINES])
    assert failure is None
    assert fold(events).text == '[{"name":"get_weather","parameters":{}}]'
    assert fold(events).tool_calls == ()


def _feed_records(make: Any, *records: dict[str, Any]) -> list[list[StreamEvent]]:
    """The events returned by each record, fed one line at a time."""
    reducer = make()
    return [reducer.feed(ndjson(record)) for record in records]


def test_plain_text_streams_at_once_while_tools_are_offered() -> None:
    first, second = _feed_records(WEATHER, _record(" Hello"), _record(" there"))
    assert first == [text(" Hello")] and second == [text(" there")]


@pytest.mark.parametrize(
    "opening",
    ['{"answer": 42', "[1, 2", "{}", "[]", '{"ti', "[ {  3"],
)
def test_json_that_cannot_be_a_call_is_released_at_once(opening: str) -> None:
    (events,) = _feed_records(WEATHER, _record(opening))
    assert events == [text(opening)]


def test_json_naming_no_offered_tool_is_released_when_complete() -> None:
    held, complete = _feed_records(WEATHER, _record('{"name": "B'), _record('ob", "age": 3}'))
    assert held == []
    assert complete == [text('{"name": "Bob", "age": 3}')]


def test_tool_json_then_prose_yields_the_call_then_the_prose() -> None:
    body = ndjson(
        _record('  {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}'),
        _record(" Checking now."),
        _record("", done=True),
    )
    _check(
        body,
        [
            ToolCall("call_0", "get_weather", '{"city": "Oslo"}'),
            text(" Checking now."),
            Final("tool_calls", "stop"),
        ],
        None,
    )


def test_held_json_that_never_completes_is_text_at_the_end() -> None:
    body = ndjson(_record('[{"name": "get_weather", "parameters": {'), _record("", done=True))
    _check(body, [text('[{"name": "get_weather", "parameters": {'), Final("stop", "stop")], None)


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(
        st.text(alphabet='[]{}":, abcnameget_wthrpos\n', max_size=8), min_size=1, max_size=8
    )
)
def test_held_text_is_never_lost_or_duplicated(pieces: list[str]) -> None:
    body = ndjson(*(_record(p) for p in pieces), _record("", done=True))
    events, failure = decode(WEATHER, [body])
    assert failure is None
    folded = fold(events)
    if not folded.tool_calls:
        assert folded.text == "".join(pieces)
    assert isinstance(events[-1], Final)


def test_thinking_is_reasoning_and_passes_the_holdback() -> None:
    (events,) = _feed_records(WEATHER, _record("[", thinking="hmm"))
    assert events == [reasoning("hmm")]


@pytest.mark.parametrize(
    "prefix", ["[", "[ ", "[{", '[{"', '[{"na', '{"arguments', '{"function"', "{\n "]
)
def test_could_be_tool_json(prefix: str) -> None:
    assert could_be_tool_json(prefix)


@pytest.mark.parametrize("prefix", ["a", "[1", "[[", '{"x', '{"names"', "{'", "[]"])
def test_cannot_be_tool_json(prefix: str) -> None:
    assert not could_be_tool_json(prefix)


def test_done_reasons() -> None:
    assert [map_done_reason(r) for r in ("stop", "length", "load", None)] == [
        "stop",
        "length",
        "other",
        "stop",
    ]


def test_line_that_is_not_json_is_a_protocol_error_and_a_cut_last_line_is_truncation() -> None:
    events, failure = decode(OllamaStreamReducer, [ndjson(_record("a")) + b"oops\n"])
    assert events == [text("a")] and isinstance(failure, StreamProtocolError)
    done = ndjson(_record("", done=True))
    events, failure = decode(OllamaStreamReducer, [done[:-5]])
    assert events == [] and isinstance(failure, StreamTruncated)
    events, failure = decode(OllamaStreamReducer, [done[:-1]])  # no final newline: still whole
    assert events == [Final("stop", "stop")] and failure is None


def test_blocking_answer_object_folds_like_the_stream(fixtures_dir: Path) -> None:
    answer = {
        "message": {"role": "assistant", "content": "The sky is blue."},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 26,
        "eval_count": 4,
    }
    reducer = OllamaStreamReducer()
    blocking = reducer.feed_object(answer) + reducer.close()
    assert reducer.failure is None
    streamed, _ = decode(
        OllamaStreamReducer, [(fixtures_dir / "ollama_chat_stream.ndjson").read_bytes()]
    )
    assert fold(blocking) == fold(streamed)
    assert all(not isinstance(e, TextDelta) or e.chunk.delta for e in blocking)


@settings(max_examples=100, deadline=None)
@given(
    call=st.sampled_from(
        [
            '[{"name":"get_weather","parameters":{}}]',
            ' {"name": "get_weather", "arguments": {"city": "Köln"}}\n',
            '[{"function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}}]',
        ]
    ),
    data=st.data(),
)
def test_c11_tool_json_split_anywhere_never_reaches_the_chat(
    call: str, data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(call)), max_size=6)))
    pieces = [call[a:b] for a, b in zip([0, *cuts], [*cuts, len(call)], strict=True)]
    body = ndjson(*(_record(p) for p in pieces), _record("", done=True))
    events, failure = decode(WEATHER, [body])
    assert failure is None
    assert not [e for e in events if isinstance(e, TextDelta)]
    (tool_call,) = fold(events).tool_calls
    assert tool_call.name == "get_weather" and isinstance(json.loads(tool_call.arguments), dict)


def test_held_content_beyond_the_json_bounds_is_released_as_text() -> None:
    """Content that might be tool JSON is parsed within the bounds; past them it is text."""
    deep = "[" * 300 + "]" * 300
    records = [{"message": {"content": deep}, "done": False}, {"done": True}]
    events, failure = decode(lambda: OllamaStreamReducer(["get_weather"]), [ndjson(*records)])
    assert failure is None
    assert events[0] == text(deep)
