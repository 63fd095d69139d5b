"""End-to-end harness for Slack: the real daemon against the local Slack peer (Web API +
Socket Mode, :mod:`tests.peers.slack`) and a local provider server, both on 127.0.0.1
(architecture §3, §8).

:func:`running_bot` loads a YAML config pointing the ``sl`` channel at the peer
(``api_base_url``) and runs the daemon as ``relaybot run`` does; the channel is the real
adapter (a short Socket Mode ping interval) that also counts finished replies. Leaving the
block stops the daemon and checks it exited 0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from channels.base import InboundHandler, InboundMessage
from channels.slack.adapter import SlackChannel
from channels.slack.kind import SlackChannelConfig
from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from tests.channel_harness import PATH, CountsReplies, daemon_config, daemon_running, observing
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.slack import SlackServer, StoredMessage

__all__ = ["BACKUP_PATH", "SIGNING_SECRET", "ObservedSlackChannel", "SlackBot", "running_bot"]

SIGNING_SECRET = "peer-signing-secret"
BACKUP_PATH = "/b/chat/completions"
"""Where the ``backup`` provider of :func:`running_bot` posts on the provider server."""


class ObservedSlackChannel(CountsReplies, SlackChannel):
    """The Slack adapter, counting finished replies."""

    def __init__(self, name: str, config: Any, on_inbound: InboundHandler) -> None:
        super().__init__(name, config, on_inbound, ping_interval_secs=1.0)


@dataclass
class SlackBot:
    """A running daemon with its peers."""

    peer: SlackServer
    provider: ProviderServer
    daemon: Daemon

    @property
    def channel(self) -> ObservedSlackChannel:
        channel = self.daemon.channels["sl"]
        assert isinstance(channel, ObservedSlackChannel)
        return channel

    async def ask(self, text: str, *, channel: str | None = None, within: float = 20.0) -> str:
        """A user writes ``text`` (default: in the DM); returns its ts once the daemon
        reports its reply fully delivered."""
        before = self.channel.replies_finished
        ts = await self.peer.inject_message(text, channel=channel)
        with anyio.fail_after(within):
            await self.channel.wait_replies(before + 1)
        return ts

    def answers(self, channel: str) -> list[StoredMessage]:
        """The bot's messages in ``channel`` that are not controls (no buttons)."""
        return [m for m in self.peer.bot_messages(channel) if not m.blocks]


_observed = observing("slack", ObservedSlackChannel)


@asynccontextmanager
async def running_bot(
    tmp_path: Path,
    replies: Sequence[Reply],
    *,
    mode: str = "partial",
    native: str = "auto",
    interval_ms: int = 100,
    extra: str = "",
    agent_extra: str = "",
    policy: str = "",
    events_listen: str | None = None,
    backup: Sequence[Reply] = (),
) -> AsyncIterator[SlackBot]:
    """The daemon serving the ``sl`` channel, its provider scripted with ``replies``;
    ``extra`` is more YAML under the channel (indented four spaces), ``agent_extra`` under
    ``agent`` (two spaces). With ``events_listen`` the channel takes the Events API over HTTP
    there (signing secret :data:`SIGNING_SECRET`) instead of Socket Mode. With ``backup``
    replies a second provider ``backup`` (at :data:`BACKUP_PATH`) is the fallback of ``main``."""
    async with SlackServer() as peer, ProviderServer() as provider:
        provider.script(PATH, list(replies))
        fallback = ""
        if backup:
            provider.script(BACKUP_PATH, list(backup))
            fallback = (f'  backup:\n    kind: openai_chat\n    base_url: "{provider.url}/b"\n'
                        "    api_key: local-test-key\n    model: m\n")  # fmt: skip
        transport = f'    app_token: "{peer.app_token}"\n'
        if events_listen is not None:
            transport = (
                f'    signing_secret: "{SIGNING_SECRET}"\n    events_listen: "{events_listen}"\n'
            )
        channel = f"""\
  sl:
    kind: slack
    bot_token: "{peer.token}"
{transport}    api_base_url: "{peer.api_base}"
    stream_mode: {mode}
    native_streaming: {native}
    draft_update_interval_ms: {interval_ms}
    multi_message_delay_ms: {interval_ms}
    allowed_users: ["*"]
{extra}"""
        text = daemon_config(
            provider.url, tmp_path, channel, agent=agent_extra, policy=policy, provider=fallback,
            providers="[main, backup]" if backup else "[main]",
        )  # fmt: skip
        config = load_config_text(text, source_name="e2e.yaml", environ={})
        daemon = Daemon(config, storage_path=tmp_path / "relaybot.db", channel_factory=_observed)

        async def connected() -> bool:
            if events_listen is not None:
                channel = daemon.channels.get("sl")
                return isinstance(channel, ObservedSlackChannel) and channel.started.is_set()
            return peer.connections > 0

        async with daemon_running(daemon, connected):
            yield SlackBot(peer, provider, daemon)


@asynccontextmanager
async def started_channel(
    peer: SlackServer,
) -> AsyncIterator[tuple[SlackChannel, list[InboundMessage]]]:
    """The Slack adapter alone, started on ``peer`` (Socket Mode), and the list its inbound
    messages are appended to."""
    config = SlackChannelConfig.model_validate(
        {
            "kind": "slack",
            "bot_token": peer.token,
            "app_token": peer.app_token,
            "api_base_url": peer.api_base,
            "allowed_users": ["*"],
        }
    )
    inbox: list[InboundMessage] = []

    async def on_inbound(message: InboundMessage) -> None:
        inbox.append(message)

    async with SlackChannel("sl", config, on_inbound) as channel:
        yield channel, inbox
