"""End-to-end harness for Matrix: the real daemon against a real Synapse homeserver and a local
provider server, both on 127.0.0.1 (architecture §3, §8).

:func:`matrix_world` registers a bot and a human on the given homeserver; the human (a second
matrix-nio client) creates a room and invites the bot. :func:`running_bot` runs
:meth:`Daemon.run <orchestrator.ops.daemon.Daemon.run>` with the ``mx`` channel pointed at the
homeserver and the ``main`` ``openai_chat`` provider at the provider server; the bot joins the
invite itself (auto-join of an allowed user's invite). :meth:`World.ask` sends a message as the
human and returns once the daemon reports its reply delivered; :meth:`World.timeline` is every
event the human's client has seen in the room, oldest first.

Real sockets, real time: intervals are scaled down.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import nio

from channels.base import InboundHandler
from channels.matrix.adapter import MatrixChannel
from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from tests.channel_harness import PATH, CountsReplies, daemon_config, daemon_running, observing
from tests.peers.matrix_client import nio_client, sync_timeline
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.synapse import MatrixUser, SynapseHomeserver

__all__ = ["PATH", "ObservedMatrixChannel", "World", "matrix_world", "running_bot"]


class ObservedMatrixChannel(CountsReplies, MatrixChannel):
    """The Matrix adapter with a short sync long-poll, counting finished replies."""

    def __init__(self, name: str, config: Any, on_inbound: InboundHandler) -> None:
        super().__init__(name, config, on_inbound, sync_timeout_ms=1000, request_timeout_secs=10)


_channels = observing("matrix", ObservedMatrixChannel)


@dataclass
class World:
    """A homeserver, a bot account, a human client in a room with the bot invited."""

    server: SynapseHomeserver
    provider: ProviderServer
    bot_user: MatrixUser
    human_user: MatrixUser
    human: nio.AsyncClient
    room_id: str
    tmp_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    daemon: Daemon | None = None
    password_login: bool = False

    @property
    def credentials(self) -> str:
        """The channel's login keys (YAML lines): the access token and device, or the
        password."""
        if self.password_login:
            return f'    password: "{self.bot_user.password}"\n'
        return (
            f'    access_token: "{self.bot_user.access_token}"\n'
            f'    device_id: "{self.bot_user.device_id}"\n'
        )

    @property
    def channel(self) -> ObservedMatrixChannel:
        assert self.daemon is not None
        channel = self.daemon.channels["mx"]
        assert isinstance(channel, ObservedMatrixChannel)
        return channel

    async def send(self, content: dict[str, Any]) -> str:
        response = await self.human.room_send(self.room_id, "m.room.message", content)
        assert isinstance(response, nio.RoomSendResponse), response
        event_id: str = response.event_id
        return event_id

    async def ask(self, text: str, *, within: float = 30.0, **extra: Any) -> str:
        """The human sends ``text`` (content ``extra`` merged in); returns its event id once
        the daemon reports the reply fully delivered."""
        before = self.channel.replies_finished
        event_id = await self.send({"msgtype": "m.text", "body": text, **extra})
        with anyio.fail_after(within):
            await self.channel.wait_replies(before + 1)
        return event_id

    async def add_member(self) -> MatrixUser:
        """A third user joins the room (it then has more than two members)."""
        third = self.server.register()
        invited = await self.human.room_invite(self.room_id, third.user_id)
        assert isinstance(invited, nio.RoomInviteResponse), invited
        client = nio_client(self.server, third)
        try:
            joined = await client.join(self.room_id)
            assert isinstance(joined, nio.JoinResponse), joined
        finally:
            await client.close()
        return third

    async def timeline(self) -> list[dict[str, Any]]:
        """Every event of the room the human's client has seen, oldest first."""
        self.events.extend(await sync_timeline(self.human, self.room_id))
        return self.events

    async def bot_events(self) -> list[dict[str, Any]]:
        """The bot's ``m.room.message`` events, oldest first."""
        return [
            e
            for e in await self.timeline()
            if e["sender"] == self.bot_user.user_id and e["type"] == "m.room.message"
        ]

    def config_text(
        self,
        mode: str,
        interval_ms: int,
        delay_ms: int,
        extra: str = "",
        agent: str = "",
        listen: str | None = None,
        top_level: str = "",
    ) -> str:
        channel = f"""\
  mx:
    kind: matrix
    homeserver: "{self.server.base_url}"
    user_id: "{self.bot_user.user_id}"
{self.credentials}    stream_mode: {mode}
    draft_update_interval_ms: {interval_ms}
    multi_message_delay_ms: {delay_ms}
    allowed_users: ["{self.human_user.user_id}"]
{extra}"""
        config = daemon_config(
            self.provider.url, self.tmp_path, channel, agent=agent, listen=listen
        )
        return config + top_level


@asynccontextmanager
async def matrix_world(
    server: SynapseHomeserver, tmp_path: Path, replies: Sequence[Reply]
) -> AsyncIterator[World]:
    """Accounts, a room (the bot invited) and a provider scripted with ``replies``."""
    bot_user, human_user = server.register(), server.register()
    human = nio_client(server, human_user)
    try:
        async with ProviderServer() as provider:
            provider.script(PATH, list(replies))
            created = await human.room_create(name="relaybot e2e", invite=[bot_user.user_id])
            assert isinstance(created, nio.RoomCreateResponse), created
            world = World(server, provider, bot_user, human_user, human, created.room_id, tmp_path)
            await world.timeline()
            yield world
    finally:
        await human.close()


@asynccontextmanager
async def running_bot(
    world: World,
    *,
    mode: str = "partial",
    interval_ms: int = 200,
    delay_ms: int = 200,
    extra: str = "",
    agent: str = "",
    wait_joined: bool = True,
    listen: str | None = None,
    top_level: str = "",
) -> AsyncIterator[Daemon]:
    """The daemon serving ``mx`` (``extra``: more channel keys, ``agent``: more agent keys,
    ``top_level``: more top-level sections, YAML lines; ``listen``: ``host:port`` of
    ``/healthz``); returns once the bot has joined the room."""
    text = world.config_text(mode, interval_ms, delay_ms, extra, agent, listen, top_level)
    config = load_config_text(text, source_name="e2e.yaml", environ={})
    daemon = Daemon(config, storage_path=world.tmp_path / "relaybot.db", channel_factory=_channels)
    world.daemon = daemon

    async def joined() -> bool:
        channel = daemon.channels.get("mx")
        if not (isinstance(channel, ObservedMatrixChannel) and channel.started.is_set()):
            return False
        if not wait_joined:
            return True
        members = await world.human.joined_members(world.room_id)
        return isinstance(members, nio.JoinedMembersResponse) and any(
            m.user_id == world.bot_user.user_id for m in members.members
        )

    async with daemon_running(daemon, joined, within_secs=30, poll_secs=0.1):
        yield daemon
