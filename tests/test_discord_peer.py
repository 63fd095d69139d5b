"""The local Discord peer against unmodified discord.py 2.x: login, messages, 429s, RESUME, buttons.

discord.py is pointed at the peer only through its two class attributes (``Route.BASE`` and
``DiscordWebSocket.DEFAULT_GATEWAY``), as the adapter will do; everything else is the
library's own behaviour over the real wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands

from tests.peers.discord import BOT_ID, DEFAULT_TOKEN, DiscordServer
from tests.peers.discord_gateway import MESSAGE_CONTENT

SEND = "POST /channels/{channel_id}/messages"
EDIT = "PATCH /channels/{channel_id}/messages/{message_id}"


class Bot(discord.Client):
    """A plain client that queues every message not its own and marks READY / RESUMED."""

    def __init__(self, *, message_content: bool = True) -> None:
        intents = discord.Intents.default()
        intents.message_content = message_content
        # guild_ready_timeout: READY waits this long after the last GUILD_CREATE (default 2 s)
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self.inbox: asyncio.Queue[discord.Message] = asyncio.Queue()
        self.is_up = asyncio.Event()
        self.resumed = asyncio.Event()

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """No pause: discord.py's own hook sleeps 5 s before every IDENTIFY but the first
        (Discord's identify rate limit), which only slows the re-IDENTIFY test down."""

    async def on_ready(self) -> None:
        self.is_up.set()

    async def on_resumed(self) -> None:
        self.resumed.set()

    async def on_message(self, message: discord.Message) -> None:
        if message.author.id != BOT_ID:
            await self.inbox.put(message)

    async def next_message(self) -> discord.Message:
        return await asyncio.wait_for(self.inbox.get(), 5)


def _point(monkeypatch: pytest.MonkeyPatch, server: DiscordServer) -> None:
    """What the adapter's ``api_base_url`` / ``gateway_url`` options will do, process-wide."""
    monkeypatch.setattr(discord.http.Route, "BASE", server.api_base)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(server.gateway_url)
    )


@pytest.fixture
async def peer(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DiscordServer]:
    async with DiscordServer() as server:
        _point(monkeypatch, server)
        yield server


async def _run(bot: Bot) -> AsyncIterator[Bot]:
    task = asyncio.create_task(bot.start(DEFAULT_TOKEN))
    try:
        await asyncio.wait_for(bot.is_up.wait(), 5)
        yield bot
    finally:
        await bot.close()
        await asyncio.wait_for(task, 5)


@pytest.fixture
async def bot(peer: DiscordServer) -> AsyncIterator[Bot]:
    async for running in _run(Bot()):
        yield running


async def test_login_reply_edit_delete_and_typing(peer: DiscordServer, bot: Bot) -> None:
    assert bot.user is not None and bot.user.id == BOT_ID
    assert peer.connections[0].query == {"v": "10", "encoding": "json", "compress": "zlib-stream"}
    identify = next(f.d for f in peer.frames if f.op == 2)
    assert identify["intents"] & MESSAGE_CONTENT
    assert bot.get_channel(peer.channel_id) is not None

    sent = peer.inject_message(peer.channel_id, f"<@{BOT_ID}> hello")
    incoming = await bot.next_message()
    assert incoming.id == int(sent["id"]) and incoming.content == f"<@{BOT_ID}> hello"
    assert bot.user.mentioned_in(incoming)

    reply = await incoming.reply("Hi <@everyone>", allowed_mentions=discord.AllowedMentions.none())
    wire = peer.requests_to(SEND, peer.channel_id)[-1]
    assert wire.allowed_mentions == {"parse": []}  # replied_user is left out: false
    assert wire.json["message_reference"]["message_id"] == incoming.id
    stored = peer.message(reply.id)
    assert stored.reference_id == incoming.id and stored.pinged_users == frozenset()

    edited = await reply.edit(content="Hi again")
    assert edited.content == "Hi again" and peer.message(reply.id).edits == 1
    async with incoming.channel.typing():
        pass
    await reply.delete()
    assert peer.states(peer.channel_id) == [("Hi <@everyone>",), ("Hi again",), ()]
    assert [r.route for r in peer.requests[-3:]] == [
        EDIT,
        "POST /channels/{channel_id}/typing",
        "DELETE /channels/{channel_id}/messages/{message_id}",
    ]


async def test_dm_and_thread_messages(peer: DiscordServer, bot: Bot) -> None:
    peer.inject_message(peer.dm_channel_id, "in private")
    dm = await bot.next_message()
    assert isinstance(dm.channel, discord.DMChannel) and dm.guild is None
    await dm.channel.send("private answer")
    assert peer.texts(peer.dm_channel_id) == ["private answer"]

    thread_id = peer.add_thread(peer.channel_id, "topic")
    peer.inject_message(thread_id, "in the thread")
    in_thread = await bot.next_message()
    assert isinstance(in_thread.channel, discord.Thread)
    assert in_thread.channel.parent_id == peer.channel_id
    await in_thread.reply("thread answer")
    assert peer.texts(thread_id) == ["thread answer"] and peer.texts(peer.channel_id) == []


