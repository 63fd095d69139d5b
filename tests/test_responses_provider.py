"""The Responses API provider over HTTP against the local replay server."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from providers.base import ChatMessage, ChatRequest, ToolSpec, fold
from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
)
from providers.events import Final, ToolCall
from providers.openai_responses import OpenAIResponsesProvider
from tests.peers.provider_server import ProviderServer, Reply
from tests.stream_helpers import collect, config, line_end_offsets, multibyte_offsets, sse, text
from tests.test_responses_decode import FIXTURES, completed_response

PATH = "/v1/responses"
REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))


def _provider(server: ProviderServer, **overrides: object) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(
        "responses", config("openai_responses", server.url + "/v1", **overrides)
    )


@pytest.mark.parametrize("name", sorted(FIXTURES))
async def test_replayed_fixture_cut_at_line_ends(fixtures_dir: Path, name: str) -> None:
    path = fixtures_dir / name
    body = path.read_bytes()
    expected_events, error_type = FIXTURES[name]
    offsets = sorted({*line_end_offsets(body), *multibyte_offsets(body)})
    async with ProviderServer() as server:
        server.script(PATH, [Reply.fixture(path, cuts=[cut], delay_secs=0.002) for cut in offsets])
        provider = _provider(server)
        try:
            for cut in offsets:
                events, error = await collect(provider.stream(REQUEST))
                assert events == expected_events, cut
                assert type(error) is error_type if error_type else error is None
        finally:
            await provider.aclose()
    assert len(server.requests_to(PATH)) == len(offsets)


async def test_multibyte_text_cut_inside_every_character() -> None:
    body = sse(
        {"type": "response.output_text.delta", "item_id": "m", "delta": "你好 🌍"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    )
    offsets = multibyte_offsets(body)
    assert len(offsets) == 2 + 2 + 3  # 你, 好 (3 bytes each), 🌍 (4 bytes)
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=body, cuts=[c], delay_secs=0.002) for c in offsets])
        provider = _provider(server)
        try:
            for cut in offsets:
                events, error = await collect(provider.stream(REQUEST))
                assert error is None, cut
                assert events == [text("你好 🌍"), Final("stop", "completed")], cut
        finally:
            await provider.aclose()


async def test_completed_ends_the_stream_without_waiting_for_eof(fixtures_dir: Path) -> None:
    path = fixtures_dir / "responses_completed_then_trailing.sse"
    async with ProviderServer() as server:
        server.script(PATH, Reply.fixture(path, hold_open=True))
        provider = _provider(server, stream_idle_timeout_secs=30)
        try:
            with anyio.fail_after(10):  # a hang guard only: waiting would end in the idle timeout
                events, error = await collect(provider.stream(REQUEST))
        finally:
            await provider.aclose()
    assert error is None and events == [text("fallback"), Final("stop", "completed")]


async def test_idle_stream_times_out() -> None:
    async with ProviderServer() as server:
        server.script(PATH, Reply.stall())
        provider = _provider(server, stream_idle_timeout_secs=0.3)
        try:
            events, error = await collect(provider.stream(REQUEST))
        finally:
            await provider.aclose()
    assert events == [] and isinstance(error, ProviderTimeout) and error.phase == "idle"


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (401, ProviderAuthError),
        (429, ProviderRateLimited),
        (500, ProviderServerError),
        (400, ProviderBadRequest),
    ],
)
async def test_http_errors_are_typed(status: int, error_type: type[ProviderError]) -> None:
    body = {"error": {"type": "x", "code": "y", "message": "nope"}}
    async with ProviderServer() as server:
        server.script(PATH, Reply.json(body, status=status, headers={"Retry-After": "2"}))
        provider = _provider(server)
        try:
            events, error = await collect(provider.stream(REQUEST))
            with pytest.raises(error_type):
                await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    assert events == [] and type(error) is error_type and "nope" in error.message
    if isinstance(error, ProviderRateLimited):
        assert error.retry_after == 2.0


REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "."}]}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "shell",
    "arguments": '{"command":"pwd"}',
    "status": "completed",
}


async def test_tool_round_sends_every_output_item_back_with_the_call_output() -> None:
    first = sse(
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.done", "output_index": 1, "item": CALL},
        {
            "type": "response.completed",
            "response": {"id": "r1", "status": "completed", "output": [REASONING, CALL]},
        },
    )
    tools = (ToolSpec("shell", "Runs a command."),)
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=first), Reply(body=first)])
        provider = _provider(server, reasoning_effort="low", max_tokens=500)
        try:
            request = ChatRequest(
                messages=(ChatMessage("system", "Be brief."), ChatMessage("user", "where?")),
                tools=tools,
            )
            stream = provider.stream(request)
            events, error = await collect(stream)
            assert error is None
            (call,) = [e for e in events if isinstance(e, ToolCall)]
            assert call == ToolCall("call_1", "shell", '{"command": "pwd"}')
            follow_up = ChatRequest(
                messages=(
                    *request.messages,
                    ChatMessage("assistant", "", (call,), provider_items=stream.provider_items),
                    ChatMessage("tool", "/home", tool_call_id=call.id, name="shell"),
                ),
                tools=tools,
            )
            await collect(provider.stream(follow_up))
        finally:
            await provider.aclose()
    one, two = server.requests
    assert one.headers["authorization"] == "Bearer test-key"
    assert one.json["instructions"] == "Be brief."
    assert one.json["stream"] is True
    assert one.json["reasoning"] == {"effort": "low"}
    assert one.json["max_output_tokens"] == 500
    assert one.json["tools"] == [
        {
            "type": "function",
            "name": "shell",
            "description": "Runs a command.",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        }
    ]
    assert "previous_response_id" not in two.json
    assert two.json["input"] == [
        {"role": "user", "content": "where?"},
        REASONING,
        CALL,
        {"type": "function_call_output", "call_id": "call_1", "output": "/home"},
    ]


COMPLETED = {"type": "response.completed", "response": {"status": "completed", "output": []}}


async def test_without_provider_items_the_call_is_rebuilt_from_the_message() -> None:
    call = ToolCall("call_7", "shell", '{"command": "ls"}')
    foreign = ({"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}},)
    request = ChatRequest(
        messages=(
            ChatMessage("user", "list"),
            ChatMessage("assistant", "Listing.", (call,), provider_items=foreign),
            ChatMessage("tool", "a.py", tool_call_id="call_7", name="shell"),
        )
    )
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=sse(COMPLETED)))
        provider = _provider(server)
        try:
            events, error = await collect(provider.stream(request))
        finally:
            await provider.aclose()
    assert error is None and events == [Final("stop", "completed")]
    assert server.requests[0].json["input"] == [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": "Listing."},
        {
            "type": "function_call",
            "call_id": "call_7",
            "name": "shell",
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": "call_7", "output": "a.py"},
    ]


@pytest.mark.parametrize("name", ["responses_function_call.sse", "responses_text_delta.sse"])
async def test_stream_and_blocking_call_fold_to_the_same_response(
    fixtures_dir: Path, name: str
) -> None:
    path = fixtures_dir / name
    async with ProviderServer() as server:
        server.script(PATH, [Reply.fixture(path), Reply.json(completed_response(path))])
        provider = _provider(server)
        try:
            stream = provider.stream(REQUEST)
            events, error = await collect(stream)
            blocking = await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    assert error is None and stream.provider_items
    assert replace(fold(events), provider_items=stream.provider_items) == blocking
    assert server.requests[1].json["stream"] is False
