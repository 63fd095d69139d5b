"""The Telegram channel's ``proxy:`` option reaches python-telegram-bot: every Bot API call,
long polling included, goes through a local forward proxy in front of the Bot API peer
(architecture §6 ``channels.*.proxy``)."""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio

from channels.base import InboundMessage
from channels.telegram.adapter import TelegramChannel, TelegramTimeouts
from channels.telegram.kind import TelegramChannelConfig
from tests.peers.http_proxy import HttpProxy
from tests.peers.telegram import TelegramBotApiServer

CHAT = 111
FAST = TelegramTimeouts(connect_secs=2, read_secs=1, write_secs=2, pool_secs=1, long_poll_secs=1)
NOWHERE = "http://telegram.invalid/bot"
"""A base URL only the proxy can reach (``.invalid`` never resolves, RFC 6761)."""


async def test_every_bot_api_call_goes_through_the_configured_proxy() -> None:
    received: list[InboundMessage] = []
    arrived = anyio.Event()

    async def on_inbound(message: InboundMessage) -> None:
        received.append(message)
        arrived.set()

    async with TelegramBotApiServer() as peer:
        peer.open_chat(CHAT)
        address = urlsplit(peer.url)
        assert address.hostname is not None and address.port is not None
        async with HttpProxy(upstream=(address.hostname, address.port)) as proxy:
            config = TelegramChannelConfig(
                kind="telegram",
                token=peer.token,
                base_url=NOWHERE,
                allowed_users=["*"],
                proxy=proxy.url,
            )
            channel = TelegramChannel("tg", config, on_inbound, timeouts=FAST)
            await channel.start()  # getMe, then long polling
            try:
                peer.inject_message(CHAT, "hello through the proxy")
                with anyio.fail_after(15):
                    await arrived.wait()
                await channel.send_message(str(CHAT), "an answer")
            finally:
                await channel.stop()
    assert [m.text for m in received] == ["hello through the proxy"]
    assert peer.texts(CHAT)[-1] == "an answer"
    assert {c.method for c in peer.calls} >= {"getMe", "getUpdates", "sendMessage"}
    # Every connection went through the proxy: the base URL's host exists nowhere else. (The
    # proxy records the first request of each connection: the bot's and the long poll's.)
    assert proxy.targets
    assert {urlsplit(t).hostname for t in proxy.targets} == {"telegram.invalid"}
    assert {urlsplit(t).path.rsplit("/", 1)[-1] for t in proxy.targets} >= {"getMe", "getUpdates"}


async def test_without_a_proxy_the_same_base_url_cannot_start() -> None:
    from channels.errors import ChannelError

    async with TelegramBotApiServer() as peer:
        config = TelegramChannelConfig(
            kind="telegram", token=peer.token, base_url=NOWHERE, allowed_users=["*"]
        )
        channel = TelegramChannel("tg", config, _ignore, timeouts=FAST)
        try:
            with anyio.fail_after(30):
                await channel.start()
        except (ChannelError, OSError):
            pass
        else:
            await channel.stop()
            raise AssertionError("started without reaching the Bot API")
        assert peer.calls == []


async def _ignore(message: InboundMessage) -> None:
    return None
