"""The pure Chat Completions reducer, fed recorded streams and cases at every byte offset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.base import fold
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
    ToolCall,
    Usage,
)
from providers.openai_chat_decode import ChatCompletionsStreamReducer
from providers.stream_reducer import reduce_body
from tests.openai_chat_cases import (
    C02_BODY,
    C03_BODY,
    C03_THINK_BODY,
    C07_BODY,
    C08A_BODY,
    C08B_BODY,
    C09_BODY,
    C10_BODY,
    C10_CUTS,
    FIXTURE_OUTCOMES,
    Outcome,
    c01_body,
    sse,
    text,
)


def decode(*pieces: bytes) -> Outcome:
    """Run the reducer as the HTTP wrapper does: stop at ``Final`` or a failure, else close."""
    events, failure = reduce_body(ChatCompletionsStreamReducer(), pieces)
    return Outcome(tuple(events), type(failure) if failure is not None else None)


def at_every_offset(body: bytes) -> Outcome:
    """The outcome of ``body``, asserted equal for every two-piece split and one-byte reads."""
    whole = decode(body)
    for k in range(len(body) + 1):
        assert decode(body[:k], body[k:]) == whole, f"split at {k}"
    assert decode(*(body[i : i + 1] for i in range(len(body)))) == whole, "one-byte reads"
    return whole


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}}
    if finish is not None:
        choice["finish_reason"] = finish
    return json.dumps({"choices": [choice], **extra})


# -- recorded streams --------------------------------------------------------------------------


def test_every_chat_fixture_has_an_expected_outcome(fixtures_dir: Path) -> None:
    names = {p.name for p in fixtures_dir.glob("*.sse")}
    chat = {n for n in names if n.startswith(("oai_compat_", "openai_chat_"))}
    assert chat == set(FIXTURE_OUTCOMES)


@pytest.mark.parametrize("name", sorted(FIXTURE_OUTCOMES))
def test_fixture_at_every_offset(fixtures_dir: Path, name: str) -> None:
    assert at_every_offset((fixtures_dir / name).read_bytes()) == FIXTURE_OUTCOMES[name]


def test_tool_call_fixture_cut_at_every_offset_never_yields_a_half_built_call(
    fixtures_dir: Path,
) -> None:
    """C08 A for tools: EOF before the ``finish_reason`` is StreamTruncated with no ToolCall."""
    body = (fixtures_dir / "openai_chat_tool_call_chunked.sse").read_bytes()
    finish_end = body.index(b"\n", body.index(b'"finish_reason":"tool_calls"')) + 1
    usage_end = body.index(b"\n", body.index(b'"usage"')) + 1
    full = FIXTURE_OUTCOMES["openai_chat_tool_call_chunked.sse"].events
    for k in range(len(body) + 1):
        outcome = decode(body[:k])
        if k < finish_end:
            assert outcome.error is StreamTruncated, k
            assert not any(isinstance(e, ToolCall) for e in outcome.events), k
        else:  # a finish_reason was seen: EOF is a proper end
            assert outcome.error is None, k
            expected = full if k >= usage_end else tuple(e for e in full if e != Usage(57, 41, 0))
            assert outcome.events == expected, k


def _line_outcome(line: str) -> Outcome:
    return decode((line + "\n\n").encode())


def test_line_cases(fixtures_dir: Path) -> None:
    records = [
        json.loads(line)
        for line in (fixtures_dir / "oai_compat_line_cases.jsonl").read_text().splitlines()
        if line.strip()
    ]
    assert records
    for record in records:
        label, line, expected = record["source_test"], record["line"], record["expected"]
        if "result" in expected:  # [DONE]: no chunk, the stream is complete
            assert _line_outcome(line) == Outcome((Final("stop", None),)), label
        elif "tool_calls" in expected:
            (want,) = expected["tool_calls"]
            finish = sse(chunk(finish="tool_calls"), "[DONE]")
            outcome = decode((line + "\n\n").encode() + finish)
            assert outcome.error is None, label
            (call,) = [e for e in outcome.events if isinstance(e, ToolCall)]
            assert (call.id, call.name) == (want["id"], want["function.name"]), label
            assert json.loads(call.arguments) == json.loads(want["function.arguments"]), label
        elif "event" in expected:
            outcome = _line_outcome(line)
            assert outcome.error is StreamTruncated, label  # a lone line has no terminal signal
            proxied = [
                e
                for e in outcome.events
                if isinstance(e, PreExecutedToolCall | PreExecutedToolResult)
            ]
            match expected["event"]:
                case None:
                    assert proxied == [], label
                case "PreExecutedToolCall":
                    assert proxied == [PreExecutedToolCall(expected["name"], expected["args"])]
                case "PreExecutedToolResult":
                    assert proxied == [PreExecutedToolResult(expected["name"], expected["output"])]
                case other:
                    pytest.fail(f"{label}: unknown expected event {other}")
        else:
            outcome = _line_outcome(line)
            want_chunk = text(expected.get("delta") or "", expected.get("reasoning") or "")
            assert outcome.events == (want_chunk,), label


def test_usage_chunks(fixtures_dir: Path) -> None:
    records = [
        json.loads(line)
        for line in (fixtures_dir / "oai_compat_usage_chunks.jsonl").read_text().splitlines()
        if line.strip()
    ]
    assert records
    for record in records:
        outcome = decode(sse(record["payload"], "[DONE]"))
        assert outcome.error is None, record["source_test"]
        usage = [e for e in outcome.events if isinstance(e, Usage)]
        want = record["expected_usage"]
        assert usage == [
            Usage(want["input_tokens"], want["output_tokens"], want["cached_input_tokens"])
        ], record["source_test"]


# -- cases -------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", ["missing", "null"])
def test_c01_tool_call_deltas_without_index(index: str) -> None:
    outcome = at_every_offset(c01_body(index))
    assert outcome == Outcome(
        (ToolCall("c1", "lookup", '{"q":"x"}'), Final("tool_calls", "tool_calls"))
    )


def test_c01_a_new_id_without_index_starts_a_new_call() -> None:
    body = sse(
        chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"n":'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "1}"}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": ""}}]}),
        chunk(finish="tool_calls"),
        "[DONE]",
    )
    calls = [e for e in decode(body).events if isinstance(e, ToolCall)]
    assert calls == [ToolCall("a", "f", '{"n":1}'), ToolCall("b", "g", "{}")]


def test_a_reused_index_with_a_new_id_starts_a_new_call() -> None:
    body = sse(
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f"}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "g"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"k":2}'}}]}),
        chunk(finish="tool_calls"),
    )
    outcome = decode(body)
    assert outcome.events == (
        ToolCall("a", "f", "{}"),
        ToolCall("b", "g", '{"k":2}'),
        Final("tool_calls", "tool_calls"),
    )


def test_c02_usage_only_last_chunk() -> None:
    outcome = at_every_offset(C02_BODY)
    assert outcome == Outcome((text("Hi"), Usage(9, 1, None), Final("stop", "stop")))


def test_c03_reasoning_is_kept_apart_from_text() -> None:
    outcome = at_every_offset(C03_BODY)
    assert outcome == Outcome(
        (
            text(reasoning="Let me think"),
            text(reasoning=" more"),
            text("Answer: 4"),
            Final("stop", "stop"),
        )
    )
    response = fold(outcome.events)
    assert (response.text, response.reasoning) == ("Answer: 4", "Let me think more")


def test_c03_think_tags_are_passed_through_for_the_orchestrator() -> None:
    outcome = at_every_offset(C03_THINK_BODY)
    assert outcome.events == (text("<thi"), text("nk>x</think>Hi"), Final("stop", "stop"))


def test_content_and_reasoning_in_one_delta_make_one_chunk() -> None:
    body = sse(chunk({"content": "a", "reasoning_content": "r", "reasoning": "alias"}), "[DONE]")
    assert decode(body).events == (text("a", "r"), Final("stop", None))


def test_c07_comments_and_field_only_events_are_not_json() -> None:
    assert at_every_offset(C07_BODY) == Outcome((text("A"), text("B"), Final("stop", None)))


def test_c08a_eof_without_finish_or_done_is_truncated() -> None:
    assert at_every_offset(C08A_BODY) == Outcome((text("Let me compare the"),), StreamTruncated)


def test_c08b_done_completes_at_once_and_later_input_is_ignored() -> None:
    reducer = ChatCompletionsStreamReducer()
    events = reducer.feed(C08B_BODY)
    assert events == [text("Hello"), Final("stop", None)]
    assert reducer.done  # the caller stops reading here; no close() needed
    late = b'data: {"choices":[{"delta":{"content":"late"}}]}\n\ndata: x\n\n'
    assert reducer.feed(late) == []
    assert reducer.close() == []
    assert reducer.failure is None


def test_c08b_done_with_no_finish_reason_after_tool_calls() -> None:
    body = sse(
        chunk({"tool_calls": [{"index": 0, "id": "t", "function": {"name": "f"}}]}), "[DONE]"
    )
    assert decode(body).events == (ToolCall("t", "f", "{}"), Final("tool_calls", None))


def test_c09_chunk_json_across_two_data_lines() -> None:
    assert at_every_offset(C09_BODY) == Outcome((text("hi"), Final("stop", None)))


def test_c10_utf8_split_across_reads() -> None:
    expected = Outcome((text("你好 🌍"), Final("stop", None)))
    a, b = C10_CUTS
    assert decode(C10_BODY[:a], C10_BODY[a:b], C10_BODY[b:]) == expected
    assert at_every_offset(C10_BODY) == expected


# -- finish, usage, arguments ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
        ("eos", "other"),
    ],
)
def test_finish_reason_mapping_keeps_the_raw_value(raw: str, normalised: str) -> None:
    outcome = decode(sse(chunk({"content": "x"}, finish=raw)))
    assert outcome == Outcome((text("x"), Final(normalised, raw)))  # type: ignore[arg-type]


def test_usage_in_every_chunk_is_reported_once_last_value_wins() -> None:
    def usage(n: int) -> dict[str, int]:
        return {"prompt_tokens": 5, "completion_tokens": n}

    body = sse(
        chunk({"content": "a"}, usage=usage(1)),
        chunk({"content": "b"}, usage=usage(2)),
        chunk(finish="stop", usage=usage(2)),
        "[DONE]",
    )
    assert decode(body).events == (text("a"), text("b"), Usage(5, 2, None), Final("stop", "stop"))


def test_arguments_sent_as_an_object_are_serialised() -> None:
    call = {"index": 0, "id": "t", "function": {"name": "f", "arguments": {"city": "東京"}}}
    body = sse(chunk({"tool_calls": [call]}), chunk(finish="tool_calls"))
    (tool_call, _final) = decode(body).events
    assert isinstance(tool_call, ToolCall)
    assert json.loads(tool_call.arguments) == {"city": "東京"}


def test_a_tool_call_without_a_name_is_a_protocol_error() -> None:
    body = sse(chunk({"tool_calls": [{"index": 0, "id": "t"}]}), chunk(finish="tool_calls"))
    assert decode(body).error is StreamProtocolError


def test_a_tool_call_fragment_after_the_finish_reason_is_a_protocol_error() -> None:
    late = {"tool_calls": [{"index": 1, "id": "u", "function": {"name": "g"}}]}
    body = sse(chunk(finish="stop"), chunk(late))
    assert decode(body).error is StreamProtocolError


def test_other_choices_than_index_0_are_ignored() -> None:
    body = sse(
        json.dumps(
            {
                "choices": [
                    {"index": 1, "delta": {"content": "other"}},
                    {"index": 0, "delta": {"content": "mine"}},
                ]
            }
        ),
        "[DONE]",
    )
    assert decode(body).events == (text("mine"), Final("stop", None))


def test_keep_alive_data_is_ignored() -> None:
    assert decode(b"data:\n\n" + C08B_BODY).events == (text("Hello"), Final("stop", None))


# -- errors inside a 200 stream ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"type": "rate_limit_exceeded", "message": "slow down"}, ProviderRateLimited),
        ({"code": "rate_limit_exceeded", "message": "slow down"}, ProviderRateLimited),
        ({"code": 429, "message": "upstream rate limited"}, ProviderRateLimited),
        ({"type": "server_error", "message": "boom"}, ProviderServerError),
        ({"type": "overloaded_error", "message": "Overloaded"}, ProviderServerError),
        ({"code": 502, "message": "upstream failed"}, ProviderServerError),
        ({"type": "something_new"}, ProviderServerError),
        ({"type": "invalid_request_error", "message": "bad"}, ProviderBadRequest),
        ({"code": "invalid_api_key", "message": "no"}, ProviderAuthError),
        ("plain message", ProviderServerError),
    ],
)
def test_error_object_after_text_raises_typed_error_after_the_text(
    error: Any, kind: type[ProviderError]
) -> None:
    body = sse(chunk({"content": "par"}), json.dumps({"error": error}), "[DONE]")
    for k in range(len(body) + 1):
        outcome = decode(body[:k], body[k:])
        assert outcome == Outcome((text("par"),), kind), k


def test_error_event_carries_code_and_message() -> None:
    reducer = ChatCompletionsStreamReducer()
    assert reducer.feed(sse({"error": {"type": "rate_limit_exceeded", "message": "slow"}})) == []
    with pytest.raises(ProviderRateLimited) as info:
        reducer.raise_failure()
    assert info.value.code == "rate_limit_exceeded"
    assert "slow" in info.value.message
    assert info.value.status_code is None  # the HTTP answer itself was 200


@pytest.mark.parametrize("data", ['{"choices":[{"delta":{"content":"x"', "42", "[1]", "DONE"])
def test_data_that_is_not_a_json_object_is_a_protocol_error(data: str) -> None:
    body = sse(chunk({"content": "ok"}), data, "[DONE]")
    assert decode(body) == Outcome((text("ok"),), StreamProtocolError)


# -- property ----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2048), max_size=16))
def test_property_any_split_of_the_tool_call_stream(fixtures_dir: Path, cuts: list[int]) -> None:
    body = (fixtures_dir / "openai_chat_tool_call_chunked.sse").read_bytes()
    bounds = sorted({min(c, len(body)) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]
    assert decode(*pieces) == FIXTURE_OUTCOMES["openai_chat_tool_call_chunked.sse"]


# -- purity ------------------------------------------------------------------------------------


def test_a_refusal_is_visible_text() -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{"refusal":"I can\'t help with that."}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    events, failure = reduce_body(ChatCompletionsStreamReducer(), [body])
    assert failure is None
    assert fold(events).text == "I can't help with that."


def test_a_proxy_tool_result_flagged_is_error_failed() -> None:
    from providers.openai_chat_decode import proxy_tool_event

    flagged = {"x_tool_result": {"name": "bash", "output": "", "is_error": True, "error": "exit 2"}}
    assert proxy_tool_event(flagged) == PreExecutedToolResult("bash", "", error="exit 2")
    bare = {"x_tool_result": {"name": "bash", "is_error": True}}
    assert proxy_tool_event(bare) == PreExecutedToolResult("bash", "", error="failed")
    ok = {"x_tool_result": {"name": "bash", "output": "hi", "is_error": False}}
    assert proxy_tool_event(ok) == PreExecutedToolResult("bash", "hi")
