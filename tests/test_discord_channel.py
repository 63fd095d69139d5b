"""The Discord adapter on its own against the local peer (architecture §3 "Contract", "Access",
"Discord specifics"): start and its failures, what becomes an :class:`InboundMessage`, the
primitives and their errors, approvals with buttons."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest

from channels.base import InboundMessage, MessageRef
from channels.discord.adapter import EMPTY_CONTENT_HELP, INTENT_HELP, DiscordChannel
from channels.discord.kind import DiscordChannelConfig
from channels.errors import (
    ChannelRateLimited,
    ChannelStartError,
    ChannelUnavailable,
    MessageGone,
    MessageTooLong,
)
from tests.peers.discord import BOT_ID, ApiError, DiscordServer

SEND = "POST /channels/{channel_id}/messages"


class Inbox:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[InboundMessage] = asyncio.Queue()

    async def __call__(self, message: InboundMessage) -> None:
        await self.queue.put(message)

    async def next(self, within: float = 5.0) -> InboundMessage:
        return await asyncio.wait_for(self.queue.get(), within)

    async def nothing(self, within: float = 0.3) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(self.queue.get(), within)


def _channel(server: DiscordServer, inbox: Inbox, **options: Any) -> DiscordChannel:
    config = DiscordChannelConfig(
        kind="discord",
        token=server.token,
        api_base_url=server.api_base,
        gateway_url=server.gateway_url,
        allowed_users=options.pop("allowed_users", ["*"]),
        **options,
    )
    return DiscordChannel("dc", config, inbox, guild_ready_timeout=0.05, start_timeout_secs=5)


@pytest.fixture
async def peer() -> AsyncIterator[DiscordServer]:
    async with DiscordServer() as server:
        yield server


@pytest.fixture
def inbox() -> Inbox:
    return Inbox()


@pytest.fixture
async def channel(peer: DiscordServer, inbox: Inbox) -> AsyncIterator[DiscordChannel]:
    async with _channel(peer, inbox) as running:
        yield running


# -- start ------------------------------------------------------------------------------------


async def test_start_identifies_with_the_message_content_intent_and_restores_the_urls(
    peer: DiscordServer, inbox: Inbox
) -> None:
    base = discord.http.Route.BASE
    async with _channel(peer, inbox) as channel:
        assert channel.running and discord.http.Route.BASE == peer.api_base
        identify = next(f.d for f in peer.frames if f.op == 2)
        assert identify["token"] == peer.token
        assert identify["intents"] & (1 << 15)  # MESSAGE_CONTENT
    assert discord.http.Route.BASE == base and not channel.running


async def test_an_instance_identifies_with_its_shard(peer: DiscordServer, inbox: Inbox) -> None:
    async with _channel(peer, inbox, shard_id=1, shard_count=3) as channel:
        assert channel.running
        identify = next(f.d for f in peer.frames if f.op == 2)
        assert identify["shard"] == [1, 3]


def test_shard_id_and_count_go_together_and_the_id_is_below_the_count() -> None:
    with pytest.raises(ValueError, match="shard_id and shard_count go together"):
        DiscordChannelConfig(kind="discord", token="t", shard_id=1)
    with pytest.raises(ValueError, match="expected less than shard_count"):
        DiscordChannelConfig(kind="discord", token="t", shard_id=3, shard_count=3)


async def test_a_refused_intent_is_one_line_saying_what_to_enable(inbox: Inbox) -> None:
    async with DiscordServer(granted_intents=0) as server:
        with pytest.raises(ChannelStartError) as raised:
            await _channel(server, inbox).start()
    assert str(raised.value) == INTENT_HELP and "\n" not in INTENT_HELP
    assert "Message Content Intent" in INTENT_HELP and "4014" in INTENT_HELP
    assert server.connections[0].close_code == 4014


async def test_without_the_intent_empty_guild_messages_log_one_line(
    peer: DiscordServer, inbox: Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "channels.discord")
    options = {"message_content_intent": False, "respond_in_groups": "all"}
    async with _channel(peer, inbox, **options):
        peer.inject_message(peer.channel_id, "you cannot read this")
        peer.inject_message(peer.channel_id, "nor this")
        peer.inject_message(peer.channel_id, f"<@{BOT_ID}> but this")
        assert (await inbox.next()).text == "but this"
    lines = [r.getMessage() for r in caplog.records if EMPTY_CONTENT_HELP in r.getMessage()]
    assert lines == [f"dc: {EMPTY_CONTENT_HELP}"]


async def test_a_rejected_token_is_a_start_error_without_the_token(inbox: Inbox) -> None:
    async with DiscordServer() as server:
        config = DiscordChannelConfig(
            kind="discord",
            token="MTIz.wrong.token",
            api_base_url=server.api_base,
            gateway_url=server.gateway_url,
        )
        with pytest.raises(ChannelStartError) as raised:
            await DiscordChannel("dc", config, inbox).start()
    assert "invalid token" in str(raised.value) and "wrong" not in str(raised.value)


# -- inbound ----------------------------------------------------------------------------------


async def test_dms_mentions_replies_and_threads_become_inbound_messages(
    peer: DiscordServer, inbox: Inbox, channel: DiscordChannel
) -> None:
    peer.inject_message(peer.dm_channel_id, "private")
    dm = await inbox.next()
    assert (dm.chat_id, dm.is_direct, dm.thread_id) == (str(peer.dm_channel_id), True, None)
    assert dm.sender_id == str(peer.user_id) and dm.text == "private"

    peer.inject_message(peer.channel_id, "not addressed")
    guild = await inbox.next()
    assert not guild.is_direct and not guild.mentions_bot  # the orchestrator drops it

    sent = peer.inject_message(peer.channel_id, f"<@{BOT_ID}> /stop")
    mention = await inbox.next()
    assert mention.mentions_bot and mention.text == "/stop" and mention.message_id == sent["id"]

    ours = await channel.send_message(str(peer.channel_id), "an answer")
    peer.inject_message(peer.channel_id, "about that", reply_to=int(ours.message_id))
    assert (await inbox.next()).mentions_bot

    peer.inject_message(peer.channel_id, "@everyone look")
    assert not (await inbox.next()).mentions_bot  # @everyone is no mention of the bot

    thread = peer.add_thread(peer.channel_id)
    peer.inject_message(thread, f"<@{BOT_ID}> in a thread")
    in_thread = await inbox.next()
    assert (in_thread.chat_id, in_thread.thread_id) == (str(peer.channel_id), str(thread))
    await inbox.nothing()  # our own message above never came in


async def test_other_bots_and_display_names_like_ids_do_not_pass(
    peer: DiscordServer, inbox: Inbox, channel: DiscordChannel
) -> None:
    other_bot = peer.add_user("Helper")
    peer.world.users[other_bot]["bot"] = True
    peer.inject_message(peer.channel_id, f"<@{BOT_ID}> loop?", author_id=other_bot)
    await inbox.nothing()
    mallory = peer.add_user("Mallory")
    peer.world.users[mallory]["global_name"] = f"@{peer.user_id}"
    peer.inject_message(peer.open_dm(mallory), "let me in", author_id=mallory)
    message = await inbox.next()
    assert message.sender_id == str(mallory) and not message.sender_name.startswith("@")


async def test_allowed_guilds_and_channels_filter_before_the_orchestrator(
    peer: DiscordServer, inbox: Inbox
) -> None:
    other = peer.add_channel("random")
    thread = peer.add_thread(peer.channel_id)
    async with _channel(peer, inbox, allowed_channels=[peer.channel_id]):
        peer.inject_message(other, f"<@{BOT_ID}> elsewhere")
        peer.inject_message(thread, f"<@{BOT_ID}> in a thread of an allowed channel")
        assert (await inbox.next()).thread_id == str(thread)
        peer.inject_message(peer.dm_channel_id, "DMs are not filtered by channel")
        assert (await inbox.next()).is_direct
        await inbox.nothing()
    async with _channel(peer, inbox, allowed_guilds=[1]):
        peer.inject_message(peer.channel_id, f"<@{BOT_ID}> not this guild")
        await inbox.nothing()


# -- primitives -------------------------------------------------------------------------------


async def test_writes_map_discord_errors(peer: DiscordServer, channel: DiscordChannel) -> None:
    ref = await channel.send_message(str(peer.channel_id), "first")
    await channel.edit_message(ref, "first, edited")
    await channel.send_typing(str(peer.channel_id))
    assert peer.requests_to("POST /channels/{channel_id}/typing")
    await channel.delete_message(ref)
    with pytest.raises(MessageGone):
        await channel.edit_message(ref, "it is gone")
    with pytest.raises(MessageTooLong):
        await channel.send_message(str(peer.channel_id), "x" * 2001)
    assert len(peer.requests_to(SEND)) == 1  # refused before any request
    peer.fail(SEND, error=ApiError(503, 0, "503: Service Unavailable"))
    with pytest.raises(ChannelUnavailable):
        await channel.send_message(str(peer.channel_id), "refused")
    peer.fail(SEND, error=ApiError.too_long())
    with pytest.raises(MessageTooLong):
        await channel.send_message(str(peer.channel_id), "the platform counted more")
    assert peer.texts(peer.channel_id) == []


async def test_a_reply_references_the_users_message_even_when_it_is_gone(
    peer: DiscordServer, channel: DiscordChannel
) -> None:
    sent = await channel.send_message(str(peer.dm_channel_id), "no such message", reply_to="42")
    assert peer.texts(peer.dm_channel_id) == ["no such message"]
    reference = peer.requests_to(SEND)[-1].json["message_reference"]
    assert reference["message_id"] == 42 and reference["fail_if_not_exists"] is False
    assert sent == MessageRef(str(peer.dm_channel_id), str(peer.messages(peer.dm_channel_id)[0].id))


# -- approvals --------------------------------------------------------------------------------


async def _prompt(peer: DiscordServer) -> tuple[int, list[str]]:
    await peer.wait_for(lambda: bool(peer.messages(peer.channel_id)))
    message = peer.messages(peer.channel_id)[0]
    buttons = message.payload["components"][0]["components"]
    return message.id, [b["custom_id"] for b in buttons]


async def test_an_approval_is_answered_by_an_allowed_users_button(
    peer: DiscordServer, inbox: Inbox
) -> None:
    async with _channel(peer, inbox, allowed_users=[peer.user_id]) as channel:
        asking = asyncio.create_task(channel.request_approval(str(peer.channel_id), "Run it?"))
        message_id, (approve, deny) = await _prompt(peer)
        stranger = peer.add_user("Stranger")
        peer.inject_button_click(message_id, approve, user_id=stranger)
        await peer.wait_for(lambda: len(peer.interaction_responses) == 1)
        assert not asking.done()
        peer.inject_button_click(message_id, deny)
        assert await asyncio.wait_for(asking, 5) is False
    assert peer.texts(peer.channel_id) == ["Run it?\n\n❌ Denied"]
    assert peer.messages(peer.channel_id)[0].payload["components"] == []
    assert [r["type"] for r in peer.interaction_responses] == [4, 7]  # ephemeral, then update


async def test_an_unanswered_approval_times_out_as_none(
    peer: DiscordServer, channel: DiscordChannel
) -> None:
    channel.approval_timeout_secs = 0.3
    assert await channel.request_approval(str(peer.channel_id), "Run it?") is None
    assert peer.texts(peer.channel_id) == ["Run it?\n\n⌛ No answer: not approved"]
    assert peer.messages(peer.channel_id)[0].payload["components"] == []


async def test_a_429_discord_py_will_not_wait_out_reaches_the_engine(
    peer: DiscordServer, channel: DiscordChannel
) -> None:
    """Over 30 s (``max_ratelimit_timeout``), or without ``Via`` (a ban to discord.py): raised
    at once as ``ChannelRateLimited`` with the platform's wait, for the engine to honour."""
    peer.rate_limit(SEND, retry_after=45.0)
    with pytest.raises(ChannelRateLimited) as long_wait:
        await channel.send_message(str(peer.channel_id), "later")
    assert long_wait.value.retry_after == 45.0
    peer.rate_limit(SEND, retry_after=3.0, via=False)
    with pytest.raises(ChannelRateLimited) as banned:
        await channel.send_message(str(peer.channel_id), "later")
    assert banned.value.retry_after == 3.0
    assert [r.status for r in peer.requests_to(SEND)] == [429, 429]


