"""The Matrix channel's rules through Synapse (issue 12; architecture §3 "Matrix specifics",
"Access"): login by password, what is never answered (events from before the first start,
own events), rooms of more than two members (the mention rule, ``m.in_reply_to``), approvals
by reaction and by reply, ``/stop`` and ``/reset``, ``notice_previews`` with ``live_marker``
(encrypted rooms: ``test_matrix_encryption.py``; faults: ``test_matrix_faults.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import nio
import pytest

from channels.matrix.adapter import LIVE_KEY
from tests.matrix_harness import PATH, World, matrix_world, running_bot
from tests.peers.matrix_client import SYNC_FILTER, resolve_edits
from tests.peers.provider_server import Reply
from tests.peers.synapse import SynapseHomeserver
from tests.telegram_harness import pieces_of, reply, text_stream, tool_call_stream, words


def _originals(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e for e in events if e["content"].get("m.relates_to", {}).get("rel_type") != "m.replace"
    ]


def _asked(world: World) -> list[str]:
    """The last user message of each provider request, in order."""
    asked = []
    for request in world.provider.requests_to(PATH):
        messages = json.loads(request.body)["messages"]
        asked.append([m for m in messages if m["role"] == "user"][-1]["content"])
    return asked


async def test_password_login_no_answer_to_old_messages_or_notices(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    async with matrix_world(synapse, tmp_path, [reply(text_stream(["Fresh."]))]) as world:
        world.password_login = True
        await world.send({"msgtype": "m.text", "body": "an old message"})
        async with running_bot(world):
            await world.send({"msgtype": "m.notice", "body": "another bot's notice"})
            await world.ask("a new one")
            await anyio.sleep(1.5)  # another sync: the old message stays unanswered
        events = await world.bot_events()
    assert [e["content"]["body"] for e in _originals(events)] == ["Fresh."]
    assert _asked(world) == ["a new one"]


async def test_in_a_room_of_three_only_a_mention_is_answered_as_a_reply(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    async with matrix_world(synapse, tmp_path, [reply(text_stream(["Here."]))]) as world:
        await world.add_member()
        async with running_bot(world):
            await world.ask("talking among ourselves")  # finished at once: not addressed
            asked = await world.ask(
                "what do you think?", **{"m.mentions": {"user_ids": [world.bot_user.user_id]}}
            )
            await world.ask(f"{world.bot_user.user_id} and you?")
        events = _originals(await world.bot_events())
    assert [e["content"]["body"] for e in events] == ["Here.", "Here."]
    assert events[0]["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": asked}}
    assert _asked(world) == ["what do you think?", f"{world.bot_user.user_id} and you?"]


async def test_a_direct_room_reply_references_nothing(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    async with matrix_world(synapse, tmp_path, [reply(text_stream(["Hi."]))]) as world:
        async with running_bot(world):
            await world.ask("hello")
        events = _originals(await world.bot_events())
    assert [e["content"]["body"] for e in events] == ["Hi."]
    assert "m.relates_to" not in events[0]["content"]


async def _prompt(world: World) -> str:
    with anyio.fail_after(20):
        while True:
            for event in await world.bot_events():
                if "Reply yes or no" in event["content"].get("body", ""):
                    return str(event["event_id"])
            await anyio.sleep(0.2)


@pytest.mark.parametrize("how", ["reaction", "reply"])
async def test_an_approval_by_reaction_or_reply_runs_the_tool(
    synapse: SynapseHomeserver, tmp_path: Path, how: str
) -> None:
    replies = [
        reply(tool_call_stream(["Checking."])),
        reply(text_stream(["It is late."])),
    ]
    async with matrix_world(synapse, tmp_path, replies) as world:
        agent = "  require_approval: [current_time]\n"
        async with running_bot(world, mode="multi_message", agent=agent):
            before = world.channel.replies_finished
            await world.send({"msgtype": "m.text", "body": "time?"})
            prompt = await _prompt(world)
            if how == "reaction":
                answer = await world.human.room_send(
                    world.room_id,
                    "m.reaction",
                    {"m.relates_to": {"rel_type": "m.annotation", "event_id": prompt, "key": "✅"}},
                )
                assert isinstance(answer, nio.RoomSendResponse), answer
            else:
                await world.send(
                    {
                        "msgtype": "m.text",
                        "body": "yes",
                        "m.relates_to": {"m.in_reply_to": {"event_id": prompt}},
                    }
                )
            with anyio.fail_after(20):
                await world.channel.wait_replies(before + 1)
        shown = resolve_edits(await world.bot_events())
    assert shown[prompt]["body"].endswith("✅ Approved")
    tool_results = [
        m
        for m in json.loads(world.provider.requests_to(PATH)[1].body)["messages"]
        if m["role"] == "tool"
    ]
    assert "not approve" not in tool_results[0]["content"]
    assert any(body["body"] == "It is late." for body in shown.values())
    assert _asked(world) == ["time?", "time?"]  # the answer "yes" was no new question


async def test_stop_ends_the_running_answer(synapse: SynapseHomeserver, tmp_path: Path) -> None:
    text = words("slow", 600)
    stream = reply(text_stream(pieces_of(text, 10)), delay_secs=0.1)
    async with matrix_world(synapse, tmp_path, [stream]) as world:
        async with running_bot(world):
            before = world.channel.replies_finished
            await world.send({"msgtype": "m.text", "body": "tell me a long story"})
            await anyio.sleep(2.0)
            await world.send({"msgtype": "m.text", "body": "/stop"})
            with anyio.fail_after(20):
                await world.channel.wait_replies(before + 2)
        events = await world.bot_events()
    shown = resolve_edits(events)
    bodies = [shown[e["event_id"]]["body"] for e in _originals(events)]
    assert len(bodies) == 1
    assert bodies[0].endswith("⏹ Stopped.")
    assert len(bodies[0]) < len(text)


async def test_notice_previews_and_the_live_marker(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    """Drafts are live ``m.notice`` events; the finished answer is a new ``m.text`` (the event
    that notifies: edits never do), without the live marker, and then the notice is redacted
    (architecture §3 "Matrix specifics")."""
    answer = "Done **now**. " + words("w", 300)
    stream = reply(text_stream(pieces_of(answer, 30)), delay_secs=0.1)
    extra = "    notice_previews: true\n    live_marker: true\n"
    async with matrix_world(synapse, tmp_path, [stream]) as world:
        async with running_bot(world, extra=extra):
            before = world.channel.replies_finished
            await world.send({"msgtype": "m.text", "body": "go"})
            with anyio.fail_after(30):  # the human's client sees the draft before its redaction
                while True:
                    await world.timeline()
                    if world.channel.replies_finished > before:
                        break
                    await anyio.sleep(0.05)
        events = await world.bot_events()
        everything = await world.timeline()
    draft, final = _originals(events)
    assert draft["content"]["msgtype"] == "m.notice"
    assert draft["content"][LIVE_KEY] == {}
    edits = [e for e in events if e is not draft and e is not final]
    assert edits, "no preview edit"
    for edit in edits:
        assert edit["content"]["m.relates_to"]["event_id"] == draft["event_id"]
        assert edit["content"]["m.new_content"]["msgtype"] == "m.notice"
        assert edit["content"]["m.new_content"][LIVE_KEY] == {}
    assert events[-1] is final, "an edit came after the final text"
    content = final["content"]
    assert (content["msgtype"], content["body"]) == ("m.text", answer)
    assert "<strong>now</strong>" in content["formatted_body"]
    assert LIVE_KEY not in content
    bot = world.bot_user.user_id
    stop_marks = {e["event_id"] for e in everything if e["type"] == "m.reaction"}  # its own ⏹
    redactions = [
        e
        for e in everything
        if e["type"] == "m.room.redaction" and e["sender"] == bot and e["redacts"] not in stop_marks
    ]
    assert [e["redacts"] for e in redactions] == [draft["event_id"]]
    assert everything.index(redactions[0]) > everything.index(final)


async def test_reset_forgets_the_conversation(synapse: SynapseHomeserver, tmp_path: Path) -> None:
    replies = [reply(text_stream([f"Answer {n}."])) for n in range(3)]
    async with matrix_world(synapse, tmp_path, replies) as world:
        async with running_bot(world):
            await world.ask("one")
            await world.ask("two")
            await world.ask("/reset")
            await world.ask("three")
        events = await world.bot_events()
    shown = resolve_edits(events)
    bodies = [shown[e["event_id"]]["body"] for e in _originals(events)]
    assert bodies == ["Answer 0.", "Answer 1.", "Conversation cleared.", "Answer 2."]
    users = [
        [m["content"] for m in json.loads(r.body)["messages"] if m["role"] == "user"]
        for r in world.provider.requests_to(PATH)
    ]
    assert users == [["one"], ["one", "two"], ["three"]]


async def test_typing_shows_while_the_model_works(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    body, cuts = text_stream(["Thought about it."])
    slow = Reply(body=body, cuts=cuts, header_delay_secs=2.0)
    async with matrix_world(synapse, tmp_path, [slow]) as world:
        async with running_bot(world):
            before = world.channel.replies_finished
            await world.send({"msgtype": "m.text", "body": "think hard"})
            typing: set[str] = set()
            with anyio.fail_after(15):
                while world.bot_user.user_id not in typing:
                    response = await world.human.sync(timeout=1000, sync_filter=SYNC_FILTER)
                    assert isinstance(response, nio.SyncResponse), response
                    room = response.rooms.join.get(world.room_id)
                    for event in room.ephemeral if room is not None else []:
                        if isinstance(event, nio.TypingNoticeEvent):
                            typing.update(event.users)
            with anyio.fail_after(15):
                await world.channel.wait_replies(before + 1)
