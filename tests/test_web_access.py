"""Who may use the web page's API (architecture §3 "Served over HTTP"): the web channel on the
real ops server (aiohttp on 127.0.0.1), asked over HTTP; its inbound handler records what it
would hand the orchestrator."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from channels.base import InboundMessage
from channels.web.adapter import WebChannel
from channels.web.kind import WebChannelConfig
from config.errors import ConfigError
from config.loader import load_config_text
from orchestrator.metrics import Metrics
from orchestrator.ops.ops_server import OpsServer
from tests.channel_harness import daemon_config
from tests.peers.provider_server import ProviderServer
from tests.web_harness import SECRET, WebClient, answer_reply, http_daemon, tool_call_reply

PATH = "/v1/chat/completions"

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


@pytest.mark.parametrize(
    ("mime", "kind", "fetched"),
    [
        ("image/png", "image", True),
        ("image/x-unknown", "image", False),  # no provider takes it: refused in one line
        ("application/pdf", "document", True),
        ("audio/ogg", "audio", True),
    ],
)
async def test_an_upload_is_an_attachment_of_its_kind(mime: str, kind: str, fetched: bool) -> None:
    async with page() as (url, handed):
        async with httpx.AsyncClient(base_url=url, headers={"X-Relaybot": "1"}) as http:
            await http.get("/api/session")
            conversation = (await http.post("/api/conversations")).json()["id"]
            sent = await http.post(
                f"/api/conversations/{conversation}/messages",
                data={"text": "what is this?"},
                files={"file": ("report.bin", b"0123456789", mime)},
            )
            assert sent.status_code == 200
    (message,) = handed
    (attachment,) = message.attachments
    assert (message.text, attachment.mime_type, attachment.size) == ("what is this?", mime, 10)
    assert (attachment.kind, attachment.file_name, attachment.fetched) == (
        kind,
        "report.bin",
        fetched,
    )


async def test_an_approval_is_answered_by_its_button(tmp_path: Path) -> None:
    """The page's Approve button: the prompt arrives as an event, the POST answers it, the tool
    runs and the answer follows (the real daemon and provider wire server)."""
    async with ProviderServer() as provider:
        provider.script(PATH, [tool_call_reply(), answer_reply()])
        agent = '  require_approval: "*"\n'
        async with http_daemon(provider.url, tmp_path, "  web: {kind: web}\n", agent=agent) as port:
            async with WebClient(f"http://127.0.0.1:{port}") as web:
                conversation = await web.new_conversation()

                async def approve(event: dict[str, Any]) -> None:
                    if event["type"] == "approval":
                        answered = await web.http.post(
                            f"/api/approvals/{event['id']}", json={"approved": True}
                        )
                        answered.raise_for_status()

                events = await web.ask(conversation, "What time is it?", on_event=approve)
    prompts = [e for e in events if e["type"] == "approval"]
    assert len(prompts) == 1 and "current_time" in prompts[0]["text"]
    assert {"type": "approved", "id": prompts[0]["id"], "approved": True} in events
    assert len(provider.requests_to(PATH)) == 2  # the tool ran; the model answered after it
    final = [e["text"] for e in events if e["type"] in ("send", "edit")][-1]
    assert "REDACTED" in final and SECRET[:12] not in str(events)


async def test_an_uploaded_document_reaches_the_model(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply()])
        async with http_daemon(provider.url, tmp_path, "  web: {kind: web}\n") as port:
            async with WebClient(f"http://127.0.0.1:{port}") as web:
                conversation = await web.new_conversation()
                notes = ("notes.txt", b"The launch code is blue.", "text/plain")
                await web.ask(conversation, "What do my notes say?", files=[notes])
    (request,) = provider.requests_to(PATH)
    sent = str(request.json["messages"])
    assert "The launch code is blue." in sent and "notes.txt" in sent


async def test_two_pages_at_two_paths_each_serve_their_own_conversations() -> None:
    def on_inbound(message: InboundMessage) -> Any:
        raise AssertionError(message)

    root = WebChannel("web", WebChannelConfig(kind="web"), on_inbound)
    team = WebChannel("team", WebChannelConfig(kind="web", path="/team"), on_inbound)
    for channel in (root, team):
        await channel.start()
    server = OpsServer(Metrics(), endpoints=lambda: [root, team])
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        async with httpx.AsyncClient() as http:
            pages = [(await http.get(url + p)).text for p in ("/", "/team/")]
            script = await http.get(url + "/team/static/app.js")
        async with WebClient(url) as at_root, WebClient(url + "/team") as at_team:
            ours = await at_team.new_conversation()
            listed = (await at_team.http.get("/api/session")).json()["conversations"]
            await at_root.new_conversation()
            elsewhere = await at_root.http.get(f"/api/conversations/{ours}")
    finally:
        for channel in (root, team):
            await channel.stop()
        await server.stop()
    assert all('src="static/app.js"' in page for page in pages)  # relative: under each path
    assert script.status_code == 200 and "text/javascript" in script.headers["content-type"]
    assert [c["id"] for c in listed] == [ours]
    assert elsewhere.status_code == 404  # the root page does not know the team's conversation
    assert str(at_team.http.base_url).endswith("/team/")


def test_two_served_channels_cannot_claim_one_path(tmp_path: Path) -> None:
    channels = "  web:\n    kind: web\n  other:\n    kind: web\n"
    text = daemon_config("http://127.0.0.1:1", tmp_path, channels, listen="127.0.0.1:9464")
    with pytest.raises(ConfigError) as refused:
        load_config_text(text, source_name="F", environ={})
    assert "channel 'web' is already served at /: give one of them another path" in str(
        refused.value
    )
    fixed = text.replace(channels, channels + '    path: "/other"\n')
    assert set(load_config_text(fixed, source_name="F", environ={}).channels) == {"web", "other"}
    with pytest.raises(ConfigError, match="without a trailing slash"):
        load_config_text(fixed.replace('"/other"', '"/other/"'), source_name="F", environ={})


def _history_rows(tmp_path: Path, conversation: str) -> int:
    """The model's history of ``conversation`` in the daemon's store, in rows."""
    with contextlib.closing(sqlite3.connect(tmp_path / "relaybot.db")) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM messages WHERE chat_id = ?", (conversation,)
        ).fetchone()
    return int(count)


async def test_a_deleted_conversation_leaves_the_list_the_page_and_the_store(
    tmp_path: Path,
) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply()])
        async with http_daemon(provider.url, tmp_path, "  web: {kind: web}\n") as port:
            async with WebClient(f"http://127.0.0.1:{port}") as web:
                gone = await web.new_conversation()
                kept = await web.new_conversation()
                await web.ask(gone, "hello")
                before = _history_rows(tmp_path, gone)
                deleted = await web.http.delete(f"/api/conversations/{gone}")
                listed = (await web.http.get("/api/session")).json()["conversations"]
                reopened = await web.http.get(f"/api/conversations/{gone}")
                again = await web.http.delete(f"/api/conversations/{gone}")
                for _ in range(500):  # the history goes with the /reset queued for it
                    if not (after := _history_rows(tmp_path, gone)):
                        break
                    await anyio.sleep(0.02)
    assert before == 2 and after == 0  # the question and its answer, then nothing
    assert deleted.status_code == 200
    assert [c["id"] for c in listed] == [kept]
    assert reopened.status_code == 404 and again.status_code == 404
