"""The Stop button of Discord and the ⏹ reaction of Matrix through their peers (architecture §3
"Buttons"): a press ends the provider stream (the server sees the client close the connection)
and the answer ends with ``⏹ Stopped.``; Discord's Stop is gone from the final message, which
carries 🔄 Regenerate instead: it asks the same question again below, the history replaced; a
press by another user is refused, ephemerally. Matrix takes commands with its prefix ``!``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import nio
import pytest

from channels.controls import REGENERATE_LABEL, STOP_LABEL
from channels.matrix.reactions import STOP_KEY
from orchestrator.chats.presses import NOT_YOURS
from orchestrator.turn.runner import STOPPED_MARKER
from tests.discord_harness import running_bot as discord_bot
from tests.matrix_harness import PATH, World, matrix_world, running_bot
from tests.peers.discord_wire import StoredMessage
from tests.peers.matrix_client import nio_client, resolve_edits
from tests.peers.provider_server import RecordedRequest
from tests.peers.synapse import SynapseHomeserver
from tests.telegram_harness import reply, text_stream, tool_call_stream

pytestmark = pytest.mark.anyio

SLOW = reply(text_stream([f"word{n} " for n in range(60)]), delay_secs=0.1)


async def _closed(request: RecordedRequest) -> bool:
    with anyio.fail_after(5):
        while request.ended_at is None:  # noqa: ASYNC110 - the server is polled
            await anyio.sleep(0.02)
    return request.client_closed


def _labels(message: StoredMessage) -> list[str]:
    rows = message.payload.get("components") or []
    return [button["label"] for row in rows for button in row["components"]]


async def test_discord_regenerate_asks_again_below_and_refuses_another_user(
    tmp_path: Path,
) -> None:
    replies = [reply(text_stream(["four"])), reply(text_stream(["four again"]))]
    async with discord_bot(tmp_path, replies) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        before = bot.channel.replies_finished
        peer.inject_message(dm, "two and two?")
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 1)
        [first] = peer.messages(dm)
        await peer.wait_for(lambda: _labels(peer.message(first.id)) == [REGENERATE_LABEL], 10)
        [button] = peer.message(first.id).payload["components"][0]["components"]
        peer.inject_button_click(first.id, button["custom_id"], user_id=peer.add_user("mallory"))
        await peer.wait_for(lambda: len(peer.interaction_responses) == 1, 10)
        peer.inject_button_click(first.id, button["custom_id"])  # the asker
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 2)
        await peer.wait_for(lambda: not _labels(peer.message(first.id)), 10)
        old, new = peer.messages(dm)
        assert (old.id, new.content, _labels(new)) == (first.id, "four again", [REGENERATE_LABEL])
        one, two = bot.provider.requests
        assert one.json["messages"] == two.json["messages"]
    refused, taken = peer.interaction_responses
    assert refused["data"]["content"] == NOT_YOURS and refused["data"]["flags"] & 64
    assert taken["data"]["content"] == "Asking again…"


async def test_discord_stop_button_ends_the_stream_and_is_gone(tmp_path: Path) -> None:
    async with discord_bot(tmp_path, [SLOW]) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        before = bot.channel.replies_finished
        peer.inject_message(dm, "tell me a long story")

        def buttoned() -> bool:
            return any(m.payload.get("components") for m in peer.messages(dm))

        await peer.wait_for(buttoned, 10)
        [draft] = [m for m in peer.messages(dm) if m.payload.get("components")]
        [button] = draft.payload["components"][0]["components"]
        assert button["label"] == STOP_LABEL
        peer.inject_button_click(draft.id, button["custom_id"])
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 1)
        [request] = bot.provider.requests
        assert await _closed(request)
        [message] = peer.messages(dm)
        assert message.content.endswith(STOPPED_MARKER) and "word59" not in message.content
        assert _labels(message) == [REGENERATE_LABEL]
    [ack] = peer.interaction_responses
    assert ack["type"] == 4 and ack["data"]["content"] == "Stopping…"
    assert ack["data"]["flags"] & 64  # ephemeral: the presser alone reads it


async def test_matrix_stop_reaction_ends_the_stream(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    async with matrix_world(synapse, tmp_path, [SLOW]) as world, running_bot(world):
        before = world.channel.replies_finished
        await world.send({"msgtype": "m.text", "body": "tell me a long story"})
        with anyio.fail_after(20):
            while not (drafts := await world.bot_events()):  # noqa: ASYNC110 - polled
                await anyio.sleep(0.1)
        stop = {
            "m.relates_to": {
                "rel_type": "m.annotation",
                "event_id": drafts[0]["event_id"],
                "key": "⏹️",
            }
        }
        sent = await world.human.room_send(world.room_id, "m.reaction", stop)
        assert isinstance(sent, nio.RoomSendResponse), sent
        with anyio.fail_after(20):
            await world.channel.wait_replies(before + 1)
        [request] = world.provider.requests_to(PATH)
        assert await _closed(request)
        shown = resolve_edits(await world.bot_events())
    [final] = [event["body"] for event in shown.values()]
    assert final.endswith(STOPPED_MARKER) and "word59" not in final


async def _redacted(world: World, event_id: str) -> bool:
    """Whether the room's timeline holds a redaction of ``event_id`` (top-level ``redacts``,
    or in the content from room version 11)."""
    return any(
        e["type"] == "m.room.redaction"
        and event_id in (e.get("redacts"), e.get("content", {}).get("redacts"))
        for e in await world.timeline()
    )


async def test_matrix_bot_shows_its_own_stop_reaction_while_streaming_and_redacts_it(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    async with matrix_world(synapse, tmp_path, [SLOW]) as world, running_bot(world):
        before = world.channel.replies_finished
        await world.send({"msgtype": "m.text", "body": "tell me a long story"})
        bot = world.bot_user.user_id

        async def own_stops() -> list[dict[str, Any]]:
            return [
                e
                for e in await world.timeline()
                if e["sender"] == bot and e["type"] == "m.reaction"
            ]

        with anyio.fail_after(20):
            while not (marks := await own_stops()):  # noqa: ASYNC110 - polled
                await anyio.sleep(0.1)
        assert world.channel.replies_finished == before  # shown while the answer streams
        [mark] = marks
        [first, *_] = await world.bot_events()
        relation = mark["content"]["m.relates_to"]
        assert (relation["event_id"], relation["key"]) == (first["event_id"], STOP_KEY)
        with anyio.fail_after(30):
            await world.channel.wait_replies(before + 1)
        with anyio.fail_after(20):
            while not await _redacted(world, mark["event_id"]):  # noqa: ASYNC110 - polled
                await anyio.sleep(0.1)


def _reaction(event_id: str, key: str) -> dict[str, Any]:
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}


async def test_matrix_regenerate_reaction_asks_again_and_another_users_is_refused_aloud(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    replies = [reply(text_stream(["four"])), reply(text_stream(["four again"]))]
    async with (
        matrix_world(synapse, tmp_path, replies) as world,
        running_bot(world, allowed_users='["*"]'),
    ):
        await world.ask("two and two?")
        [answer] = await world.bot_events()
        stranger = nio_client(synapse, await world.add_member())
        try:
            sent = await stranger.room_send(
                world.room_id, "m.reaction", _reaction(answer["event_id"], "🔁")
            )
            assert isinstance(sent, nio.RoomSendResponse), sent
            with anyio.fail_after(20):
                while len(await world.bot_events()) < 2:  # noqa: ASYNC110 - polled
                    await anyio.sleep(0.1)
        finally:
            await stranger.close()
        refusal = (await world.bot_events())[1]["content"]
        assert (refusal["msgtype"], refusal["body"]) == ("m.notice", NOT_YOURS)
        assert len(world.provider.requests_to(PATH)) == 1
        before = world.channel.replies_finished
        mine = await world.human.room_send(
            world.room_id, "m.reaction", _reaction(answer["event_id"], "🔁")
        )
        assert isinstance(mine, nio.RoomSendResponse), mine
        with anyio.fail_after(20):
            await world.channel.wait_replies(before + 1)
        one, two = world.provider.requests_to(PATH)
        assert one.json["messages"] == two.json["messages"]
        shown = resolve_edits(await world.bot_events())
    assert [event["body"] for event in shown.values()][-1] == "four again"


async def test_matrix_takes_commands_with_its_prefix(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    async with matrix_world(synapse, tmp_path, [SLOW]) as world, running_bot(world, mode="off"):
        await world.ask("!settings")
        shown = resolve_edits(await world.bot_events())
    [answer] = [event["body"] for event in shown.values()]
    assert answer.startswith("Model: m (main; configured)")
    assert world.provider.requests_to(PATH) == []


async def test_discord_approval_is_answered_by_the_asker_or_an_admin_only(tmp_path: Path) -> None:
    replies = [reply(tool_call_stream(["Checking."])), reply(text_stream(["It is noon."]))]
    agent = "  require_approval: [current_time]\n"
    async with discord_bot(tmp_path, replies, agent_extra=agent) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        before = bot.channel.replies_finished
        peer.inject_message(dm, "what time is it?")

        def prompts() -> list[StoredMessage]:
            return [m for m in peer.messages(dm) if "Run current_time" in m.content]

        await peer.wait_for(lambda: bool(prompts()), 10)
        [asking] = prompts()
        approve = asking.payload["components"][0]["components"][0]["custom_id"]
        stranger = peer.add_user("mallory")
        peer.inject_button_click(asking.id, approve, user_id=stranger)
        await peer.wait_for(lambda: len(peer.interaction_responses) == 1, 10)
        assert peer.interaction_responses[0]["data"]["content"] == NOT_YOURS
        peer.inject_button_click(asking.id, approve)  # the asker
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 1)
    assert peer.message(asking.id).content.endswith("✅ Approved")


async def _bot_event(world: World, wanted: Callable[[str], bool]) -> str:
    """The id of the bot's first event whose body is ``wanted``, once it is there."""
    with anyio.fail_after(20):
        while True:
            for event in await world.bot_events():
                if wanted(event["content"].get("body", "")):
                    return str(event["event_id"])
            await anyio.sleep(0.1)


