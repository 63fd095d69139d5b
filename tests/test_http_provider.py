"""What the four HTTP providers share (providers/http_provider.py), over real HTTP: each posts to
its endpoint with its ``accept`` and key headers, closes only the client it made, and reads the
proxy and CA variables as the vendor SDKs do (through a local forwarding proxy and a local HTTPS
server whose CA only ``SSL_CERT_FILE`` names)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from providers.anthropic_messages import AnthropicMessagesProvider
from providers.base import ChatMessage, ChatRequest, fold
from providers.errors import ProviderBadRequest, ProviderConnectionError
from providers.http_provider import HttpModelProvider
from providers.ollama_chat import OllamaChatProvider
from providers.openai_chat import OpenAIChatProvider
from providers.openai_responses import OpenAIResponsesProvider
from tests.peers.http_proxy import HttpProxy
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


# -- the environment, as the vendor SDKs read it (architecture §2)
# -----------------------------------

ANSWER = Reply.json(
    {"choices": [{"index": 0, "message": {"content": "via"}, "finish_reason": "stop"}]}
)
STREAMED = Reply(
    body=b'data: {"choices":[{"index":0,"delta":{"content":"via"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


async def _ask_through(server: ProviderServer, **overrides: Any) -> tuple[str, str]:
    """Stream and then call ``server`` with a provider made now (it reads the environment)."""
    server.script("/v1/chat/completions", [STREAMED, ANSWER])
    provider = OpenAIChatProvider("p", config("openai_chat", server.url + "/v1", **overrides))
    try:
        streamed = fold([event async for event in provider.stream(REQUEST)])
        blocking = await provider.complete(REQUEST)
    finally:
        await provider.aclose()
    return streamed.text, blocking.text


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_http_proxy_from_the_environment_carries_the_requests(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    async with ProviderServer() as server, HttpProxy() as proxy:
        monkeypatch.setenv(variable, proxy.url)
        assert await _ask_through(server) == ("via", "via")
    assert proxy.targets  # absolute-form: the client asked the proxy for the provider's URL
    assert all(t == f"{server.url}/v1/chat/completions" for t in proxy.targets), proxy.targets
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "localhost,127.0.0.1", "*", "[::1],127.0.0.1"])
async def test_no_proxy_bypasses_the_proxy(monkeypatch: pytest.MonkeyPatch, no_proxy: str) -> None:
    async with ProviderServer() as server, HttpProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        assert await _ask_through(server) == ("via", "via")
    assert proxy.targets == []
    assert len(server.requests) == 2


async def test_a_provider_with_proxy_none_goes_direct_whatever_the_environment_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with ProviderServer() as server, HttpProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("ALL_PROXY", proxy.url)
        assert await _ask_through(server, proxy="none") == ("via", "via")
        assert await _ask_through(server) == ("via", "via")  # the same environment, proxied
    assert len(proxy.targets) == 1  # the second provider's (one kept-alive connection)


async def test_without_proxy_variables_requests_go_direct() -> None:
    async with ProviderServer() as server, HttpProxy() as proxy:
        assert await _ask_through(server) == ("via", "via")
    assert proxy.targets == []


@pytest.fixture
def certificate_authority(tmp_path: Path) -> tuple[trustme.CA, Path]:
    """A fresh CA (not in the system store) and its certificate as a PEM file."""
    ca = trustme.CA()
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    return ca, pem


def _tls_server(ca: trustme.CA) -> ProviderServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return ProviderServer(tls=context)


async def test_ssl_cert_file_adds_the_ca_the_provider_trusts(
    monkeypatch: pytest.MonkeyPatch, certificate_authority: tuple[trustme.CA, Path]
) -> None:
    ca, pem = certificate_authority
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    async with _tls_server(ca) as server:
        assert server.url.startswith("https://")
        assert await _ask_through(server) == ("via", "via")


async def test_without_ssl_cert_file_an_unknown_ca_is_refused(
    monkeypatch: pytest.MonkeyPatch, certificate_authority: tuple[trustme.CA, Path]
) -> None:
    ca, _ = certificate_authority
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with _tls_server(ca) as server:
        with pytest.raises(ProviderConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            await _ask_through(server)


async def test_https_proxy_tunnels_an_https_provider_with_connect(
    monkeypatch: pytest.MonkeyPatch, certificate_authority: tuple[trustme.CA, Path]
) -> None:
    ca, pem = certificate_authority
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    async with _tls_server(ca) as server, HttpProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        assert await _ask_through(server) == ("via", "via")
    assert proxy.targets and set(proxy.targets) == {server.url.removeprefix("https://")}
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
