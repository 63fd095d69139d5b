"""The Ollama provider over HTTP against the local replay server."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.base import ChatMessage, ChatRequest, ToolSpec, fold
from providers.errors import (
    ModelNotFound,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.events import Final, ToolCall
from providers.ollama_chat import OllamaChatProvider
from tests.peers.provider_server import ProviderServer, Reply
from tests.stream_helpers import (
    collect,
    config,
    multibyte_offsets,
    replay_fixture,
    replay_offsets,
    served,
    stream_at_cuts,
    typed_refusal,
)
from tests.test_ollama_decode import C11_LINES, FIXTURES

PATH = "/api/chat"
WEATHER_TOOL = ToolSpec("get_weather", "Weather for a city.")
REQUEST = ChatRequest(messages=(ChatMessage("user", "weather?"),), tools=(WEATHER_TOOL,))


def _provider(server: ProviderServer, **overrides: object) -> OllamaChatProvider:
    return OllamaChatProvider("local", config("ollama", server.url, **overrides))


@pytest.mark.parametrize("name", sorted(FIXTURES))
async def test_replayed_fixture_cut_at_line_ends(fixtures_dir: Path, name: str) -> None:
    server = await replay_fixture(_provider, PATH, fixtures_dir / name, REQUEST, FIXTURES[name])
    assert server.requests[0].json["stream"] is True


async def test_c11_over_http_with_a_multibyte_character_cut_everywhere() -> None:
    body = C11_LINES.replace(
        b'parameters\\":{}', 'parameters\\":{\\"city\\":\\"Zürich\\"}'.encode()
    )
    assert multibyte_offsets(body)
    reply = Reply(body=body, content_type="application/x-ndjson")
    outcomes, _ = await stream_at_cuts(_provider, PATH, reply, replay_offsets(body), REQUEST)
    for cut, (events, error) in outcomes.items():
        assert error is None, cut
        assert events == [
            ToolCall("call_0", "get_weather", '{"city": "Zürich"}'),
            Final("tool_calls", "stop"),
        ], cut


async def test_idle_stream_times_out_and_garbage_is_a_protocol_error() -> None:
    replies = [
        Reply.stall(content_type="application/x-ndjson"),
        Reply(body=b"<html>oops</html>\n", content_type="application/x-ndjson"),
    ]
    async with served(_provider, PATH, replies, stream_idle_timeout_secs=0.3) as (provider, _):
        events, error = await collect(provider.stream(REQUEST))
        assert events == [] and isinstance(error, ProviderTimeout)
        events, error = await collect(provider.stream(REQUEST))
        assert events == [] and isinstance(error, StreamProtocolError)


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(404, ModelNotFound), (429, ProviderRateLimited), (500, ProviderServerError)],
)
async def test_http_errors_are_typed(status: int, error_type: type[ProviderError]) -> None:
    reply = Reply.json({"error": "model 'x' not found"}, status=status)
    error = await typed_refusal(_provider, PATH, reply, REQUEST)
    assert type(error) is error_type and "not found" in error.message


async def test_request_shape_tool_calls_and_tool_messages() -> None:
    request = ChatRequest(
        messages=(
            ChatMessage("system", "Be brief."),
            ChatMessage("user", "Weather in Tokyo?"),
            ChatMessage("assistant", "", (ToolCall("call_0", "get_weather", '{"city": "Tokyo"}'),)),
            ChatMessage("tool", "Sunny, 20 °C", tool_call_id="call_0", name="get_weather"),
            ChatMessage("tool", "again", tool_call_id="call_0"),
        ),
        tools=(WEATHER_TOOL,),
    )
    reply = Reply(body=b'{"done": true}\n', content_type="application/x-ndjson")
    overrides = {"max_tokens": 64, "reasoning_effort": "high"}
    async with served(_provider, PATH, reply, **overrides) as (provider, server):
        events, error = await collect(provider.stream(request))
    assert error is None and events == [Final("stop", None)]
    (recorded,) = server.requests
    assert "authorization" not in recorded.headers  # no api_key configured
    sent = recorded.json
    assert (sent["model"], sent["stream"]) == ("test-model", True)
    assert sent["options"] == {"num_predict": 64} and sent["think"] == "high"
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Tokyo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}],
        },
        {"role": "tool", "content": "Sunny, 20 °C", "tool_name": "get_weather"},
        {"role": "tool", "content": "again", "tool_name": "get_weather"},
    ]


@pytest.mark.parametrize("name", ["ollama_chat_stream.ndjson", "ollama_chat_tool_call.ndjson"])
async def test_stream_and_blocking_call_fold_to_the_same_response(
    fixtures_dir: Path, name: str
) -> None:
    if "tool" in name:
        message = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}],
        }
        counts = {"prompt_eval_count": 120, "eval_count": 18}
    else:
        message = {"role": "assistant", "content": "The sky is blue."}
        counts = {"prompt_eval_count": 26, "eval_count": 4}
    answer = {"model": "m", "message": message, "done": True, "done_reason": "stop", **counts}
    replies = [Reply.fixture(fixtures_dir / name), Reply.json(answer)]
    async with served(_provider, PATH, replies, api_key="sk-local") as (provider, server):
        events, error = await collect(provider.stream(REQUEST))
        blocking = await provider.complete(REQUEST)
    assert error is None
    assert fold(events) == blocking
    assert blocking.text or blocking.tool_calls
    assert server.requests[1].json["stream"] is False
    assert server.requests[1].headers["authorization"] == "Bearer sk-local"


async def test_blocking_answer_with_an_error_body_is_typed() -> None:
    reply = Reply.json({"error": "model crashed"})
    async with served(_provider, PATH, reply) as (provider, _):
        with pytest.raises(ProviderServerError, match="model crashed"):
            await provider.complete(REQUEST)
