"""End-to-end harness for Discord: the real daemon against the local Discord peer (REST v10 +
Gateway) and a local provider server, both on 127.0.0.1 (architecture §3, §8).

:func:`running_bot` starts a :class:`~tests.peers.discord.DiscordServer` and a
:class:`~tests.peers.provider_server.ProviderServer`, loads a YAML config pointing the ``dc``
channel at the peer (``api_base_url``, ``gateway_url``) and the ``main`` ``openai_chat``
provider at the provider server, and runs :meth:`Daemon.run <orchestrator.ops.daemon.Daemon.run>`
as ``relaybot run`` does. The channel is the real adapter (READY without discord.py's 2 s guild
wait) that also counts finished replies. Leaving the block stops the daemon and checks it
exited 0.

:func:`assert_spacing` holds architecture §3 "Spacing" from the peer's record of every request.
Times are real (real sockets): tests keep the intervals short.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio

from channels.base import InboundHandler
from channels.discord.adapter import DiscordChannel
from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from tests.channel_harness import (
    PATH,
    SPACING_TOLERANCE_SECS,
    CountsReplies,
    daemon_config,
    daemon_running,
    observing,
)
from tests.peers.discord import DiscordServer, Request
from tests.peers.provider_server import ProviderServer, Reply

__all__ = [
    "DELETE",
    "EDIT",
    "SEND",
    "DiscordBot",
    "ObservedDiscordChannel",
    "assert_spacing",
    "config_text",
    "running_bot",
]

SEND = "POST /channels/{channel_id}/messages"
EDIT = "PATCH /channels/{channel_id}/messages/{message_id}"
DELETE = "DELETE /channels/{channel_id}/messages/{message_id}"
WRITES = (SEND, EDIT, DELETE)


class ObservedDiscordChannel(CountsReplies, DiscordChannel):
    """The Discord adapter with a short guild wait, counting finished replies."""

    def __init__(self, name: str, config: Any, on_inbound: InboundHandler) -> None:
        super().__init__(name, config, on_inbound, guild_ready_timeout=0.05)


@dataclass
class DiscordBot:
    """A running daemon with its peers."""

    peer: DiscordServer
    provider: ProviderServer
    daemon: Daemon
    interval_ms: int

    @property
    def channel(self) -> ObservedDiscordChannel:
        channel = self.daemon.channels["dc"]
        assert isinstance(channel, ObservedDiscordChannel)
        return channel

    async def ask(
        self,
        text: str,
        *,
        channel_id: int | None = None,
        reply_to: int | None = None,
        within: float = 20.0,
    ) -> dict[str, Any]:
        """A user posts ``text`` (default: in the DM channel); returns the user's message once
        the daemon reports its reply fully delivered."""
        before = self.channel.replies_finished
        sent = self.peer.inject_message(
            channel_id or self.peer.dm_channel_id, text, reply_to=reply_to
        )
        with anyio.fail_after(within):
            await self.channel.wait_replies(before + 1)
        return sent

    def writes(self, channel_id: int) -> list[Request]:
        prefix = f"/channels/{channel_id}/"
        return [
            r for r in self.peer.requests if r.route in WRITES and (r.path + "/").startswith(prefix)
        ]


def config_text(
    peer: DiscordServer,
    provider: ProviderServer,
    tmp_path: Path,
    *,
    mode: str = "partial",
    interval_ms: int = 150,
    multi_message_delay_ms: int = 300,
    extra: str = "",
    agent_extra: str = "",
    top_level: str = "",
) -> str:
    """The YAML config of the ``dc`` channel on ``peer`` and the ``main`` provider
    (``top_level``: more top-level sections, e.g. ``speech``)."""
    channel = f"""\
  dc:
    kind: discord
    token: "{peer.token}"
    api_base_url: "{peer.api_base}"
    gateway_url: "{peer.gateway_url}"
    stream_mode: {mode}
    draft_update_interval_ms: {interval_ms}
    multi_message_delay_ms: {multi_message_delay_ms}
    allowed_users: ["*"]
{extra}"""
    return daemon_config(provider.url, tmp_path, channel, agent=agent_extra) + top_level


_observed = observing("discord", ObservedDiscordChannel)


@asynccontextmanager
async def running_bot(
    tmp_path: Path,
    replies: Sequence[Reply],
    *,
    mode: str = "partial",
    interval_ms: int = 150,
    multi_message_delay_ms: int = 300,
    extra: str = "",
    agent_extra: str = "",
    peer: DiscordServer | None = None,
    top_level: str = "",
) -> AsyncIterator[DiscordBot]:
    """The daemon serving the ``dc`` channel, its provider scripted with ``replies``; ``extra``
    is more YAML under the channel (indented four spaces), ``agent_extra`` under ``agent``
    (two spaces)."""
    async with peer or DiscordServer() as server, ProviderServer() as provider:
        provider.script(PATH, list(replies))
        text = config_text(
            server,
            provider,
            tmp_path,
            mode=mode,
            interval_ms=interval_ms,
            multi_message_delay_ms=multi_message_delay_ms,
            extra=extra,
            agent_extra=agent_extra,
            top_level=top_level,
        )
        config = load_config_text(text, source_name="e2e.yaml", environ={})
        daemon = Daemon(config, storage_path=tmp_path / "relaybot.db", channel_factory=_observed)

        async def connected() -> bool:
            return bool(server.sessions)

        async with daemon_running(daemon, connected):
            yield DiscordBot(server, provider, daemon, interval_ms)


def assert_spacing(writes: Sequence[Request], interval_ms: int) -> None:
    """Consecutive writes (send, edit, delete) to one channel start at least ``interval_ms``
    apart (within :data:`SPACING_TOLERANCE_SECS`), counting a 429'd request as started when it
    was answered (discord.py retries it then)."""
    interval = interval_ms / 1000 - SPACING_TOLERANCE_SECS
    landed = [w for w in writes if w.status != 429]
    for earlier, later in pairwise(landed):
        gap = later.at - earlier.at
        assert gap >= interval, f"{later.route} {gap * 1000:.0f} ms after {earlier.route}"