async def test_health_follows_the_gateway_and_a_later_4014_logs_the_intent_line(
    inbox: Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    # Heartbeats every 50 ms: the peer changes often, so wait_for re-checks the adapter's state.
    async with DiscordServer(heartbeat_interval_ms=50) as peer, _channel(peer, inbox) as channel:
        assert channel.health().state == "ok"
        await peer.disconnect()  # 4000: discord.py RESUMEs
        await peer.wait_for(lambda: any(f.op == 6 for f in peer.frames))
        await peer.wait_for(lambda: channel.health().state == "ok")
        caplog.set_level(logging.ERROR, "channels.discord")
        await peer.disconnect(4014)  # the intent was turned off in the portal meanwhile
        await peer.wait_for(lambda: channel.health().state == "degraded")
        assert channel.health().reason == INTENT_HELP
    ours = [r.getMessage() for r in caplog.records if r.name == "channels.discord"]
    assert ours == [f"dc: {INTENT_HELP}"]


async def test_a_500_is_retried_inside_discord_py_and_the_write_lands(
    peer: DiscordServer, channel: DiscordChannel
) -> None:
    """discord.py retries a 500 itself (after 1 s): the write stays in flight and lands, and the
    engine sees one successful write (it never retries on top)."""
    peer.fail(SEND, error=ApiError.server_error(500))
    ref = await channel.send_message(str(peer.channel_id), "after one 500")
    refused, landed = peer.requests_to(SEND)
    assert (refused.status, landed.status) == (500, 200)
    assert refused.answered_at is not None and landed.at - refused.answered_at >= 1.0
    assert peer.texts(peer.channel_id) == ["after one 500"]
    assert ref.message_id == str(peer.messages(peer.channel_id)[0].id)
