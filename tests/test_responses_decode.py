"""The Responses API reducer, fed recorded and case bodies at every byte offset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.errors import (
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    StreamProtocolError,
    StreamTruncated,
)
from providers.events import Final, FinishReason, StreamEvent, ToolCall, Usage
from providers.responses_decode import ResponsesStreamReducer, response_events
from tests.stream_helpers import decode, every_split, reasoning, sse, text

FIXTURES: dict[str, tuple[list[StreamEvent], type[ProviderError] | None]] = {
    "responses_text_delta.sse": (
        [text("Hello"), text(" world"), Usage(12, 2, 0), Final("stop", "completed")],
        None,
    ),
    "responses_function_call.sse": (
        [
            ToolCall("call_1", "shell", json.dumps({"command": "pwd"})),
            Usage(40, 9, None),
            Final("tool_calls", "completed"),
        ],
        None,
    ),
    "responses_completed_then_trailing.sse": (
        [text("fallback"), Final("stop", "completed")],
        None,
    ),
    "responses_completed_usage.sse": (
        [text("done"), Usage(120, 30, 45), Final("stop", "completed")],
        None,
    ),
    "responses_failed.sse": ([], ProviderServerError),
    "responses_malformed_frame.sse": ([], StreamProtocolError),
}


def completed_response(path: Path) -> dict[str, Any]:
    """The ``response`` object of a fixture's ``response.completed`` event."""
    lines = path.read_text().splitlines()
    (line,) = [x for x in lines if x.startswith('data: {"type":"response.completed"')]
    response: dict[str, Any] = json.loads(line.removeprefix("data: "))["response"]
    return response


def _check(body: bytes, events: list[StreamEvent], error_type: type[ProviderError] | None) -> None:
    for chunks in every_split(body):
        got, failure = decode(ResponsesStreamReducer, chunks)
        assert got == events, chunks
        assert type(failure) is error_type if error_type else failure is None


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_at_every_byte_offset(fixtures_dir: Path, name: str) -> None:
    _check((fixtures_dir / name).read_bytes(), *FIXTURES[name])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fixture_in_random_reads(fixtures_dir: Path, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(FIXTURES)))
    body = (fixtures_dir / name).read_bytes()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    got, failure = decode(ResponsesStreamReducer, chunks)
    assert got == FIXTURES[name][0]
    assert type(failure) is FIXTURES[name][1] if FIXTURES[name][1] else failure is None


def test_failed_fixture_carries_code_and_message(fixtures_dir: Path) -> None:
    body = (fixtures_dir / "responses_failed.sse").read_bytes()
    _, failure = decode(ResponsesStreamReducer, [body])
    assert isinstance(failure, ProviderServerError) and failure.retryable
    assert failure.code == "server_error" and "quota exceeded" in failure.message


CREATED = {"type": "response.created", "response": {"id": "r", "status": "in_progress"}}
PAR = {"type": "response.output_text.delta", "item_id": "m", "delta": "Par"}


def _failed(error: dict[str, Any] | None) -> dict[str, Any]:
    response = {"id": "r", "status": "failed", "output": [], "error": error}
    return {"type": "response.failed", "response": response}


@pytest.mark.parametrize(
    ("last", "error_type", "code"),
    [
        (_failed({"code": "server_error", "message": "boom"}), ProviderServerError, "server_error"),
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None},
            ProviderRateLimited,
            "rate_limit_exceeded",
        ),
        (_failed(None), ProviderServerError, None),
        (
            {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}},
            ProviderBadRequest,
            "invalid_request_error",
        ),
    ],
    ids=["failed-server_error", "bare-error-rate-limit", "failed-error-null", "nested-error"],
)
def test_c05_failures_raise_typed_errors_after_the_text(
    last: dict[str, Any], error_type: type[ProviderError], code: str | None
) -> None:
    for chunks in every_split(sse(CREATED, PAR, last)):
        events, failure = decode(ResponsesStreamReducer, chunks)
        assert events == [text("Par")]
        assert type(failure) is error_type and failure.code == code


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", "length"), ("content_filter", "content_filter"), ("other", "other")],
)
def test_c05_incomplete_is_a_finish_reason_not_an_error(reason: str, finish: FinishReason) -> None:
    response = {
        "id": "r",
        "status": "incomplete",
        "incomplete_details": {"reason": reason},
        "output": [
            {
                "type": "message",
                "id": "m",
                "status": "incomplete",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Par"}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    body = sse(CREATED, PAR, {"type": "response.incomplete", "response": response})
    for chunks in every_split(body):
        events, failure = decode(ResponsesStreamReducer, chunks)
        assert failure is None
        assert events == [text("Par"), Usage(3, 1, None), Final(finish, reason)]


def test_reasoning_deltas_and_items_are_kept() -> None:
    reasoning_item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Think."}],
    }
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_9",
        "name": "now",
        "arguments": "",
        "status": "in_progress",
    }
    done_call = {**call, "arguments": '{"tz":"UTC"}', "status": "completed"}
    body = sse(
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning_item},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "delta": "Think."},
        {"type": "response.output_item.added", "output_index": 1, "item": call},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"tz"'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ':"UTC"}'},
        {
            "type": "response.completed",
            "response": {"id": "r", "status": "completed", "output": [reasoning_item, done_call]},
        },
        event_lines=False,
    )
    for chunks in every_split(body):
        reducer = ResponsesStreamReducer()
        events = [e for chunk in chunks for e in reducer.feed(chunk)] + reducer.close()
        assert reducer.failure is None
        assert events == [
            reasoning("Think."),
            ToolCall("call_9", "now", '{"tz": "UTC"}'),
            Final("tool_calls", "completed"),
        ]
        assert reducer.provider_items == (reasoning_item, done_call)


def test_a_cut_before_response_completed_is_truncated_and_never_runs_a_call(
    fixtures_dir: Path,
) -> None:
    body = (fixtures_dir / "responses_function_call.sse").read_bytes()
    cut = body.index(b"event: response.output_item.done")
    events, failure = decode(ResponsesStreamReducer, [body[:cut]])
    assert events == [] and isinstance(failure, StreamTruncated)


def test_blocking_response_object(fixtures_dir: Path) -> None:
    response = completed_response(fixtures_dir / "responses_function_call.sse")
    assert response_events(response) == FIXTURES["responses_function_call.sse"][0]
    with pytest.raises(ProviderServerError):
        response_events({**response, "status": "failed", "error": None})
    with pytest.raises(StreamProtocolError):
        response_events("nope")


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ({"type": "error", "code": "server_error", "message": "broke"}, ProviderServerError),
        ({"error": {"code": "rate_limit_exceeded", "message": "slow down"}}, ProviderRateLimited),
    ],
)
def test_a_blocking_error_object_raises_its_typed_error(
    body: dict[str, Any], error_type: type[ProviderError]
) -> None:
    """An error object as a 2xx blocking answer (no ``status``: not a response object) is the
    ``error`` event it would be in a stream, not an empty answer."""
    with pytest.raises(error_type):
        ResponsesStreamReducer().answer(body)
