"""Redelivered updates through the Telegram wire server (architecture §7 dedupe; issue: answered
twice): a webhook POST of the same update twice, and updates getUpdates offers again after a
restart, are each answered once. The store keeps the ids it saw, bounded per channel.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from orchestrator.store import SEEN_UPDATES_KEPT, Store
from tests.peers.provider_server import ProviderServer
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_chats import PATH, config_text, daemon_running, free_port, observed
from tests.telegram_harness import CHAT, reply, text_stream


async def test_a_webhook_retry_of_the_same_update_is_answered_once(tmp_path: Path) -> None:
    port = free_port()
    webhook = (
        f'webhook: {{url: "http://127.0.0.1:{port}/hook", listen: "127.0.0.1:{port}", '
        'secret_token: "s3cret"}'
    )
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [reply(text_stream(["Once."])), reply(text_stream(["Twice?"]))])
        text = config_text(peer, provider, tmp_path, channel=webhook)
        async with daemon_running(text, tmp_path) as daemon:
            assert peer.webhook_url.endswith("/hook")
            message = peer.inject_message(CHAT, "hello")
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(1)
            (update,) = [u for u in peer.updates if u["message"] is message]
            assert await peer.post_again(update["update_id"]) == 200  # Telegram's retry
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(2)  # taken, recognised, dropped
            await anyio.sleep(0.3)
        assert peer.texts(CHAT) == ["Once."]
        assert len(provider.requests) == 1


async def test_updates_offered_again_after_a_restart_are_not_answered_again(
    tmp_path: Path,
) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [reply(text_stream(["First answer."])), reply(text_stream(["No!"]))])
        text = config_text(peer, provider, tmp_path)
        async with daemon_running(text, tmp_path) as daemon:
            peer.inject_message(CHAT, "question")
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(1)
        # The confirmation of the update never reached Telegram: it is offered again.
        peer.offer_again()
        last = peer.updates[-1]["update_id"]
        async with daemon_running(text, tmp_path) as daemon:
            with anyio.fail_after(15):
                await observed(daemon).wait_replies(1)  # taken, recognised, dropped
            # It polls on past the update: it was handled (and is confirmed now).
            await peer.wait_for(
                lambda: any(
                    (c.params.get("offset") or 0) > last for c in peer.calls_to("getUpdates")
                ),
                10,
            )
        assert peer.texts(CHAT) == ["First answer."]
        assert len(provider.requests) == 1


def test_seen_update_ids_are_bounded_per_channel(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    assert store.mark_seen("tg", (1, 2))
    assert not store.mark_seen("tg", (2,))
    assert not store.mark_seen("tg", (3, 1))  # an album one of whose updates was taken
    assert store.mark_seen("other", (1,))  # another bot's ids are its own
    assert store.mark_seen("tg", ())  # a message without update ids is always new
    for start in range(10, 10 + SEEN_UPDATES_KEPT + 10, 1000):
        assert store.mark_seen("tg", tuple(range(start, start + 1000)))
    assert store.seen_count("tg") == SEEN_UPDATES_KEPT
    assert store.seen_count("other") == 1
    assert store.mark_seen("tg", (1,))  # the oldest were pruned
    assert not store.mark_seen("tg", (10 + SEEN_UPDATES_KEPT + 5,))  # the newest are kept
