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
from tests.stream_helpers import (
    collect,
    config,
    multibyte_offsets,
    replay_fixture,
    served,
    sse,
    stream_at_cuts,
    text,
    typed_refusal,
)
from tests.test_responses_decode import FIXTURES, completed_response

PATH = "/v1/responses"
REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))


def _provider(server: ProviderServer, **overrides: object) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(
        "responses", config("openai_responses", server.url + "/v1", **overrides)
    )


@pytest.mark.parametrize("name", sorted(FIXTURES))
async def test_replayed_fixture_cut_at_line_ends(fixtures_dir: Path, name: str) -> None:
    await replay_fixture(_provider, PATH, fixtures_dir / name, REQUEST, FIXTURES[name])


async def test_multibyte_text_cut_inside_every_character() -> None:
    body = sse(
        {"type": "response.output_text.delta", "item_id": "m", "delta": "你好 🌍"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    )
    offsets = multibyte_offsets(body)
    assert len(offsets) == 2 + 2 + 3  # 你, 好 (3 bytes each), 🌍 (4 bytes)
    outcomes, _ = await stream_at_cuts(_provider, PATH, Reply(body=body), offsets, REQUEST)
    for cut, (events, error) in outcomes.items():
        assert error is None, cut
        assert events == [text("你好 🌍"), Final("stop", "completed")], cut


async def test_completed_ends_the_stream_without_waiting_for_eof(fixtures_dir: Path) -> None:
    path = fixtures_dir / "responses_completed_then_trailing.sse"
    reply = Reply.fixture(path, hold_open=True)
    async with served(_provider, PATH, reply, stream_idle_timeout_secs=30) as (provider, _):
        with anyio.fail_after(10):  # a hang guard only: waiting would end in the idle timeout
            events, error = await collect(provider.stream(REQUEST))
    assert error is None and events == [text("fallback"), Final("stop", "completed")]


async def test_idle_stream_times_out() -> None:
    reply = Reply.stall()
    async with served(_provider, PATH, reply, stream_idle_timeout_secs=0.3) as (provider, _):
        events, error = await collect(provider.stream(REQUEST))
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
    reply = Reply.json(body, status=status, headers={"Retry-After": "2"})
    error = await typed_refusal(_provider, PATH, reply, REQUEST)
    assert type(error) is error_type and "nope" in error.message
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
    replies = [Reply(body=first), Reply(body=first)]
    overrides = {"reasoning_effort": "low", "max_tokens": 500}
    async with served(_provider, PATH, replies, **overrides) as (provider, server):
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
    async with served(_provider, PATH, Reply(body=sse(COMPLETED))) as (provider, server):
        events, error = await collect(provider.stream(request))
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
    replies = [Reply.fixture(path), Reply.json(completed_response(path))]
    async with served(_provider, PATH, replies) as (provider, server):
        stream = provider.stream(REQUEST)
        events, error = await collect(stream)
        blocking = await provider.complete(REQUEST)
    assert error is None and stream.provider_items
    assert replace(fold(events), provider_items=stream.provider_items) == blocking
    assert server.requests[1].json["stream"] is False