async def test_matrix_approval_is_answered_by_the_asker_or_an_admin_only(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    replies = [reply(tool_call_stream(["Checking."])), reply(text_stream(["It is noon."]))]
    agent = "  require_approval: [current_time]\n"
    async with (
        matrix_world(synapse, tmp_path, replies) as world,
        running_bot(world, mode="multi_message", agent=agent, allowed_users='["*"]'),
    ):
        before = world.channel.replies_finished
        await world.send({"msgtype": "m.text", "body": "what time is it?"})
        prompt = await _bot_event(world, lambda body: "Reply yes or no" in body)
        stranger = nio_client(synapse, await world.add_member())  # after: the room was direct
        try:
            sent = await stranger.room_send(world.room_id, "m.reaction", _reaction(prompt, "✅"))
            assert isinstance(sent, nio.RoomSendResponse), sent
            await _bot_event(world, lambda body: body == NOT_YOURS)
        finally:
            await stranger.close()
        mine = await world.human.room_send(world.room_id, "m.reaction", _reaction(prompt, "✅"))
        assert isinstance(mine, nio.RoomSendResponse), mine
        with anyio.fail_after(20):
            await world.channel.wait_replies(before + 1)
        shown = resolve_edits(await world.bot_events())
    assert shown[prompt]["body"].endswith("✅ Approved")
