"""Errors that say what to do (architecture §2 "Failures"): one case per error class, through the
provider wire server, the real round runner, turn loop and delivery; the chat's marker and the
log line of the interrupted answer name the cause."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import Any, Literal

import pytest

from channels.base import InboundMessage
from orchestrator.turn.failure_causes import FailureContext, user_cause
from providers.errors import ContextLengthExceeded, ProviderBadRequest, ProviderError
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.peers.http_proxy import HttpProxy
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import make_turns, provider_config

pytestmark = pytest.mark.usefixtures("closes_providers")

PATH = "/v1/chat/completions"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _no_wait(seconds: float) -> None:
    return None


async def _interrupted(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    server: ProviderServer,
    **overrides: Any,
) -> tuple[str, str]:
    """Run one turn; returns (the chat's last visible text, the interrupted answer's log line)."""
    caplog.set_level(logging.INFO)
    turns, _ = make_turns(tmp_path, [provider_config(server, **overrides)], sleep=_no_wait)
    chat = RecordingChannel(FakeChannelConfig())
    inbound = InboundMessage("fake", "c1", "u1", "user", "hi", "m1")
    await turns.run(chat, inbound)
    lines = [r.getMessage() for r in caplog.records if "answer interrupted" in r.getMessage()]
    assert len(lines) == 1
    return chat.chat.visible()[-1], lines[0]


OPENAI_404 = {
    "error": {
        "message": "The model `m` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
}
CONTEXT_400 = {  # OpenAI's answer for a request longer than the model's context window
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, your "
        "messages resulted in 9000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
OLLAMA_404 = {  # Ollama's /v1 answer for a model it has not pulled
    "error": {
        "message": 'model "m" not found, try pulling it first',
        "type": "api_error",
        "param": None,
        "code": None,
    }
}


@pytest.mark.parametrize(
    ("replies", "overrides", "cause", "logged"),
    [
        pytest.param(
            [Reply.json({"error": {"message": "Incorrect API key sk-wr…"}}, status=401)],
            {},
            "the model service refused the API key (check providers.p0.api_key)",
            "Incorrect API key",
            id="auth",
        ),
        pytest.param(
            [
                Reply.json(
                    {"error": {"message": "slow down", "type": "rate_limit_error"}},
                    status=429,
                    headers={"Retry-After": "600"},
                )
            ],
            {},
            "the model service is rate limiting requests: try again in 10 min",
            "slow down",
            id="rate-limited",
        ),
        pytest.param(
            [
                Reply.json(
                    {
                        "error": {
                            "message": "You exceeded your current quota, please check "
                            "your plan and billing details.",
                            "type": "insufficient_quota",
                            "code": "insufficient_quota",
                        }
                    },
                    status=429,
                )
            ],
            {},
            "the model service's quota or credit is used up",
            "exceeded your current quota",
            id="quota-openai",
        ),
        pytest.param(
            [Reply.json({"error": {"message": "overloaded"}}, status=503)],
            {},
            "the model service failed (HTTP 503) after 3 tries: try again later",
            "overloaded",
            id="server",
        ),
        pytest.param(
            [Reply.json(OPENAI_404, status=404)],
            {},
            'the model service does not know the model "m"; it lists: llama3.2, qwen3 '
            "(set providers.p0.model)",
            "does not exist",
            id="unknown-model-openai",
        ),
        pytest.param(
            [Reply(body=b"404 page not found", status=404, content_type="text/plain")],
            {},
            "the model service has no such endpoint (HTTP 404): check providers.p0.base_url",
            "404 page not found",
            id="wrong-base-url",
        ),
        pytest.param(
            # trimmed harder and sent once more; the one message alone did not fit
            [Reply.json(CONTEXT_400, status=400)] * 2,
            {},
            "the message itself is too long for the model: shorten it, or use a model with a "
            "larger context window",
            "maximum context length",
            id="context-too-long",
        ),
        pytest.param(
            [Reply.json(OLLAMA_404, status=404)],
            {},
            'the model service does not know the model "m"; it lists: llama3.2, qwen3',
            "try pulling it first",
            id="unknown-model-ollama-v1",
        ),
    ],
)
async def test_each_error_class_says_what_to_do(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    replies: list[Reply],
    overrides: dict[str, Any],
    cause: str,
    logged: str,
) -> None:
    async with ProviderServer() as server:
        server.script(PATH, replies)
        models = {"object": "list", "data": [{"id": "llama3.2"}, {"id": "qwen3"}]}
        server.script("/v1/models", [Reply.json(models)])
        shown, line = await _interrupted(tmp_path, caplog, server, **overrides)
    assert shown.startswith(f"⚠️ Answer interrupted: {cause}")
    assert cause in line and logged in line  # the provider's own words go to the log only
    assert logged not in shown


async def test_anthropic_billing_error_is_quota(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "Your credit balance is too low to access the Anthropic API.",
        },
    }
    async with ProviderServer() as server:
        server.script("/v1/messages", [Reply.json(body, status=400)])
        shown, line = await _interrupted(
            tmp_path, caplog, server, kind="anthropic", base_url=server.url
        )
    assert "the model service's quota or credit is used up" in shown
    assert "credit balance is too low" in line


async def test_anthropic_unknown_model_lists_the_models(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = {"type": "error", "error": {"type": "not_found_error", "message": "model: m"}}
    async with ProviderServer() as server:
        server.script("/v1/messages", [Reply.json(body, status=404)])
        listing = {"data": [{"id": "claude-haiku-4-5", "type": "model"}], "has_more": False}
        server.script("/v1/models", [Reply.json(listing)])
        shown, line = await _interrupted(
            tmp_path, caplog, server, kind="anthropic", base_url=server.url
        )
        assert server.requests_to("/v1/models")[0].headers["x-api-key"] == "sk-test-key"
    cause = 'does not know the model "m"; it lists: claude-haiku-4-5 (set providers.p0.model)'
    assert cause in shown and cause in line


async def test_refused_connection_names_the_host(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = _closed_port()
    async with ProviderServer() as server:
        shown, line = await _interrupted(
            tmp_path, caplog, server, base_url=f"http://127.0.0.1:{port}/v1"
        )
    cause = f"cannot reach the model service: 127.0.0.1:{port} refused the connection"
    assert cause in shown and cause in line
    assert "(is it running? check providers.p0.base_url)" in shown


async def test_unresolvable_name_says_dns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with ProviderServer() as server:
        shown, line = await _interrupted(
            tmp_path, caplog, server, base_url="http://relaybot-test.invalid/v1"
        )
    cause = "the name of relaybot-test.invalid:80 does not resolve"
    assert cause in shown and cause in line


async def _plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(1)  # the ClientHello: answer as a plain HTTP server does
    writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


@pytest.mark.parametrize("through", ["direct", "an HTTPS_PROXY tunnel"])
async def test_tls_to_a_plain_http_server_says_tls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, through: str
) -> None:
    # Through an http:// proxy's tunnel the handshake is still the server's: the proxy only
    # copies its bytes, so the server is named, not the proxy.
    tcp = await asyncio.start_server(_plain_http, "127.0.0.1", 0)
    port = tcp.sockets[0].getsockname()[1]
    try:
        async with ProviderServer() as server, HttpProxy() as proxy:
            if through != "direct":
                monkeypatch.setenv("HTTPS_PROXY", proxy.url)
            url = f"https://127.0.0.1:{port}/v1"
            shown, line = await _interrupted(tmp_path, caplog, server, base_url=url)
    finally:
        tcp.close()
    assert set(proxy.targets) == (set() if through == "direct" else {f"127.0.0.1:{port}"})
    cause = f"the TLS handshake with 127.0.0.1:{port} failed"
    assert cause in shown and cause in line
    assert "proxy" not in shown


def test_the_table_is_walked_by_class_hierarchy() -> None:
    context = FailureContext("p0", None, attempts=1)
    # A class of its own in the table: the conversation is too long.
    too_long = user_cause(ContextLengthExceeded("too long", status_code=400), context)
    assert too_long == "the conversation is too long for the model: send /reset to start afresh"

    # A subclass without an entry reads as its nearest parent that has one.
    class Unlisted(ProviderBadRequest):
        pass

    assert user_cause(Unlisted("x", status_code=422), context) == user_cause(
        ProviderBadRequest("x", status_code=422), context
    )
    assert "rejected the request (HTTP 422)" in user_cause(Unlisted("x", status_code=422))

    class Other(ProviderError):
        pass

    assert user_cause(Other("x"), context) == "the model service failed after 1 try"
    assert user_cause(None) == "the model service failed"


async def test_the_providers_message_is_redacted_in_the_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from config.models import PolicyConfig
    from orchestrator.ops.logsetup import RedactingFormatter
    from orchestrator.policy import OutboundPolicy

    key = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"
    body = {"error": {"message": f"Incorrect API key provided: {key}"}}
    async with ProviderServer() as server:
        server.script(PATH, [Reply.json(body, status=401)])
        _, line = await _interrupted(tmp_path, caplog, server)
    assert key in line  # the raw record holds it; the formatter every handler uses does not
    formatter = RedactingFormatter(OutboundPolicy.from_config(PolicyConfig()).redact)
    [record] = [r for r in caplog.records if "answer interrupted" in r.getMessage()]
    formatted = formatter.format(record)
    assert "the model service refused the API key" in formatted
    assert "Incorrect API key provided" in formatted and key not in formatted


HINTED = """\
providers:
  main:
    kind: openai_chat
    base_url: ${MY_BASE_URL:-http://127.0.0.1:9/v1}
    api_key: ${MY_KEY}
    model: gpt-4.1-mini
  an:
    kind: anthropic
    base_url: http://127.0.0.1:9
    api_key: sk-ant-written
    model: ${AN_MODEL}
agent:
  providers: [main, an]
channels:
  c:
    kind: console
"""


def test_a_hint_names_a_variable_only_where_the_value_came_from_it() -> None:
    from config.loader import default_config, load_config_text

    environ = {"MY_KEY": "sk-test", "AN_MODEL": "claude-haiku-4-5"}
    config = load_config_text(HINTED, environ=environ)
    main = FailureContext("main", config.providers["main"])
    an = FailureContext("an", config.providers["an"])
    # Written in the file: the key alone, never a variable the file does not read.
    assert main.setting("model") == "providers.main.model"
    assert an.setting("base_url") == "providers.an.base_url"
    assert an.setting("api_key") == "providers.an.api_key"
    # Read through ${NAME} (also with a default): that variable.
    assert main.setting("api_key") == "MY_KEY / providers.main.api_key"
    assert main.setting("base_url") == "MY_BASE_URL / providers.main.base_url"
    assert an.setting("model") == "AN_MODEL / providers.an.model"
    # The embedded default reads OPENAI_MODEL, OPENAI_BASE_URL and OPENAI_API_KEY.
    default = default_config({"OPENAI_API_KEY": "sk-test"}).providers["openai"]
    assert FailureContext("openai", default).setting("model") == (
        "OPENAI_MODEL / providers.openai.model"
    )
    anthropic = default_config({"ANTHROPIC_API_KEY": "sk-ant"}).providers["anthropic"]
    assert FailureContext("anthropic", anthropic).setting("base_url") == (
        "ANTHROPIC_BASE_URL / providers.anthropic.base_url"
    )


# -- through a proxy: the proxy is named when the failure was its ---------------------------


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_a_dead_proxy_is_named_not_the_model_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    port = _closed_port()
    monkeypatch.setenv(variable, f"http://127.0.0.1:{port}")
    async with ProviderServer() as server:
        shown, line = await _interrupted(tmp_path, caplog, server)
        assert server.requests == []
    cause = (
        f"cannot reach the model service: the proxy 127.0.0.1:{port} ({variable}) refused the "
        f"connection (is it running? check {variable}, or add 127.0.0.1 to NO_PROXY to reach it "
        "directly)"
    )
    assert cause in shown and cause in line
    assert server.url.removeprefix("http://") not in shown  # the model server is not blamed


async def test_an_unresolvable_proxy_name_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://relaybot-proxy.invalid:3128")
    async with ProviderServer() as server:
        shown, line = await _interrupted(tmp_path, caplog, server)
    cause = "the name of the proxy relaybot-proxy.invalid:3128 (HTTP_PROXY) does not resolve"
    assert cause in shown and cause in line


async def test_a_proxy_that_cannot_reach_the_server_says_which(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _closed_port()
    async with ProviderServer() as server, HttpProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        url = f"https://127.0.0.1:{port}/v1"
        shown, line = await _interrupted(tmp_path, caplog, server, base_url=url)
    assert set(proxy.targets) == {f"127.0.0.1:{port}"}  # asked for the tunnel (each try): 502
    proxy_host = proxy.url.removeprefix("http://")
    cause = (
        f"cannot reach the model service: the proxy {proxy_host} (HTTPS_PROXY) would not open a "
        f"connection to 127.0.0.1:{port} (it answered HTTP 502: check the proxy, or add "
        "127.0.0.1 to NO_PROXY to reach it directly)"
    )
    assert cause in shown and cause in line


@pytest.mark.parametrize("status", [502, 500])
async def test_a_gateway_error_through_a_proxy_names_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    # A forwarding proxy that cannot reach the server answers 502 itself (squid's
    # ERR_CONNECT_FAIL): "the model service failed, try again later" sent people to the wrong
    # party. A 500 is the server's own answer, passed on by the proxy: not the proxy's.
    async with ProviderServer() as server, HttpProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        if status == 502:  # the proxy's own answer: nothing listens at the base URL
            url = f"http://127.0.0.1:{_closed_port()}/v1"
        else:
            server.script(PATH, Reply.json({"error": {"message": "boom"}}, status=status))
            url = f"{server.url}/v1"
        shown, line = await _interrupted(tmp_path, caplog, server, base_url=url)
    assert proxy.targets
    named = f"the proxy {proxy.url.removeprefix('http://')} (HTTP_PROXY), or the model service "
    if status == 502:
        cause = (
            f"{named}behind it, answered HTTP 502 after 3 tries (a proxy answers so when it "
            "cannot reach the server: check the proxy, or add 127.0.0.1 to NO_PROXY to reach it "
            "directly)"
        )
        assert cause in shown and cause in line
    else:
        assert "the model service failed (HTTP 500)" in shown and "proxy" not in shown


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("refuse", ["407", "close"])
async def test_a_proxy_that_refuses_or_closes_unanswered_is_named(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    scheme: str,
    refuse: Literal["407", "close"],
) -> None:
    # A 407 is the proxy's by definition: it read "the model service rejected the request
    # (HTTP 407)" for an http:// base URL, and was sent again. A connection the proxy closed
    # unanswered read "the connection to the model service at HOST broke", the proxy unnamed
    # (which of the two closed it cannot be told: both are named).
    port = _closed_port()
    variable = f"{scheme.upper()}_PROXY"
    async with ProviderServer() as server, HttpProxy(refuse=refuse) as proxy:
        monkeypatch.setenv(variable, proxy.url)
        url = f"{scheme}://127.0.0.1:{port}/v1"
        shown, line = await _interrupted(tmp_path, caplog, server, base_url=url)
    named = f"the proxy {proxy.url.removeprefix('http://')} ({variable})"
    if refuse == "407":
        cause = (
            f"cannot reach the model service: {named} asks for a user and password (HTTP 407): "
            f"give them in {variable}, in its URL before the host"
        )
        assert len(proxy.targets) == 1  # not sent again: its credentials will not change
    else:
        cause = (
            f"the connection to the model service at 127.0.0.1:{port} through {named} broke "
            "after 3 tries: check the proxy, or try again"
        )
    assert cause in shown and cause in line
