"""End-to-end harness of the chat controls (architecture §5 "Chat controls"): the real daemon
against the local Telegram Bot API peer and the provider server, with the controls' YAML
(``agent.models``, ``admins``, ``limits``, ``prices``), restartable on the same store.

:func:`controls_config` writes the YAML; :class:`ControlsBot` runs daemons one after the other
on one peer, one provider server and one store (:meth:`ControlsBot.running`), and
:meth:`ControlsBot.ask` sends a text as a given user and waits for its reply to finish.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from tests.channel_harness import PATH, daemon_config, daemon_running
from tests.peers.provider_server import ProviderServer, RecordedRequest
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_harness import ObservedTelegramChannel, fast_channels

__all__ = ["ADMIN", "GROUP", "PATH", "USER", "ControlsBot", "controls_bot", "controls_config"]

USER = 111
"""The private chat's user (its chat id too)."""
ADMIN = 999
GROUP = -100
"""A group chat (``respond_in_groups: all``)."""


def controls_config(
    peer: TelegramBotApiServer,
    provider: ProviderServer,
    tmp_path: Path,
    *,
    channel: str = "",
    agent: str = "",
    top: str = "",
    prices: str = "",
    tools: str = "[]",
) -> str:
    """The daemon's YAML: the ``tg`` channel (admins ``[999]``, everyone allowed) and the
    ``main`` provider; ``channel``/``agent``/``prices`` add keys there, ``top`` top-level
    sections (``limits:``)."""
    keys = f"""\
  tg:
    kind: telegram
    token: "{peer.token}"
    base_url: "{peer.base_url}"
    stream_mode: partial
    draft_update_interval_ms: 100
    allowed_users: ["*"]
    admins: [{ADMIN}]
    respond_in_groups: all
{channel}"""
    text = daemon_config(provider.url, tmp_path, keys, agent=agent, provider=prices, tools=tools)
    return top + text


@dataclass
class ControlsBot:
    """The peers and the store of daemons run one after the other."""

    peer: TelegramBotApiServer
    provider: ProviderServer
    tmp_path: Path
    yaml: str
    daemon: Daemon | None = None

    @property
    def channel(self) -> ObservedTelegramChannel:
        assert self.daemon is not None
        channel = self.daemon.channels["tg"]
        assert isinstance(channel, ObservedTelegramChannel)
        return channel

    @asynccontextmanager
    async def running(self, *, storage_url: str | None = None) -> AsyncIterator[Daemon]:
        """A daemon on the store in ``tmp_path`` (or ``storage_url``) for the block."""
        config = load_config_text(self.yaml, source_name="controls.yaml", environ={})
        daemon = Daemon(
            config,
            storage_path=self.tmp_path / "relaybot.db",
            storage_url=storage_url,
            channel_factory=fast_channels,
        )
        self.daemon = daemon
        polls = len(self.peer.calls_to("getUpdates"))

        async def polling() -> bool:  # this daemon's channel polls (not an earlier one's)
            return len(self.peer.calls_to("getUpdates")) > polls and "tg" in daemon.channels

        async with daemon_running(daemon, polling):
            yield daemon

    async def ask(
        self, text: str, *, chat: int = USER, user: int = USER, within: float = 20.0
    ) -> str:
        """``user`` sends ``text`` in ``chat``; returns the text of the bot's last message
        there once the reply is finished."""
        before = self.channel.replies_finished
        self.peer.inject_message(chat, text, user_id=user, username=f"u{user}")
        with anyio.fail_after(within):
            await self.channel.wait_replies(before + 1)
        return self.peer.texts(chat)[-1]

    def requests(self) -> list[RecordedRequest]:
        return self.provider.requests_to(PATH)

    def last_request(self) -> dict[str, Any]:
        body = self.requests()[-1].json
        assert isinstance(body, dict)
        return body


@asynccontextmanager
async def controls_bot(tmp_path: Path, **config: str) -> AsyncIterator[ControlsBot]:
    """The peers, scripted to answer every request with ``ok`` (usage 11 in, 5 out)."""
    from tests.telegram_harness import reply, text_stream

    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(USER)
        peer.open_chat(GROUP)
        provider.script(PATH, [reply(text_stream(["ok"]))])
        yield ControlsBot(
            peer, provider, tmp_path, controls_config(peer, provider, tmp_path, **config)
        )
