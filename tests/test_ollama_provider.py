"""The Ollama provider over HTTP against the local replay server."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.base import ChatMessage, ChatRequest, ToolSpec, fold
from providers.errors import (
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.events import Final, ToolCall
from providers.ollama_chat import OllamaChatProvider
from tests.peers.provider_server import ProviderServer, Reply
from tests.stream_helpers import collect, config, line_end_offsets, multibyte_offsets
from tests.test_ollama_decode import C11_LINES, FIXTURES

PATH = "/api/chat"
WEATHER_TOOL = ToolSpec("get_weather", "Weather for a city.")
REQUEST = ChatRequest(messages=(ChatMessage("user", "weather?"),), tools=(WEATHER_TOOL,))


def _provider(server: ProviderServer, **overrides: object) -> OllamaChatProvider:
    return OllamaChatProvider("local", config("ollama", server.url, **overrides))


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
    assert server.requests[0].json["stream"] is True


async def test_c11_over_http_with_a_multibyte_character_cut_everywhere() -> None:
    body = C11_LINES.replace(
        b'parameters\\":{}', 'parameters\\":{\\"city\\":\\"Zürich\\"}'.encode()
    )
    offsets = sorted({*line_end_offsets(body), *multibyte_offsets(body)})
    assert multibyte_offsets(body)
    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply(body=body, content_type="application/x-ndjson", cuts=[c], delay_secs=0.002)
                for c in offsets
            ],
        )
        provider = _provider(server)
        try:
            for cut in offsets:
                events, error = await collect(provider.stream(REQUEST))
                assert error is None, cut
                assert events == [
                    ToolCall("call_0", "get_weather", '{"city": "Zürich"}'),
                    Final("tool_calls", "stop"),
                ], cut
        finally:
            await provider.aclose()


async def test_idle_stream_times_out_and_garbage_is_a_protocol_error() -> None:
    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply.stall(content_type="application/x-ndjson"),
                Reply(body=b"<html>oops</html>\n", content_type="application/x-ndjson"),
            ],
        )
        provider = _provider(server, stream_idle_timeout_secs=0.3)
        try:
            events, error = await collect(provider.stream(REQUEST))
            assert events == [] and isinstance(error, ProviderTimeout)
            events, error = await collect(provider.stream(REQUEST))
            assert events == [] and isinstance(error, StreamProtocolError)
        finally:
            await provider.aclose()


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(404, ProviderBadRequest), (429, ProviderRateLimited), (500, ProviderServerError)],
)
async def test_http_errors_are_typed(status: int, error_type: type[ProviderError]) -> None:
    async with ProviderServer() as server:
        server.script(PATH, Reply.json({"error": "model 'x' not found"}, status=status))
        provider = _provider(server)
        try:
            events, error = await collect(provider.stream(REQUEST))
            with pytest.raises(error_type):
                await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    assert events == [] and type(error) is error_type and "not found" in error.message


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
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=b'{"done": true}\n', content_type="application/x-ndjson"))
        provider = _provider(server, max_tokens=64, reasoning_effort="high")
        try:
            events, error = await collect(provider.stream(request))
        finally:
            await provider.aclose()
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
    async with ProviderServer() as server:
        server.script(PATH, [Reply.fixture(fixtures_dir / name), Reply.json(answer)])
        provider = _provider(server, api_key="sk-local")
        try:
            events, error = await collect(provider.stream(REQUEST))
            blocking = await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    assert error is None
    assert fold(events) == blocking
    assert blocking.text or blocking.tool_calls
    assert server.requests[1].json["stream"] is False
    assert server.requests[1].headers["authorization"] == "Bearer sk-local"


async def test_blocking_answer_with_an_error_body_is_typed() -> None:
    async with ProviderServer() as server:
        server.script(PATH, Reply.json({"error": "model crashed"}))
        provider = _provider(server)
        try:
            with pytest.raises(ProviderServerError, match="model crashed"):
                await provider.complete(REQUEST)
        finally:
            await provider.aclose()
