"""The context budget's estimate and trimming (architecture §5 "Context budget"), and the typing
of a context-window rejection in every wire format's error mapping (§2 "Failures")."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.turn.history_budget import (
    DEFAULT_WINDOW,
    IMAGE_TOKENS,
    Calibration,
    answer_reserve,
    context_window,
    estimate_message,
    fit,
    prompt_limit,
)
from providers.base import ChatMessage, ImagePart
from providers.error_events import error_from_code, error_from_event
from providers.errors import ContextLengthExceeded, ProviderBadRequest
from providers.events import ToolCall
from providers.status_errors import error_from_status

# -- histories ---------------------------------------------------------------------------


@st.composite
def turns(draw: st.DrawFn, index: int) -> list[ChatMessage]:
    """One turn: a user message, then rounds of (assistant with calls, their results), then
    maybe an assistant answer."""
    text = st.text(max_size=400)
    messages = [ChatMessage("user", draw(text))]
    for round_ in range(draw(st.integers(0, 2))):
        calls = tuple(
            ToolCall(f"c{index}_{round_}_{k}", "t", draw(st.text(max_size=200)))
            for k in range(draw(st.integers(1, 3)))
        )
        messages.append(ChatMessage("assistant", draw(text), tool_calls=calls))
        messages += [ChatMessage("tool", draw(text), tool_call_id=c.id, name="t") for c in calls]
    if draw(st.booleans()):
        messages.append(ChatMessage("assistant", draw(text)))
    return messages


@st.composite
def histories(draw: st.DrawFn) -> list[ChatMessage]:
    count = draw(st.integers(1, 8))
    return [m for i in range(count) for m in draw(turns(i))]


def _cost(messages: list[ChatMessage]) -> int:
    return sum(estimate_message(m) for m in messages)


def _newest_turn(messages: list[ChatMessage]) -> int:
    return max(i for i, m in enumerate(messages) if m.role == "user")


limits = st.integers(0, 3000)
fixeds = st.integers(0, 300)


@given(histories(), limits, fixeds)
def test_never_splits_a_tool_call_from_its_results(
    messages: list[ChatMessage], limit: int, fixed: int
) -> None:
    kept = messages[fit(messages, limit=limit, fixed=fixed).start :]
    assert kept[0].role == "user"
    called = {c.id for m in kept for c in m.tool_calls}
    answered = {m.tool_call_id for m in kept if m.role == "tool"}
    assert called == answered


@given(histories(), limits, fixeds)
def test_fits_whenever_the_newest_turn_alone_fits(
    messages: list[ChatMessage], limit: int, fixed: int
) -> None:
    fitted = fit(messages, limit=limit, fixed=fixed)
    assert fitted.tokens == fixed + _cost(messages[fitted.start :])
    if fixed + _cost(messages[_newest_turn(messages) :]) <= limit:
        assert fitted.tokens <= limit


@given(histories(), limits, fixeds)
def test_keeps_the_newest_turn(messages: list[ChatMessage], limit: int, fixed: int) -> None:
    assert fit(messages, limit=limit, fixed=fixed).start <= _newest_turn(messages)


@given(histories(), limits, limits, fixeds)
def test_monotone_in_the_limit(messages: list[ChatMessage], a: int, b: int, fixed: int) -> None:
    low, high = sorted((a, b))
    assert (
        fit(messages, limit=high, fixed=fixed).start <= fit(messages, limit=low, fixed=fixed).start
    )


@given(histories(), fixeds)
def test_keeps_everything_when_everything_fits(messages: list[ChatMessage], fixed: int) -> None:
    assert fit(messages, limit=fixed + _cost(messages), fixed=fixed).start == 0


def test_drops_the_oldest_turns_first() -> None:
    messages = [ChatMessage("user" if i % 2 == 0 else "assistant", "x" * 400) for i in range(10)]
    fitted = fit(messages, limit=3 * 2 * estimate_message(messages[0]))
    assert fitted.start == 4  # the last three turns


def test_an_image_costs_a_fixed_amount() -> None:
    plain = ChatMessage("user", "look")
    image = ChatMessage("user", "look", images=(ImagePart("image/png", b"\x89PNG" * 10_000),))
    assert estimate_message(image) - estimate_message(plain) == IMAGE_TOKENS


# -- windows and calibration -----------------------------------------------------------------


def test_context_windows_of_known_models() -> None:
    assert context_window("gpt-4.1-mini") == 1_047_576
    assert context_window("gpt-4o-2024-08-06") == 128_000
    assert context_window("o3-mini") == 200_000
    assert context_window("claude-sonnet-4-5") == 200_000
    assert context_window("llama3.1:8b") == 131_072
    assert context_window("qwen2.5:7b-instruct") == 32_768
    assert context_window("mistral:latest") == 32_768
    assert context_window("some-local-model") == DEFAULT_WINDOW
    assert context_window("gpt-4o", 4000) == 4000


def test_the_answer_reserve() -> None:
    assert answer_reserve(128_000, 500) == 500
    assert answer_reserve(128_000, None) == 4096
    assert answer_reserve(8192, None) == 2048


def test_calibration_scales_the_limit() -> None:
    calibration = Calibration()
    assert calibration.ratio("p") == 1.0
    calibration.observe("p", 1000, 1250)
    calibration.observe("q", 1000, None)
    assert calibration.ratio("p") == 1.25
    assert calibration.ratio("q") == 1.0
    calibration.observe("p", 10, 10_000)  # a miscount is bounded
    assert calibration.ratio("p") == 4.0
    assert prompt_limit(4000, 200, 1.25) < prompt_limit(4000, 200, 1.0) < 3800


# -- typing the rejection ------------------------------------------------------------------


def _body(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_openai_context_length_exceeded_is_typed() -> None:
    error = {
        "message": "This model's maximum context length is 4000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    typed = error_from_status(400, _body({"error": error}))
    assert isinstance(typed, ContextLengthExceeded)
    assert isinstance(typed, ProviderBadRequest) and not typed.retryable
    assert isinstance(error_from_event(error), ContextLengthExceeded)
    error["message"] = "too long"
    assert isinstance(error_from_status(400, _body({"error": error})), ContextLengthExceeded)


def test_anthropic_prompt_too_long_is_typed() -> None:
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 5 > 4"},
    }
    assert isinstance(error_from_status(400, _body(body)), ContextLengthExceeded)
    typed = error_from_code("invalid_request_error", "prompt is too long", what="error event")
    assert isinstance(typed, ContextLengthExceeded)


def test_compatible_servers_context_messages_are_typed() -> None:
    ollama = {"error": "the input length exceeds the context length"}
    assert isinstance(error_from_status(400, _body(ollama)), ContextLengthExceeded)
    vllm = {"error": {"message": "Too many tokens in the prompt", "type": "BadRequestError"}}
    assert isinstance(error_from_status(400, _body(vllm)), ContextLengthExceeded)
    assert isinstance(error_from_event("context length exceeded"), ContextLengthExceeded)


def test_other_bad_requests_stay_bad_requests() -> None:
    other = {"error": {"type": "invalid_request_error", "message": "unknown field"}}
    typed = error_from_status(400, _body(other))
    assert type(typed) is ProviderBadRequest
    assert not isinstance(
        error_from_status(500, _body({"error": "context length"})), ProviderBadRequest
    )
