"""OpenAIChatProvider over real HTTP against the scripted provider peer (architecture §2, §8).

Byte-level splitting is covered exhaustively by ``test_openai_chat_decode``; here recorded bodies
go through httpx at a few chosen offsets (line ends, inside a multibyte character) with delays,
and the timeouts, status mapping, request shape and stream/blocking equivalence are checked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from config.models import ProviderConfig
from providers.base import ChatMessage, ChatRequest, ToolSpec, fold
from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    StreamTruncated,
)
from providers.events import Final, StreamEvent, ToolCall, Usage
from providers.openai_chat import OpenAIChatProvider, rejects_reasoning_effort
from providers.registry import build_provider
from tests.openai_chat_cases import (
    C02_BODY,
    C03_BODY,
    C07_BODY,
    C08B_BODY,
    C09_BODY,
    C10_BODY,
    C10_CUTS,
    FIXTURE_OUTCOMES,
    TOOL_CALL_BLOCKING_ANSWER,
    Outcome,
    c01_body,
    sse,
    text,
)
from tests.peers.provider_server import ProviderServer, Reply

PATH = "/v1/chat/completions"

REQUEST = ChatRequest(
    messages=(
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "What time is it in Tokyo?"),
        ChatMessage(
            "assistant",
            "",
            tool_calls=(ToolCall("call_a1", "current_time", '{"timezone": "Asia/Tokyo"}'),),
        ),
        ChatMessage("tool", "2026-01-01T09:00:00+09:00", tool_call_id="call_a1", name="now"),
    ),
    tools=(
        ToolSpec(
            "current_time",
            "The current time in a timezone.",
            {"type": "object", "properties": {"timezone": {"type": "string"}}},
        ),
    ),
)


@pytest.fixture
async def server() -> AsyncIterator[ProviderServer]:
    async with ProviderServer() as peer:
        yield peer


@asynccontextmanager
async def chat_provider(server: ProviderServer, **config: Any) -> AsyncIterator[OpenAIChatProvider]:
    settings: dict[str, Any] = {
        "kind": "openai_chat",
        "base_url": f"{server.url}/v1",
        "api_key": "test-key",
        "model": "gpt-test",
        "timeout_secs": 10,
        "stream_idle_timeout_secs": 10,
        **config,
    }
    provider = OpenAIChatProvider("main", ProviderConfig(**settings))
    try:
        yield provider
    finally:
        await provider.aclose()


async def run_stream(provider: OpenAIChatProvider, request: ChatRequest = REQUEST) -> Outcome:
    events: list[StreamEvent] = []
    try:
        async for event in provider.stream(request):
            events.append(event)
    except ProviderError as exc:
        return Outcome(tuple(events), type(exc))
    return Outcome(tuple(events))


async def stream_error(provider: OpenAIChatProvider) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        async for _ in provider.stream(REQUEST):
            pass
    return info.value


def line_ends(body: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(body) if byte == ord("\n")]


# -- replay ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_OUTCOMES))
@pytest.mark.parametrize("cutting", ["whole", "line_ends", "thirds", "first_bytes"])
async def test_fixture_replayed_over_http(
    server: ProviderServer, fixtures_dir: Path, name: str, cutting: str
) -> None:
    body = (fixtures_dir / name).read_bytes()
    cuts = {
        "whole": [],
        "line_ends": line_ends(body),
        "thirds": [len(body) // 3, 2 * len(body) // 3],
        "first_bytes": list(range(1, 12)),
    }[cutting]
    server.script(PATH, Reply.fixture(fixtures_dir / name, cuts=cuts, delay_secs=0.002))
    async with chat_provider(server) as provider:
        assert await run_stream(provider) == FIXTURE_OUTCOMES[name]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            c01_body("missing"),
            (ToolCall("c1", "lookup", '{"q":"x"}'), Final("tool_calls", "tool_calls")),
        ),
        (
            c01_body("null"),
            (ToolCall("c1", "lookup", '{"q":"x"}'), Final("tool_calls", "tool_calls")),
        ),
        (C07_BODY, (text("A"), text("B"), Final("stop", None))),
        (C09_BODY, (text("hi"), Final("stop", None))),
    ],
    ids=["C01-missing", "C01-null", "C07", "C09"],
)
async def test_cases_replayed_at_line_ends(
    server: ProviderServer, body: bytes, expected: tuple[StreamEvent, ...]
) -> None:
    server.script(PATH, Reply(body=body, cuts=line_ends(body), delay_secs=0.005))
    async with chat_provider(server) as provider:
        assert await run_stream(provider) == Outcome(expected)


async def test_c10_utf8_cut_inside_characters_over_http(server: ProviderServer) -> None:
    server.script(PATH, Reply(body=C10_BODY, cuts=C10_CUTS, delay_secs=0.05))
    async with chat_provider(server) as provider:
        assert await run_stream(provider) == Outcome((text("你好 🌍"), Final("stop", None)))


@pytest.mark.parametrize("framing", ["chunked", "close"])
async def test_c08a_clean_eof_before_finish_is_truncated_and_no_tool_call_runs(
    server: ProviderServer, fixtures_dir: Path, framing: str
) -> None:
    body = (fixtures_dir / "openai_chat_tool_call_chunked.sse").read_bytes()
    cut_body = body[: body.index(b'"finish_reason":"tool_calls"')]
    cut_body = cut_body[: cut_body.rindex(b"\n\n") + 2]  # every event whole, no finish
    server.script(PATH, Reply(body=cut_body, cuts=line_ends(cut_body), framing=framing))  # type: ignore[arg-type]
    async with chat_provider(server) as provider:
        outcome = await run_stream(provider)
    assert outcome == Outcome((text("Let me check the time."),), StreamTruncated)


async def test_connection_broken_mid_body_is_an_error_and_no_tool_call_runs(
    server: ProviderServer, fixtures_dir: Path
) -> None:
    body = (fixtures_dir / "openai_chat_tool_call_chunked.sse").read_bytes()
    cut = body.index(b'"finish_reason":"tool_calls"')
    server.script(PATH, Reply(body=body[:cut], abort=True))
    async with chat_provider(server) as provider:
        outcome = await run_stream(provider)
    assert outcome == Outcome((text("Let me check the time."),), ProviderConnectionError)


async def test_connection_broken_after_the_finish_reason_ends_properly(
    server: ProviderServer, fixtures_dir: Path
) -> None:
    body = (fixtures_dir / "openai_chat_tool_call_chunked.sse").read_bytes()
    cut = body.index(b"\n\n", body.index(b'"finish_reason":"tool_calls"')) + 2
    server.script(PATH, Reply(body=body[:cut], abort=True))
    async with chat_provider(server) as provider:
        outcome = await run_stream(provider)
    full = FIXTURE_OUTCOMES["openai_chat_tool_call_chunked.sse"].events
    assert outcome == Outcome(tuple(e for e in full if not isinstance(e, Usage)))


async def test_c08b_done_completes_at_once_while_the_socket_stays_open(
    server: ProviderServer,
) -> None:
    server.script(PATH, Reply(body=C08B_BODY, cuts=line_ends(C08B_BODY), hold_open=True))
    async with chat_provider(server, stream_idle_timeout_secs=120) as provider:
        with anyio.fail_after(30):  # far below the 120 s idle bound it must not wait for
            assert await run_stream(provider) == Outcome((text("Hello"), Final("stop", None)))
            await server.requests[0].wait_ended()
    assert server.requests[0].client_closed  # we closed the held-open response


# -- timeouts ----------------------------------------------------------------------------------


async def test_finish_reason_then_silence_ends_properly_at_the_idle_bound(
    server: ProviderServer, fixtures_dir: Path
) -> None:
    name = "oai_compat_finish_reason_no_done.sse"
    server.script(PATH, Reply.fixture(fixtures_dir / name, hold_open=True))
    async with chat_provider(server, stream_idle_timeout_secs=0.5) as provider:
        assert await run_stream(provider) == FIXTURE_OUTCOMES[name]


async def test_pause_longer_than_the_idle_bound_is_an_idle_timeout(server: ProviderServer) -> None:
    first = sse('{"choices":[{"delta":{"content":"par"}}]}')
    body = first + sse('{"choices":[{"delta":{},"finish_reason":"stop"}]}', "[DONE]")
    server.script(PATH, Reply(body=body, cuts=[len(first)], pauses={1: 3.0}))
    async with chat_provider(server, stream_idle_timeout_secs=1) as provider:
        events: list[StreamEvent] = []
        with pytest.raises(ProviderTimeout) as info:
            async for event in provider.stream(REQUEST):
                events.append(event)
    assert info.value.phase == "idle"
    assert events == [text("par")]


async def test_pause_longer_than_timeout_secs_but_within_the_idle_bound_succeeds(
    server: ProviderServer,
) -> None:
    first_event = C08B_BODY.index(b"\n\n") + 2
    server.script(PATH, Reply(body=C08B_BODY, cuts=[first_event], pauses={1: 0.8}))
    async with chat_provider(server, timeout_secs=0.3, stream_idle_timeout_secs=5) as provider:
        assert await run_stream(provider) == Outcome((text("Hello"), Final("stop", None)))


async def test_headers_then_nothing_is_an_idle_timeout(server: ProviderServer) -> None:
    server.script(PATH, Reply.stall())
    async with chat_provider(server, stream_idle_timeout_secs=0.5) as provider:
        error = await stream_error(provider)
    assert isinstance(error, ProviderTimeout) and error.phase == "idle"


async def test_no_headers_within_timeout_secs_is_a_headers_timeout(server: ProviderServer) -> None:
    server.script(PATH, Reply(body=C08B_BODY, header_delay_secs=5))
    async with chat_provider(server, timeout_secs=0.3) as provider:
        error = await stream_error(provider)
        assert isinstance(error, ProviderTimeout) and error.phase == "headers"
        with pytest.raises(ProviderTimeout) as info:
            await provider.complete(REQUEST)
        assert info.value.phase == "total"


async def test_connection_refused_is_a_connection_error() -> None:
    async with ProviderServer() as closed:
        url = closed.url
    config = ProviderConfig(kind="openai_chat", base_url=f"{url}/v1", api_key="k", model="m")
    provider = OpenAIChatProvider("main", config)
    try:
        assert (await run_stream(provider)).error is ProviderConnectionError
        with pytest.raises(ProviderConnectionError):
            await provider.complete(REQUEST)
    finally:
        await provider.aclose()


# -- status codes and error events -------------------------------------------------------------


def _openai_error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


@pytest.mark.parametrize(
    ("status", "headers", "kind"),
    [
        (401, {}, ProviderAuthError),
        (403, {}, ProviderAuthError),
        (429, {"Retry-After": "7"}, ProviderRateLimited),
        (500, {}, ProviderServerError),
        (503, {}, ProviderServerError),
        (400, {}, ProviderBadRequest),
        (404, {}, ProviderBadRequest),
    ],
)
async def test_http_status_maps_to_typed_errors(
    server: ProviderServer, status: int, headers: dict[str, str], kind: type[ProviderError]
) -> None:
    server.script(
        PATH, Reply.json(_openai_error("some_error", "went wrong"), status=status, headers=headers)
    )
    async with chat_provider(server) as provider:
        streamed = await stream_error(provider)
        with pytest.raises(ProviderError) as blocking:
            await provider.complete(REQUEST)
    for error in (streamed, blocking.value):
        assert type(error) is kind
        assert error.status_code == status
        assert "went wrong" in error.message
    if status == 429:
        assert isinstance(streamed, ProviderRateLimited) and streamed.retry_after == 7.0


async def test_reasoning_effort_rejection_is_recognisable(server: ProviderServer) -> None:
    message = "Function tools with reasoning_effort are not supported for this model."
    server.script(PATH, Reply.json(_openai_error("invalid_request_error", message), status=400))
    async with chat_provider(server) as provider:
        error = await stream_error(provider)
    assert isinstance(error, ProviderBadRequest) and rejects_reasoning_effort(error)
    assert not rejects_reasoning_effort(ProviderBadRequest("HTTP 400: max_tokens too large"))


async def test_error_object_inside_a_200_stream(server: ProviderServer) -> None:
    body = sse(
        '{"choices":[{"delta":{"content":"par"}}]}',
        '{"error":{"message":"Rate limit reached","type":"rate_limit_exceeded"}}',
    )
    server.script(PATH, Reply(body=body, cuts=line_ends(body), hold_open=True))
    async with chat_provider(server) as provider:
        assert await run_stream(provider) == Outcome((text("par"),), ProviderRateLimited)


async def test_blocking_error_object_and_non_json_body(server: ProviderServer) -> None:
    server.script(
        PATH,
        [
            Reply.json({"error": {"type": "server_error", "message": "boom"}}),
            Reply(body=b"<html>gateway</html>", content_type="text/html"),
        ],
    )
    async with chat_provider(server) as provider:
        for _ in range(2):
            with pytest.raises(ProviderServerError):
                await provider.complete(REQUEST)


# -- stream and blocking fold to the same response ---------------------------------------------


def _blocking(message: dict[str, Any], finish: str, usage: dict[str, Any] | None) -> Reply:
    answer: dict[str, Any] = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
    }
    if usage is not None:
        answer["usage"] = usage
    return Reply.json(answer)


@pytest.mark.parametrize("case", ["tool_calls", "C02", "C03", "no_usage"])
async def test_stream_and_blocking_fold_to_equal_responses(
    server: ProviderServer, fixtures_dir: Path, case: str
) -> None:
    if case == "tool_calls":
        streamed = Reply.fixture(fixtures_dir / "openai_chat_tool_call_chunked.sse")
        blocking = Reply.json(TOOL_CALL_BLOCKING_ANSWER)
    elif case == "C02":
        streamed = Reply(body=C02_BODY)
        usage = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
        blocking = _blocking({"content": "Hi"}, "stop", usage)
    elif case == "C03":
        streamed = Reply(body=C03_BODY)
        message = {"content": "Answer: 4", "reasoning_content": "Let me think more"}
        blocking = _blocking(message, "stop", None)
    else:
        streamed = Reply.fixture(fixtures_dir / "oai_compat_finish_reason_no_done.sse")
        blocking = _blocking({"content": "hi"}, "stop", None)
    server.script(PATH, [streamed, blocking])
    async with chat_provider(server) as provider:
        outcome = await run_stream(provider)
        assert outcome.error is None
        response = await provider.complete(REQUEST)
    assert fold(outcome.events) == response
    if case == "no_usage":
        assert response.usage is None  # never an estimate


# -- the request ---------------------------------------------------------------------------------


async def test_stream_request_shape(server: ProviderServer) -> None:
    server.script(PATH, Reply(body=C08B_BODY))
    async with chat_provider(server) as provider:
        await run_stream(provider)
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", PATH)
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    body = request.json
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "max_tokens" not in body and "reasoning_effort" not in body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "current_time",
                "description": "The current time in a timezone.",
                "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What time is it in Tokyo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a1",
                    "type": "function",
                    "function": {"name": "current_time", "arguments": '{"timezone": "Asia/Tokyo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a1", "content": "2026-01-01T09:00:00+09:00"},
    ]


async def test_blocking_request_shape_and_configured_limits(server: ProviderServer) -> None:
    server.script(PATH, _blocking({"content": "ok"}, "stop", None))
    request = ChatRequest(messages=(ChatMessage("user", "hi"),))
    async with chat_provider(server, max_tokens=64, reasoning_effort="low") as provider:
        response = await provider.complete(request)
    assert response.text == "ok"
    body = server.requests[0].json
    assert body["stream"] is False and "stream_options" not in body
    assert (body["max_tokens"], body["reasoning_effort"]) == (64, "low")
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "hi"}]


async def test_no_authorization_header_without_a_key(server: ProviderServer) -> None:
    server.script(PATH, Reply(body=C08B_BODY))
    config = ProviderConfig(kind="ollama", base_url=f"{server.url}/v1", model="llama3.2")
    provider = OpenAIChatProvider("local", config)  # Ollama's /v1 speaks Chat Completions
    try:
        assert (await run_stream(provider)).error is None
    finally:
        await provider.aclose()
    assert "authorization" not in server.requests[0].headers


def test_registry_builds_the_provider() -> None:
    config = ProviderConfig(kind="openai_chat", api_key="k", model="m")
    provider = build_provider("main", config)
    assert isinstance(provider, OpenAIChatProvider)
    assert provider.supports_streaming() and provider.supports_streaming_tool_events()


def test_tool_messages_need_their_call_id() -> None:
    from providers.openai_chat import message_to_wire

    with pytest.raises(ValueError):
        message_to_wire(ChatMessage("tool", "output"))
    assert json.loads(json.dumps(message_to_wire(ChatMessage("assistant", "hi")))) == {
        "role": "assistant",
        "content": "hi",
    }
