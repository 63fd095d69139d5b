"""The Stop button of Discord and the ⏹ reaction of Matrix through their peers (architecture §3
"Buttons"): a press ends the provider stream (the server sees the client close the connection)
and the answer ends with ``⏹ Stopped.``; Discord's button is gone from the final message.
Matrix takes commands with its prefix ``!``."""

from __future__ import annotations

from pathlib import Path

import anyio
import nio
import pytest

from channels.controls import STOP_LABEL
from orchestrator.chats.presses import NOT_YOURS
from orchestrator.turn.runner import STOPPED_MARKER
from tests.discord_harness import running_bot as discord_bot
from tests.matrix_harness import PATH, matrix_world, running_bot
from tests.peers.discord_wire import StoredMessage
from tests.peers.matrix_client import resolve_edits
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
        assert not message.payload.get("components")
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
