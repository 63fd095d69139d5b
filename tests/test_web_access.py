"""Who may use the web page's API (architecture §3 "Served over HTTP"): the web channel on the
real ops server (aiohttp on 127.0.0.1), asked over HTTP; its inbound handler records what it
would hand the orchestrator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from channels.base import InboundMessage
from channels.web.adapter import WebChannel
from channels.web.kind import WebChannelConfig
from orchestrator.metrics import Metrics
from orchestrator.ops.ops_server import OpsServer

TOKEN = "web-token-0123456789abcdef"


@asynccontextmanager
async def page(**keys: Any) -> AsyncIterator[tuple[str, list[InboundMessage]]]:
    """A web channel of ``keys`` served on a free port; yields its URL and what it handed on."""
    handed: list[InboundMessage] = []

    async def on_inbound(message: InboundMessage) -> None:
        handed.append(message)

    channel = WebChannel("web", WebChannelConfig(kind="web", **keys), on_inbound)
    await channel.start()
    server = OpsServer(Metrics(), endpoints=lambda: [channel])
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", handed
    finally:
        await channel.stop()
        await server.stop()


async def test_tokens_guard_the_api_but_not_the_page_itself() -> None:
    async with page(auth="tokens", tokens=[TOKEN]) as (url, _), httpx.AsyncClient() as http:
        assert (await http.get(url + "/")).status_code == 200
        api = {"X-Relaybot": "1"}
        assert (await http.get(url + "/api/session", headers=api)).status_code == 401
        wrong = {**api, "Authorization": "Bearer not-the-token-0000000"}
        assert (await http.get(url + "/api/session", headers=wrong)).status_code == 401
        right = {**api, "Authorization": f"Bearer {TOKEN}"}
        session = await http.get(url + "/api/session", headers=right)
        assert session.status_code == 200 and session.json()["user"].startswith("key-")
        assert TOKEN not in session.text


async def test_without_x_relaybot_or_at_a_foreign_host_the_api_refuses() -> None:
    async with page() as (url, _), httpx.AsyncClient() as http:
        assert (await http.get(url + "/api/session")).status_code == 403  # a cross-site form
        rebound = {"X-Relaybot": "1", "Host": "attacker.example:80"}  # DNS rebinding
        assert (await http.get(url + "/api/session", headers=rebound)).status_code == 403
        ok = await http.get(url + "/api/session", headers={"X-Relaybot": "1"})
        assert ok.status_code == 200 and ok.json()["user"] == "local"


async def test_the_proxy_header_names_the_user_and_conversations_are_per_browser() -> None:
    keys = {"auth": "trusted_user_header", "trusted_user_header": "X-User"}
    async with page(**keys) as (url, handed):
        headers = {"X-Relaybot": "1", "X-User": "alice"}
        async with httpx.AsyncClient(base_url=url, headers=headers) as alice:
            assert (await alice.get("/api/session", headers={"X-User": ""})).status_code == 401
            assert (await alice.get("/api/session")).status_code == 200
            conversation = (await alice.post("/api/conversations")).json()["id"]
            sent = await alice.post(
                f"/api/conversations/{conversation}/messages", json={"text": "hi there"}
            )
            assert sent.status_code == 200
            listed = (await alice.get("/api/session")).json()["conversations"]
            assert listed == [{"id": conversation, "title": "hi there"}]
        async with httpx.AsyncClient(base_url=url, headers=headers) as other_browser:
            await other_browser.get("/api/session")
            assert (await other_browser.get("/api/session")).json()["conversations"] == []
            foreign = await other_browser.get(f"/api/conversations/{conversation}")
            assert foreign.status_code == 404
    assert [(m.sender_id, m.chat_id, m.text) for m in handed] == [
        ("alice", conversation, "hi there")
    ]


@pytest.mark.parametrize("mime", ["image/png", "application/x-unknown"])
async def test_an_upload_is_an_attachment(mime: str) -> None:
    async with page() as (url, handed):
        async with httpx.AsyncClient(base_url=url, headers={"X-Relaybot": "1"}) as http:
            await http.get("/api/session")
            conversation = (await http.post("/api/conversations")).json()["id"]
            sent = await http.post(
                f"/api/conversations/{conversation}/messages",
                data={"text": "what is this?"},
                files={"file": ("f", b"\x89PNG-bytes", mime)},
            )
            assert sent.status_code == 200
    (message,) = handed
    (attachment,) = message.attachments
    assert (message.text, attachment.mime_type, attachment.size) == ("what is this?", mime, 10)
    assert attachment.fetched == (mime == "image/png")  # another type: refused in one line