async def test_a_429_is_waited_out_by_discord_py(peer: DiscordServer, bot: Bot) -> None:
    channel = bot.get_channel(peer.channel_id)
    assert isinstance(channel, discord.TextChannel)
    peer.rate_limit(SEND, retry_after=1.2)
    message = await channel.send("after the wait")
    refused, landed = peer.requests_to(SEND)
    assert refused.status == 429 and landed.status == 200
    assert refused.answered_at is not None and landed.at - refused.answered_at >= 1.2
    assert peer.texts(peer.channel_id) == ["after the wait"] and message.content == "after the wait"


async def test_a_429_without_via_is_raised_at_once(peer: DiscordServer, bot: Bot) -> None:
    channel = bot.get_channel(peer.channel_id)
    assert isinstance(channel, discord.TextChannel)
    peer.rate_limit(SEND, retry_after=30, via=False)
    with pytest.raises(discord.HTTPException) as raised:
        await channel.send("banned")
    assert raised.value.status == 429 and len(peer.requests_to(SEND)) == 1


async def test_buckets_make_discord_py_wait_instead_of_429(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with DiscordServer(bucket_limit=2, bucket_window=0.5) as server:
        _point(monkeypatch, server)
        async for bot in _run(Bot()):
            channel = bot.get_channel(server.channel_id)
            assert isinstance(channel, discord.TextChannel)
            for n in range(3):
                await channel.send(f"part {n}")
    sends = server.requests_to(SEND)
    assert [r.status for r in sends] == [200, 200, 200]  # it read Remaining: 0 and waited
    assert sends[2].at >= sends[0].at + 0.5  # the peer would have refused it earlier
    assert server.texts(server.channel_id) == ["part 0", "part 1", "part 2"]


async def test_the_peer_refuses_past_the_bucket_itself() -> None:
    async with DiscordServer(bucket_limit=1, bucket_window=2.0) as server:
        url = f"{server.api_base}/channels/{server.channel_id}/messages"
        headers = {"Authorization": f"Bot {server.token}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.post(url, json={"content": "one"}) as first:
                assert first.headers["X-RateLimit-Remaining"] == "0"
                assert 0 < float(first.headers["X-RateLimit-Reset-After"]) <= 2.0
            async with http.post(url, json={"content": "two"}) as second:
                body = await second.json()
                assert second.status == 429 and second.headers["Via"]
                assert 0 < body["retry_after"] <= 2.0 and body["global"] is False
        assert server.texts(server.channel_id) == ["one"]


async def test_content_over_2000_characters_is_50035(peer: DiscordServer, bot: Bot) -> None:
    channel = bot.get_channel(peer.channel_id)
    assert isinstance(channel, discord.TextChannel)
    with pytest.raises(discord.HTTPException) as raised:
        await channel.send("x" * 2001)
    assert raised.value.status == 400 and raised.value.code == 50035
    assert "Must be 2000 or fewer in length" in raised.value.text
    await channel.send("x" * 2000)
    assert peer.texts(peer.channel_id) == ["x" * 2000]
    with pytest.raises(discord.NotFound) as gone:
        await channel.get_partial_message(12345).edit(content="nothing there")
    assert gone.value.code == 10008


async def test_a_dropped_gateway_resumes_and_replays(peer: DiscordServer, bot: Bot) -> None:
    session = next(iter(peer.sessions.values()))
    await peer.disconnect()
    peer.inject_message(peer.dm_channel_id, "sent while the gateway was down")
    missed = await bot.next_message()
    assert missed.content == "sent while the gateway was down"
    await asyncio.wait_for(bot.resumed.wait(), 5)
    resume = next(f for f in peer.frames if f.op == 6)
    assert resume.d["session_id"] == session.session_id and resume.connection == 2
    assert [f.op for f in peer.frames].count(2) == 1  # no second IDENTIFY
    peer.inject_message(peer.dm_channel_id, "after the resume")
    assert (await bot.next_message()).content == "after the resume"


async def test_op_7_reconnect_resumes(peer: DiscordServer, bot: Bot) -> None:
    peer.request_reconnect()
    await asyncio.wait_for(bot.resumed.wait(), 5)
    assert [f.op for f in peer.frames].count(6) == 1 and len(peer.connections) == 2


async def test_an_ended_session_is_identified_anew(peer: DiscordServer, bot: Bot) -> None:
    bot.is_up.clear()
    peer.invalidate_sessions()
    await peer.disconnect()
    await asyncio.wait_for(bot.is_up.wait(), 5)  # op 9, then IDENTIFY and a second READY
    assert [f.op for f in peer.frames if f.op in (2, 6)] == [2, 6, 2]
    assert len(peer.sessions) == 2
    peer.inject_message(peer.dm_channel_id, "in the new session")
    assert (await bot.next_message()).content == "in the new session"


async def test_a_button_click_reaches_the_view_callback(peer: DiscordServer, bot: Bot) -> None:
    clicked: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Approve(discord.ui.View):
        @discord.ui.button(label="Approve", custom_id="approve")
        async def approve(self, interaction: discord.Interaction, button: Any) -> None:
            await interaction.response.edit_message(content="Approved", view=None)
            clicked.set_result(interaction.user.id)

    channel = bot.get_channel(peer.channel_id)
    assert isinstance(channel, discord.TextChannel)
    prompt = await channel.send("Run the tool?", view=Approve(timeout=5))
    assert peer.message(prompt.id).payload["components"][0]["components"][0]["custom_id"] == (
        "approve"
    )
    peer.inject_button_click(prompt.id, "approve")
    assert await asyncio.wait_for(clicked, 5) == peer.user_id
    assert peer.interaction_responses[0]["type"] == 7
    assert peer.texts(peer.channel_id) == ["Approved"]
    assert peer.message(prompt.id).payload["components"] == []


async def test_guild_messages_lose_content_without_the_intent(peer: DiscordServer) -> None:
    async for bot in _run(Bot(message_content=False)):
        peer.inject_message(peer.channel_id, "not for the bot")
        assert (await bot.next_message()).content == ""
        peer.inject_message(peer.channel_id, f"<@{BOT_ID}> for the bot")
        assert (await bot.next_message()).content == f"<@{BOT_ID}> for the bot"


async def test_heartbeats_are_acknowledged(monkeypatch: pytest.MonkeyPatch) -> None:
    async with DiscordServer(heartbeat_interval_ms=50) as server:
        _point(monkeypatch, server)
        async for bot in _run(Bot()):
            await server.wait_for(lambda: [f.op for f in server.frames].count(1) >= 3)
            assert bot.latency < 1.0  # float("inf") until an ACK arrives
        assert server.connections[0].closed_by == "client"


async def test_an_ungranted_intent_closes_with_4014(monkeypatch: pytest.MonkeyPatch) -> None:
    async with DiscordServer(granted_intents=0) as server:
        _point(monkeypatch, server)
        client = Bot()
        with pytest.raises(discord.PrivilegedIntentsRequired):
            await asyncio.wait_for(client.start(DEFAULT_TOKEN), 5)
        await client.close()
        assert server.connections[0].close_code == 4014


async def test_application_commands_sync_and_invoke(peer: DiscordServer, bot: Bot) -> None:
    tree = app_commands.CommandTree(bot)
    invoked: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    @tree.command(name="stop", description="Stop the running answer")
    async def stop(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("Stopped.")
        invoked.set_result(interaction.command.name if interaction.command else "")

    synced = await tree.sync()
    assert [c.name for c in synced] == ["stop"] and peer.commands[None][0]["name"] == "stop"
    peer.inject_command(peer.channel_id, "stop")
    assert await asyncio.wait_for(invoked, 5) == "stop"
    assert peer.interaction_responses[0]["type"] == 4
    assert peer.texts(peer.channel_id) == ["Stopped."]


async def test_rest_answers_are_exactly_application_json(peer: DiscordServer) -> None:
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bot {peer.token}"}
        async with http.get(f"{peer.api_base}/users/@me", headers=headers) as ok:
            assert ok.status == 200 and ok.headers["Content-Type"] == "application/json"
        async with http.get(f"{peer.api_base}/users/@me") as denied:
            assert denied.status == 401 and (await denied.json())["code"] == 0
        async with http.get(f"{peer.api_base}/nowhere", headers=headers) as missing:
            assert missing.status == 404 and missing.headers["Content-Type"] == "application/json"
    assert [r.status for r in peer.requests] == [200, 401]  # unknown paths are not routes


async def test_who_a_reply_pings_follows_allowed_mentions(peer: DiscordServer, bot: Bot) -> None:
    peer.inject_message(peer.channel_id, f"<@{BOT_ID}> ping me")
    incoming = await bot.next_message()
    plain = await incoming.reply("@everyone plain reply")
    assert peer.message(plain.id).pinged_users == {peer.user_id}
    assert peer.message(plain.id).pinged_everyone
    quiet = await incoming.reply("@everyone quiet", allowed_mentions=discord.AllowedMentions.none())
    assert peer.message(quiet.id).pinged_users == frozenset()
    assert not peer.message(quiet.id).pinged_everyone
    final = await incoming.reply(
        "done", allowed_mentions=discord.AllowedMentions.none(), mention_author=True
    )
    assert peer.requests_to(SEND)[-1].allowed_mentions == {"parse": [], "replied_user": True}
    assert peer.message(final.id).pinged_users == {peer.user_id}
