"""A server that ignores ``stream: true``: one JSON body read as the whole answer (architecture §2
"A server that does not stream").

Several OpenAI- and Anthropic-compatible proxies answer a streaming request with the blocking
answer, ``Content-Type: application/json``. Each of the four wire formats is served that way by
the scripted provider peer; the stream must give the answer the blocking call gives for the same
body (text, reasoning, tool calls, usage, finish reason), log "the server did not stream" once per
provider, type an error object as the blocking call does, and keep the byte-idle and size bounds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from providers.anthropic_messages import AnthropicMessagesProvider
from providers.base import ChatMessage, ChatRequest, CompletionResponse, ToolSpec
from providers.bounded_json import MAX_FRAME_BYTES
from providers.errors import (
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.events import Final, ToolCall, Usage
from providers.http_provider import HttpModelProvider
from providers.ollama_chat import OllamaChatProvider
from providers.openai_chat import OpenAIChatProvider
from providers.openai_responses import OpenAIResponsesProvider
from tests.openai_chat_cases import TOOL_CALL_BLOCKING_ANSWER
from tests.peers.provider_server import ProviderServer, Reply
from tests.stream_helpers import collect, collect_folded, config, served, sse, text

WEATHER = ToolSpec("get_weather", "Weather for a city.")
TIME = ToolSpec("current_time", "The current time in a timezone.")
REQUEST = ChatRequest(messages=(ChatMessage("user", "weather and time?"),), tools=(WEATHER, TIME))
LOGGER = "providers.http_provider"


def _openai_chat(server: ProviderServer, **overrides: object) -> HttpModelProvider:
    return OpenAIChatProvider("proxy-chat", config("openai_chat", server.url + "/v1", **overrides))


def _responses(server: ProviderServer, **overrides: object) -> HttpModelProvider:
    return OpenAIResponsesProvider(
        "proxy-responses", config("openai_responses", server.url + "/v1", **overrides)
    )


def _anthropic(server: ProviderServer, **overrides: object) -> HttpModelProvider:
    return AnthropicMessagesProvider("proxy-claude", config("anthropic", server.url, **overrides))


def _ollama(server: ProviderServer, **overrides: object) -> HttpModelProvider:
    return OllamaChatProvider("proxy-ollama", config("ollama", server.url, **overrides))


ANTHROPIC_ANSWER: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "thinking", "thinking": "The user wants weather.", "signature": "EqQBsig"},
        {"type": "text", "text": "Let me look that up."},
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "get_weather",
            "input": {"location": "Tokyo"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 472, "output_tokens": 89, "cache_read_input_tokens": 12},
}

RESPONSES_ANSWER: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-test",
    "output": [
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking the weather."}],
        },
        {
            "id": "fc_1",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_w1",
            "name": "get_weather",
            "arguments": '{"city": "Tokyo"}',
        },
    ],
    "usage": {
        "input_tokens": 120,
        "output_tokens": 30,
        "input_tokens_details": {"cached_tokens": 45},
    },
}

OLLAMA_ANSWER: dict[str, Any] = {
    "model": "llama-test",
    "message": {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}],
    },
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 120,
    "eval_count": 18,
}

OLLAMA_TEXT_ANSWER: dict[str, Any] = {
    "model": "llama-test",
    "message": {"role": "assistant", "content": "The sky is blue."},
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 26,
    "eval_count": 4,
}

Make = Callable[..., HttpModelProvider]

CASES: dict[str, tuple[Make, str, dict[str, Any]]] = {
    "openai_chat": (_openai_chat, "/v1/chat/completions", TOOL_CALL_BLOCKING_ANSWER),
    "openai_responses": (_responses, "/v1/responses", RESPONSES_ANSWER),
    "anthropic": (_anthropic, "/v1/messages", ANTHROPIC_ANSWER),
    "ollama": (_ollama, "/api/chat", OLLAMA_ANSWER),
    "ollama_text": (_ollama, "/api/chat", OLLAMA_TEXT_ANSWER),
}

EXPECTED: dict[str, CompletionResponse] = {
    "openai_chat": CompletionResponse(
        text="Let me check the time.",
        tool_calls=(
            ToolCall("call_a1", "current_time", '{"timezone": "UTC"}'),
            ToolCall("call_b2", "current_time", '{"timezone": "Asia/Tokyo"}'),
        ),
        usage=Usage(57, 41, 0),
        finish_reason="tool_calls",
        raw_finish_reason="tool_calls",
    ),
    "openai_responses": CompletionResponse(
        text="Checking the weather.",
        tool_calls=(ToolCall("call_w1", "get_weather", '{"city": "Tokyo"}'),),
        usage=Usage(120, 30, 45),
        finish_reason="tool_calls",
    ),
    "anthropic": CompletionResponse(
        text="Let me look that up.",
        reasoning="The user wants weather.",
        tool_calls=(ToolCall("toolu_01", "get_weather", '{"location": "Tokyo"}'),),
        usage=Usage(484, 89, 12),
        finish_reason="tool_calls",
        raw_finish_reason="tool_use",
    ),
    "ollama": CompletionResponse(
        tool_calls=(ToolCall("call_0", "get_weather", '{"city": "Tokyo"}'),),
        usage=Usage(120, 18, None),
        finish_reason="tool_calls",
    ),
    "ollama_text": CompletionResponse(
        text="The sky is blue.", usage=Usage(26, 4, None), finish_reason="stop"
    ),
}


def _did_not_stream(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "did not stream" in r.getMessage()]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_json_body_to_a_streaming_request_is_the_whole_answer(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    make, path, answer = CASES[case]
    caplog.set_level(logging.INFO, logger=LOGGER)
    # Two streaming requests (one body cut in three reads) and the blocking call of the same body.
    replies = [Reply.json(answer, cuts=[7, 40], delay_secs=0.01), Reply.json(answer)]
    async with served(make, path, replies) as (provider, server):
        first = provider.stream(REQUEST)
        streamed = await collect_folded(first)
        events, error = await collect(provider.stream(REQUEST))
        blocking = await provider.complete(REQUEST)
    assert [r.json["stream"] for r in server.requests] == [True, True, False]
    assert error is None and isinstance(events[-1], Final)
    # What the blocking parse gives, provider items included (Anthropic thinking blocks,
    # Responses output items): the stream folds to the same response.
    assert streamed == blocking
    expected = EXPECTED[case]
    assert replace(streamed, provider_items=(), raw_finish_reason=None) == replace(
        expected, raw_finish_reason=None
    )
    if case in ("openai_chat", "anthropic"):
        assert streamed.raw_finish_reason == expected.raw_finish_reason
    # Said once per provider, not per request, naming the provider and the server.
    (record,) = _did_not_stream(caplog)
    message = record.getMessage()
    assert provider.name in message and server.url.removeprefix("http://") in message


async def test_events_are_those_a_stream_of_the_answer_gives() -> None:
    """Chat Completions: the events themselves, in stream order (text, the calls, usage, final)."""
    make, path, answer = CASES["openai_chat"]
    async with served(make, path, Reply.json(answer)) as (provider, _):
        events, error = await collect(provider.stream(REQUEST))
    assert error is None
    assert events == [
        text("Let me check the time."),
        ToolCall("call_a1", "current_time", '{"timezone": "UTC"}'),
        ToolCall("call_b2", "current_time", '{"timezone": "Asia/Tokyo"}'),
        Usage(57, 41, 0),
        Final("tool_calls", "tool_calls"),
    ]


async def test_each_provider_says_it_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with ProviderServer() as server:
        server.script("/v1/chat/completions", [Reply.json(TOOL_CALL_BLOCKING_ANSWER)])
        one = OpenAIChatProvider("one", config("openai_chat", server.url + "/v1"))
        two = OpenAIChatProvider("two", config("openai_chat", server.url + "/v1"))
        try:
            for provider in (one, two, one, two, one):
                _, error = await collect(provider.stream(REQUEST))
                assert error is None
        finally:
            await one.aclose()
            await two.aclose()
    named = [r.getMessage().split("'")[1] for r in _did_not_stream(caplog)]
    assert named == ["one", "two"]


OVERLOADED = {"type": "overloaded_error", "message": "busy"}


@pytest.mark.parametrize(
    ("case", "body", "error_type"),
    [
        (
            "openai_chat",
            {"error": {"type": "server_error", "message": "broke"}},
            ProviderServerError,
        ),
        ("openai_chat", {"error": {"code": "rate_limit_exceeded"}}, ProviderRateLimited),
        ("anthropic", {"type": "error", "error": OVERLOADED}, ProviderServerError),
        ("anthropic", {"error": {"type": "rate_limit_error"}}, ProviderRateLimited),
        ("openai_responses", {"type": "error", "code": "server_error"}, ProviderServerError),
        ("openai_responses", {"error": {"type": "server_error"}}, ProviderServerError),
        ("ollama", {"error": "model crashed"}, ProviderServerError),
    ],
)
async def test_an_error_object_in_a_2xx_json_body_is_typed_as_the_blocking_call_types_it(
    case: str, body: dict[str, Any], error_type: type[ProviderError]
) -> None:
    make, path, _ = CASES[case]
    async with served(make, path, Reply.json(body)) as (provider, _):
        events, error = await collect(provider.stream(REQUEST))
        with pytest.raises(ProviderError) as blocking:
            await provider.complete(REQUEST)
    assert events == []
    assert type(error) is error_type and type(blocking.value) is error_type
    assert error.message == blocking.value.message


async def test_a_json_body_is_read_under_the_byte_idle_bound() -> None:
    make, path, answer = CASES["anthropic"]
    reply = Reply.json(answer, cuts=[20], pauses={1: 3.0})
    async with served(make, path, reply, stream_idle_timeout_secs=1) as (provider, _):
        events, error = await collect(provider.stream(REQUEST))
    assert events == []
    assert isinstance(error, ProviderTimeout) and error.phase == "idle"


async def test_a_json_body_larger_than_the_bound_is_refused_while_it_arrives() -> None:
    make, path, _ = CASES["openai_chat"]
    filler = b'{"pad": "' + b"x" * (MAX_FRAME_BYTES + 1) + b'"}'
    reply = Reply(body=filler, content_type="application/json", cuts=[1 << 20])
    async with served(make, path, reply) as (provider, _):
        events, error = await collect(provider.stream(REQUEST))
    assert events == []
    assert isinstance(error, StreamProtocolError) and "larger than" in error.message


async def test_a_stream_labelled_application_json_is_still_decoded() -> None:
    """A body so labelled that is not one JSON value is decoded as the stream it is."""
    make, path, _ = CASES["openai_chat"]
    body = (
        sse(
            {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
            {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
            event_lines=False,
        )
        + b"data: [DONE]\n\n"
    )
    reply = Reply(body=body, content_type="application/json")
    async with served(make, path, reply) as (provider, _):
        events, error = await collect(provider.stream(REQUEST))
    assert error is None
    assert events == [text("Hel"), text("lo"), Final("stop", "stop")]
