"""A harness for chats with images, redelivered updates and health: the real daemon over a
config the test writes, against the local Bot API peer and a Chat Completions server (both on
127.0.0.1, real time).

:func:`daemon_running` runs :meth:`Daemon.run <orchestrator.ops.daemon.Daemon.run>` over a config
built by :func:`config_text` (``channel``/``agent``/``provider_extra`` add YAML lines to those
sections; ``listen`` is ``server.listen``) until the block ends, then checks it exited 0. It
does not start or stop the peers: a test may run two daemons in turn on one store and one peer
(a restart).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from tests.channel_harness import PATH, daemon_config
from tests.channel_harness import daemon_running as _running
from tests.peers.provider_server import ProviderServer
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_harness import ObservedTelegramChannel, fast_channels

__all__ = ["PATH", "config_text", "daemon_running", "free_port", "observed"]


def free_port() -> int:
    """A port free on 127.0.0.1 now (for a webhook or the health server)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def config_text(
    peer: TelegramBotApiServer,
    provider: ProviderServer,
    tmp_path: Path,
    *,
    channel: str = "",
    agent: str = "",
    provider_extra: str = "",
    listen: str | None = None,
) -> str:
    def indent(lines: str, by: int) -> str:
        return "".join(" " * by + line + "\n" for line in lines.splitlines() if line.strip())

    channels = f"""\
  tg:
    kind: telegram
    token: "{peer.token}"
    base_url: "{peer.base_url}"
    stream_mode: "off"
    draft_update_interval_ms: 100
    allowed_users: ["*"]
{indent(channel, 4)}"""
    return daemon_config(
        provider.url,
        tmp_path,
        channels,
        provider=indent(provider_extra, 4),
        agent=indent(agent, 2),
        tools="[]",
        listen=listen,
    )


def observed(daemon: Daemon) -> ObservedTelegramChannel:
    channel = daemon.channels["tg"]
    assert isinstance(channel, ObservedTelegramChannel)
    return channel


@asynccontextmanager
async def daemon_running(text: str, tmp_path: Path) -> AsyncIterator[Daemon]:
    """The daemon over config ``text`` (see the module docstring); yields once it serves."""
    config = load_config_text(text, source_name="chats.yaml", environ={})
    daemon = Daemon(config, storage_path=tmp_path / "relaybot.db", channel_factory=fast_channels)

    async def serves() -> bool:
        return (
            daemon._dispatcher is not None
            and "tg" in daemon.channels
            and observed(daemon)._app is not None
        )

    async with _running(daemon, serves):
        yield daemon
