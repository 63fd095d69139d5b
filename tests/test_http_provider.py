"""What the four HTTP providers share (providers/http_provider.py), over real HTTP: each posts to
its endpoint with its ``accept`` and key headers, and closes only the client it made."""

from __future__ import annotations

import httpx
import pytest

from providers.anthropic_messages import AnthropicMessagesProvider
from providers.base import ChatMessage, ChatRequest
from providers.errors import ProviderBadRequest
from providers.http_provider import HttpModelProvider
from providers.ollama_chat import OllamaChatProvider
from providers.openai_chat import OpenAIChatProvider
from providers.openai_responses import OpenAIResponsesProvider
from tests.peers.provider_server import ProviderServer, Reply
from tests.stream_helpers import config

REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))
REFUSAL = Reply.json({"error": {"type": "invalid_request_error", "message": "no"}}, status=400)

KINDS = [
    # class, kind, base URL suffix, path, accept while streaming, key header and value
    (OpenAIChatProvider, "openai_chat", "/v1", "/v1/chat/completions", "text/event-stream",
     "authorization", "Bearer sk-1"),
    (OpenAIResponsesProvider, "openai_responses", "/v1", "/v1/responses", "text/event-stream",
     "authorization", "Bearer sk-1"),
    (AnthropicMessagesProvider, "anthropic", "/v1", "/v1/messages", "text/event-stream",
     "x-api-key", "sk-1"),
    (OllamaChatProvider, "ollama", "", "/api/chat", "application/x-ndjson",
     "authorization", "Bearer sk-1"),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "kind", "suffix", "path", "accept", "key", "value"), KINDS)
async def test_stream_and_blocking_call_post_to_the_endpoint_with_accept_and_key(
    cls: type[HttpModelProvider],
    kind: str,
    suffix: str,
    path: str,
    accept: str,
    key: str,
    value: str,
) -> None:
    async with ProviderServer() as server:
        server.script(path, REFUSAL)
        provider = cls("p", config(kind, server.url + suffix, api_key="sk-1"))
        try:
            with pytest.raises(ProviderBadRequest):
                async for _ in provider.stream(REQUEST):
                    pass
            with pytest.raises(ProviderBadRequest):
                await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    streamed, blocking = server.requests
    assert (streamed.method, streamed.path, blocking.path) == ("POST", path, path)
    assert (streamed.json["stream"], blocking.json["stream"]) == (True, False)
    assert streamed.headers["accept"] == accept
    assert blocking.headers["accept"] == "application/json"
    assert streamed.headers[key] == blocking.headers[key] == value
    assert provider.supports_streaming() and provider.supports_streaming_tool_events()


async def test_without_a_key_no_authorization_header_is_sent() -> None:
    async with ProviderServer() as server:
        server.script("/api/chat", REFUSAL)
        provider = OllamaChatProvider("local", config("ollama", server.url))
        try:
            with pytest.raises(ProviderBadRequest):
                await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    assert "authorization" not in server.requests[0].headers


@pytest.mark.parametrize("cls", [row[0] for row in KINDS])
async def test_aclose_closes_only_the_client_the_provider_made(
    cls: type[HttpModelProvider],
) -> None:
    settings = config("openai_chat", "http://127.0.0.1:9/v1")
    async with httpx.AsyncClient() as client:
        lent = cls("p", settings, client=client)
        await lent.aclose()
        assert not client.is_closed
    owned = cls("p", settings)
    await owned.aclose()
    assert owned._client.is_closed
