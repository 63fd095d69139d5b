"""Discord end to end through ``Daemon.run``: the real adapter on unmodified discord.py against the
local REST + Gateway peer, a local provider server behind it (architecture §3 "Discord specifics").

A streamed reply is one message edited in place; a thread message is answered in its thread;
guild messages are answered only when they mention or reply to the bot; ``@everyone`` in a
preview pings nobody (``allowed_mentions`` on the wire); only the final message that answers
the user may mention that user.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import anyio
import pytest

from channels.base import COMMAND_MENU
from channels.discord.adapter import INTENT_HELP
from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from tests.discord_harness import EDIT, SEND, assert_spacing, config_text, running_bot
from tests.peers.discord import BOT_ID, DiscordServer
from tests.peers.discord_wire import StoredMessage
from tests.peers.provider_server import ProviderServer
from tests.telegram_harness import pieces_of, reply, text_stream, tool_call_stream, words

NONE = {"parse": []}
"""``AllowedMentions.none()`` as discord.py sends it (``replied_user`` false is left out)."""


async def test_a_streamed_reply_is_one_message_edited_in_place(tmp_path: Path) -> None:
    answer = "Here is " + words("thought", 600) + "."
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(answer, 12)), delay_secs=0.03)]
    ) as bot:
        asked = await bot.ask("tell me")
    peer = bot.peer
    dm = peer.dm_channel_id
    assert peer.texts(dm) == [answer]
    [send] = peer.requests_to(SEND, dm)
    edits = peer.requests_to(EDIT, dm)
    assert len(edits) >= 2, "the draft was edited as the text grew"
    assert send.json["message_reference"]["message_id"] == int(asked["id"])
    assert all(r.allowed_mentions == NONE for r in [send, *edits])
    typing = peer.requests_to("POST /channels/{channel_id}/typing", dm)
    assert typing and typing[0].at <= send.at, "typing while the model works"
    states = [s for s in peer.states(dm) if s]
    assert all(len(s) == 1 and answer.startswith(s[0]) for s in states)
    assert len({s[0] for s in states}) == len(states), "no identical consecutive edit"
    assert_spacing(bot.writes(dm), bot.interval_ms)


async def test_everyone_in_a_preview_pings_nobody(tmp_path: Path) -> None:
    answer = "Hello @everyone and <@{user}>, " + words("word", 300)
    async with running_bot(tmp_path, []) as bot:
        text = answer.format(user=bot.peer.user_id)
        bot.provider.script(
            "/v1/chat/completions", [reply(text_stream(pieces_of(text, 20)), delay_secs=0.03)]
        )
        await bot.ask(f"<@{BOT_ID}> greet", channel_id=bot.peer.channel_id)
    peer = bot.peer
    general = peer.channel_id
    writes = bot.writes(general)
    assert len(writes) >= 3 and all(w.allowed_mentions == NONE for w in writes)
    [message] = peer.messages(general)
    assert message.content == text
    assert message.pinged_users == frozenset() and not message.pinged_everyone


async def test_the_final_message_of_off_mode_mentions_only_the_user_it_answers(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, [], mode="off") as bot:
        peer = bot.peer
        bob = peer.add_user("Bob")
        text = f"@everyone, <@{bob}>: done."
        bot.provider.script("/v1/chat/completions", [reply(text_stream([text]))])
        asked = await bot.ask(f"<@{BOT_ID}> finish", channel_id=peer.channel_id)
    [send] = peer.requests_to(SEND, peer.channel_id)
    assert send.allowed_mentions == {
        "parse": [],
        "users": [peer.user_id],
        "replied_user": True,
    }
    [message] = peer.messages(peer.channel_id)
    assert message.reference_id == int(asked["id"])
    assert message.pinged_users == {peer.user_id} and not message.pinged_everyone


async def test_a_thread_message_is_answered_in_its_thread(tmp_path: Path) -> None:
    replies = [reply(text_stream(["In the ", "thread."])), reply(text_stream(["Again."]))]
    async with running_bot(tmp_path, replies, extra="    respond_in_groups: all\n") as bot:
        peer = bot.peer
        thread = peer.add_thread(peer.channel_id, "topic")
        asked = await bot.ask("hello thread", channel_id=thread)
        await bot.ask("and again", channel_id=thread)
        history = bot.daemon.store.history("dc", str(peer.channel_id), str(thread))
    assert peer.texts(thread) == ["In the thread.", "Again."]
    assert peer.texts(peer.channel_id) == []
    first = peer.messages(thread)[0]
    assert first.reference_id == int(asked["id"])
    assert [m.content for m in history] == ["hello thread", "In the thread.", "and again", "Again."]


async def test_guild_messages_are_answered_only_when_mentioned_or_replied_to(
    tmp_path: Path,
) -> None:
    replies = [reply(text_stream(["First."])), reply(text_stream(["Second."]))]
    async with running_bot(tmp_path, replies) as bot:
        peer = bot.peer
        general = peer.channel_id
        await bot.ask("nobody asked me", channel_id=general)
        assert peer.texts(general) == []
        await bot.ask(f"<@{BOT_ID}> now you", channel_id=general)
        [answer] = peer.messages(general)
        await bot.ask("and a reply", channel_id=general, reply_to=answer.id)
    assert peer.texts(general) == ["First.", "Second."]


async def test_multi_message_sends_each_paragraph_paced_and_pinging_nobody(
    tmp_path: Path,
) -> None:
    paragraphs = ["First @everyone part.", "Second part.", "Third and last part."]
    answer = "\n\n".join(paragraphs)
    async with running_bot(
        tmp_path,
        [reply(text_stream(pieces_of(answer, 5)), delay_secs=0.05)],
        mode="multi_message",
        multi_message_delay_ms=300,
    ) as bot:
        await bot.ask("three parts")
    peer, dm = bot.peer, bot.peer.dm_channel_id
    assert peer.texts(dm) == paragraphs
    sends = peer.requests_to(SEND, dm)
    assert len(sends) == 3 and not peer.requests_to(EDIT, dm)
    assert all(s.allowed_mentions == NONE for s in sends)
    assert all(b.at - a.at >= 0.3 - 0.03 for a, b in pairwise(sends))
    assert not any(m.pinged_everyone or m.pinged_users for m in peer.messages(dm))


async def test_stop_as_a_text_command_ends_the_running_answer(tmp_path: Path) -> None:
    answer = words("slow", 2000)
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(answer, 10)), delay_secs=0.05)]
    ) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        before = bot.channel.replies_finished
        peer.inject_message(dm, "go on and on")
        await peer.wait_for(lambda: bool(peer.requests_to(SEND, dm)), 10)
        await bot.ask("/stop")  # finished at once; the answer ends with the marker
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 2)
    [message] = peer.messages(dm)
    assert message.content.endswith("\n\n⏹ Stopped.")
    assert answer.startswith(message.content.removesuffix("\n\n⏹ Stopped."))
    assert len(message.content) < len(answer)


async def test_an_approval_is_asked_with_buttons_and_the_click_runs_the_tool(
    tmp_path: Path,
) -> None:
    replies = [reply(tool_call_stream(["Checking."])), reply(text_stream(["It is noon."]))]
    async with running_bot(
        tmp_path, replies, agent_extra="  require_approval: [current_time]\n"
    ) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        before = bot.channel.replies_finished
        peer.inject_message(dm, "what time is it?")

        def is_prompt(message: StoredMessage) -> bool:  # the draft carries a Stop button
            rows = message.payload.get("components") or []
            return any(b.get("label", "").startswith("✅") for r in rows for b in r["components"])

        await peer.wait_for(lambda: any(is_prompt(m) for m in peer.messages(dm)), 10)
        [asking] = [m for m in peer.messages(dm) if is_prompt(m)]
        approve = asking.payload["components"][0]["components"][0]["custom_id"]
        peer.inject_button_click(asking.id, approve)
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 1)
    assert peer.message(asking.id).content.endswith("✅ Approved")
    assert peer.texts(dm)[0] == "Checking.\n\nIt is noon."  # the draft, above the prompt
    second = bot.provider.requests[1].json["messages"]
    assert [m["role"] for m in second][-2:] == ["assistant", "tool"]


async def test_stop_as_an_application_command_ends_the_running_answer(tmp_path: Path) -> None:
    answer = words("slow", 2000)
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(answer, 10)), delay_secs=0.05)]
    ) as bot:
        peer, general = bot.peer, bot.peer.channel_id
        await peer.wait_for(lambda: None in peer.commands)  # registered once connected
        assert {c["name"] for c in peer.commands[None]} == {name for name, _, _ in COMMAND_MENU}
        [model] = [c for c in peer.commands[None] if c["name"] == "model"]
        assert [(o["name"], o["type"], o["required"]) for o in model["options"]] == [
            ("value", 3, False)
        ]
        before = bot.channel.replies_finished
        peer.inject_message(general, f"<@{BOT_ID}> go on and on")
        await peer.wait_for(lambda: bool(peer.requests_to(SEND, general)), 10)
        peer.inject_command(general, "stop")
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 2)
    [ack] = peer.interaction_responses
    assert ack["type"] == 4 and ack["data"]["flags"] & 64  # ephemeral, answered at once
    [message] = peer.messages(general)
    assert message.content.endswith("\n\n⏹ Stopped.")
    assert len(message.content) < len(answer)


async def test_an_unanswered_approval_times_out_after_agent_approval_timeout_secs(
    tmp_path: Path,
) -> None:
    replies = [reply(tool_call_stream(["Checking."])), reply(text_stream(["I could not."]))]
    agent = "  require_approval: [current_time]\n  approval_timeout_secs: 0.5\n"
    async with running_bot(tmp_path, replies, agent_extra=agent) as bot:
        assert bot.channel.approval_timeout_secs == 0.5
        await bot.ask("what time is it?")
    peer, dm = bot.peer, bot.peer.dm_channel_id
    [prompt] = [m for m in peer.messages(dm) if "Run current_time" in m.content]
    assert prompt.content.endswith("⌛ No answer: not approved")
    assert prompt.payload["components"] == []
    tool = bot.provider.requests[1].json["messages"][-1]
    assert tool["role"] == "tool" and "nobody answered the request to approve" in tool["content"]


async def test_relaybot_run_stops_with_one_line_when_the_intent_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with DiscordServer(granted_intents=0) as peer, ProviderServer() as provider:
        config = load_config_text(
            config_text(peer, provider, tmp_path), source_name="e2e.yaml", environ={}
        )
        daemon = Daemon(config, storage_path=tmp_path / "relaybot.db")
        with anyio.fail_after(20):
            assert await daemon.run(handle_signals=False) == 2  # a config error: not restarted
    assert capsys.readouterr().err.splitlines() == [
        f"relaybot: channel dc: cannot start: {INTENT_HELP}"
    ]
