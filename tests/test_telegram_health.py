"""``/healthz`` through the Telegram wire server (architecture §7; issue: it said ``ok`` during a
409 conflict): while getUpdates answers 409 Conflict (another instance polls the bot) the channel
is ``degraded`` with the reason and ``/healthz`` answers 503; once it answers again, 200.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from channels.base import ChannelHealth
from orchestrator.metrics import health_body
from tests.peers.provider_server import ProviderServer
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_chats import config_text, daemon_running, free_port


async def test_healthz_follows_a_polling_conflict(tmp_path: Path) -> None:
    port = free_port()
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        text = config_text(peer, provider, tmp_path, listen=f"127.0.0.1:{port}")
        async with daemon_running(text, tmp_path), httpx.AsyncClient() as http:
            url = f"http://127.0.0.1:{port}/healthz"
            await peer.wait_for(lambda: any(c.status == 200 for c in peer.calls_to("getUpdates")))
            healthy = await http.get(url)
            assert (healthy.status_code, healthy.json()) == (
                200,
                {
                    "status": "ok",
                    "channels": {"tg": {"state": "ok"}},
                    "providers": {"main": {"state": "ok"}},
                },
            )

            peer.competing = True
            await peer.wait_for(lambda: any(c.status == 409 for c in peer.calls_to("getUpdates")))
            conflict = await http.get(url)
            assert conflict.status_code == 503
            body = conflict.json()
            assert body["status"] == "degraded"
            assert body["channels"]["tg"]["state"] == "degraded"
            reason = body["channels"]["tg"]["reason"]
            assert "another instance is polling this bot" in reason and "409" in reason

            peer.competing = False
            answered = len(peer.calls_to("getUpdates"))
            await peer.wait_for(
                lambda: any(c.status == 200 for c in peer.calls_to("getUpdates")[answered:]), 10
            )
            again = await http.get(url)
            assert again.status_code == 200 and again.json()["status"] == "ok"


def test_health_body_names_every_degraded_channel() -> None:
    status, body = health_body(
        {"tg": ChannelHealth(), "mx": ChannelHealth("degraded", "homeserver unreachable")}
    )
    assert status == 503
    assert body == (
        b'{"status": "degraded", "channels": {"tg": {"state": "ok"}, '
        b'"mx": {"state": "degraded", "reason": "homeserver unreachable"}}}'
    )
    assert health_body({}) == (200, b'{"status": "ok", "channels": {}}')
