"""The Anthropic provider over HTTP against the local replay server (real sockets, real time)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from config.models import ProviderConfig
from providers.anthropic_messages import AnthropicMessagesProvider, messages_url
from providers.base import ChatMessage, ChatRequest, ToolSpec, fold
from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
)
from providers.events import Final, StreamEvent, ToolCall, Usage
from tests.peers.provider_server import ProviderServer, Reply
from tests.stream_helpers import (
    collect,
    collect_folded,
    config,
    replay_fixture,
    served,
    text,
    typed_refusal,
)
from tests.test_anthropic_decode import FIXTURES

PATH = "/v1/messages"
REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))


def _provider(server: ProviderServer, **overrides: object) -> AnthropicMessagesProvider:
    return AnthropicMessagesProvider("claude", config("anthropic", server.url + "/v1", **overrides))


@pytest.mark.parametrize("name", sorted(FIXTURES))
async def test_replayed_fixture_cut_at_line_ends_and_inside_characters(
    fixtures_dir: Path, name: str
) -> None:
    server = await replay_fixture(_provider, PATH, fixtures_dir / name, REQUEST, FIXTURES[name])
    assert server.requests[0].headers["content-type"] == "application/json"


async def _split_delivery(
    fixtures_dir: Path, pause_secs: float, **overrides: object
) -> tuple[list[StreamEvent], ProviderError | None]:
    one, two = (
        (fixtures_dir / f"anthropic_split_delivery_segment{n}.sse").read_bytes() for n in (1, 2)
    )
    reply = Reply(body=one + two, cuts=[len(one)], pauses={1: pause_secs})
    async with served(_provider, PATH, reply, **overrides) as (provider, _):
        return await collect(provider.stream(REQUEST))


async def test_split_delivery_is_bounded_by_the_idle_timeout_not_timeout_secs(
    fixtures_dir: Path,
) -> None:
    events, error = await _split_delivery(fixtures_dir, 1.2, timeout_secs=1)
    assert error is None
    assert events == [text("hi"), Usage(None, 1, None), Final("stop", "end_turn")]


async def test_a_pause_longer_than_the_idle_timeout_fails(fixtures_dir: Path) -> None:
    events, error = await _split_delivery(fixtures_dir, 3.0, stream_idle_timeout_secs=1)
    assert events == [text("hi")]
    assert isinstance(error, ProviderTimeout) and error.phase == "idle"


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (401, ProviderAuthError),
        (403, ProviderAuthError),
        (429, ProviderRateLimited),
        (529, ProviderServerError),
        (400, ProviderBadRequest),
    ],
)
async def test_http_errors_are_typed(status: int, error_type: type[ProviderError]) -> None:
    body = {"type": "error", "error": {"type": "some_error", "message": "nope"}}
    reply = Reply.json(body, status=status, headers={"Retry-After": "3"})
    error = await typed_refusal(_provider, PATH, reply, REQUEST)
    assert type(error) is error_type and "nope" in error.message
    if isinstance(error, ProviderRateLimited):
        assert error.retry_after == 3.0


async def test_request_shape_headers_system_tools_and_tool_results() -> None:
    request = ChatRequest(
        messages=(
            ChatMessage("system", "Be brief."),
            ChatMessage("user", "Time in Tokyo and UTC?"),
            ChatMessage(
                "assistant",
                "Checking.",
                tool_calls=(
                    ToolCall("toolu_1", "current_time", '{"tz": "Asia/Tokyo"}'),
                    ToolCall("toolu_2", "current_time", "{}"),
                ),
            ),
            ChatMessage("tool", "09:00", tool_call_id="toolu_1", name="current_time"),
            ChatMessage("tool", "00:00", tool_call_id="toolu_2", name="current_time"),
        ),
        tools=(ToolSpec("current_time", "Tells the time."),),
    )
    stop = Reply(body=b'data: {"type":"message_stop"}\n\n')
    async with served(_provider, PATH, stop) as (provider, server):
        events, error = await collect(provider.stream(request))
    assert error is None and events == [Final("stop", None)]
    (recorded,) = server.requests
    assert recorded.headers["x-api-key"] == "test-key"
    assert recorded.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in recorded.headers
    sent = recorded.json
    assert sent["stream"] is True and sent["model"] == "test-model" and sent["max_tokens"] == 4096
    assert sent["system"] == "Be brief."
    assert sent["tools"] == [
        {
            "name": "current_time",
            "description": "Tells the time.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Time in Tokyo and UTC?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "current_time",
                    "input": {"tz": "Asia/Tokyo"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "current_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "09:00"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "00:00"},
            ],
        },
    ]


async def test_thinking_blocks_go_back_verbatim_and_effort_enables_thinking(
    fixtures_dir: Path,
) -> None:
    body = (fixtures_dir / "anthropic_thinking_then_text.sse").read_bytes()
    reply = Reply(body=body)
    async with served(_provider, PATH, reply, reasoning_effort="low") as (provider, server):
        first = await collect_folded(provider.stream(REQUEST))
        follow_up = ChatRequest(
            messages=(
                *REQUEST.messages,
                ChatMessage("assistant", first.text, provider_items=first.provider_items),
                ChatMessage("user", "and 28 * 453?"),
            )
        )
        await collect(provider.stream(follow_up))
    sent = server.requests[1].json
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert sent["max_tokens"] > 1024
    assert sent["messages"][1] == {"role": "assistant", "content": list(first.provider_items)}
    assert sent["messages"][1]["content"][0]["signature"].startswith("EqQB")


@pytest.mark.parametrize(
    "name", ["anthropic_tool_use_with_ping.sse", "anthropic_thinking_then_text.sse"]
)
async def test_stream_and_blocking_call_fold_to_the_same_response(
    fixtures_dir: Path, name: str
) -> None:
    body = (fixtures_dir / name).read_bytes()
    if "tool_use" in name:
        content = [
            {"type": "text", "text": "Okay, let me check the weather."},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "get_weather",
                "input": {"location": "San Francisco, CA", "unit": "celsius"},
            },
        ]
        usage = {"input_tokens": 472, "output_tokens": 89, "cache_read_input_tokens": 0}
        stop_reason = "tool_use"
    else:
        content = [
            {
                "type": "thinking",
                "thinking": "27 * 453 = 12231.",
                "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
            },
            {"type": "text", "text": "27 × 453 = 12,231"},
        ]
        usage = {"input_tokens": 30, "output_tokens": 40}
        stop_reason = "end_turn"
    message = {"type": "message", "content": content, "stop_reason": stop_reason, "usage": usage}
    replies = [Reply(body=body, cuts=[100, 700]), Reply.json(message)]
    async with served(_provider, PATH, replies) as (provider, server):
        stream = provider.stream(REQUEST)
        events, error = await collect(stream)
        blocking = await provider.complete(REQUEST)
    assert error is None
    streamed = replace(fold(events), provider_items=stream.provider_items)
    assert streamed == blocking
    assert server.requests[1].json["stream"] is False
    assert streamed.text and streamed.finish_reason in ("stop", "tool_calls")


async def test_a_broken_connection_after_stop_reason_is_not_an_end(fixtures_dir: Path) -> None:
    path = fixtures_dir / "anthropic_truncated_before_message_stop.sse"
    async with served(_provider, PATH, Reply.fixture(path, abort=True)) as (provider, server):
        with anyio.fail_after(10):
            events, error = await collect(provider.stream(REQUEST))
    assert events == [text("partial")]
    assert isinstance(error, ProviderConnectionError)
    assert json.loads(server.requests[0].body)["stream"] is True


@pytest.mark.parametrize(
    ("suffix", "path"),
    [
        ("", "/v1/messages"),  # the SDK's spelling, as in ANTHROPIC_BASE_URL
        ("/", "/v1/messages"),
        ("/v1", "/v1/messages"),  # accepted, never doubled
        ("/v1/", "/v1/messages"),
        ("/proxy/anthropic", "/proxy/anthropic/v1/messages"),  # a proxy's documented root
        ("/proxy/anthropic/v1", "/proxy/anthropic/v1/messages"),
    ],
)
async def test_base_url_in_either_spelling_reaches_v1_messages(
    fixtures_dir: Path, suffix: str, path: str
) -> None:
    """architecture §2: ``base_url`` as the Anthropic SDK spells it; one ending in ``/v1`` works
    too."""
    message = {"type": "message", "content": [{"type": "text", "text": "Hi"}]}
    replies = [Reply.fixture(fixtures_dir / "anthropic_text_with_usage.sse"), Reply.json(message)]

    def make(server: ProviderServer) -> AnthropicMessagesProvider:
        return AnthropicMessagesProvider("claude", config("anthropic", server.url + suffix))

    async with served(make, path, replies) as (provider, server):
        events, error = await collect(provider.stream(REQUEST))
        blocking = await provider.complete(REQUEST)
    assert error is None and isinstance(events[-1], Final)
    assert blocking.text == "Hi"
    assert [r.path for r in server.requests] == [path, path]


def test_the_default_base_url_is_the_sdks() -> None:
    settings = ProviderConfig(kind="anthropic", api_key="k", model="m")
    assert settings.resolved_base_url == "https://api.anthropic.com"
    assert messages_url(settings.resolved_base_url) == "https://api.anthropic.com/v1/messages"
