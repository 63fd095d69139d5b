"""``agent.rerun_edited`` through the Telegram and Discord wire servers, Synapse and the provider
server (architecture §5 "Chat controls"): editing the last question (a Telegram
``edited_message`` update, a Discord MESSAGE_UPDATE, a Matrix ``m.replace``) answers it again
into the same answer message, the history's last question and answer replaced; an edit of an
older question, or any edit with the key off (the default), is ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from channels.controls import REGENERATE_LABEL
from tests.controls_harness import PATH, USER, ControlsBot, controls_bot
from tests.discord_harness import running_bot as discord_bot
from tests.matrix_harness import PATH as MATRIX_PATH
from tests.matrix_harness import matrix_world, running_bot
from tests.peers.discord_wire import StoredMessage
from tests.peers.matrix_client import resolve_edits
from tests.peers.synapse import SynapseHomeserver
from tests.telegram_harness import reply, text_stream

pytestmark = pytest.mark.anyio

RERUN = "  rerun_edited: true\n"


def _labels(message: StoredMessage) -> list[str]:
    rows = message.payload.get("components") or []
    return [button["label"] for row in rows for button in row["components"]]


def _sent(bot: ControlsBot) -> list[str]:
    """The contents of the last request's messages after the system prompt."""
    return [m["content"] for m in bot.last_request()["messages"][1:]]


async def _edit_then_ask(bot: ControlsBot, edited: str, text: str, question: str) -> None:
    """The user edits their message ``edited`` to ``text`` then asks ``question``; returns
    once both are handled (each ends a reply of the channel, in order: one conversation)."""
    before = bot.channel.replies_finished
    bot.peer.inject_edit(USER, bot.peer.user_message_id(USER, edited), text)
    bot.peer.inject_message(USER, question, user_id=USER, username=f"u{USER}")
    with anyio.fail_after(10):
        await bot.channel.wait_replies(before + 2)


async def test_an_edited_last_question_is_answered_again_in_the_same_message(
    tmp_path: Path,
) -> None:
    async with controls_bot(tmp_path, agent=RERUN) as bot, bot.running():
        assert await bot.ask("what is two and two?") == "ok"
        [answer] = bot.peer.messages(USER)
        bot.provider.script(PATH, [reply(text_stream(["five"]))])
        before = bot.channel.replies_finished
        bot.peer.inject_edit(
            USER, bot.peer.user_message_id(USER, "what is two and two?"), "two and three?"
        )
        with anyio.fail_after(10):
            await bot.channel.wait_replies(before + 1)
        assert _sent(bot) == ["two and three?"]
        answers = bot.peer.messages(USER)
        assert [(m.message_id, m.text) for m in answers] == [(answer.message_id, "five")]
        markup = answers[0].reply_markup or {}
        assert [b["text"] for row in markup["inline_keyboard"] for b in row] == [REGENERATE_LABEL]
        bot.provider.script(PATH, [reply(text_stream(["ok"]))])
        await bot.ask("and more?")
        assert _sent(bot) == ["two and three?", "five", "and more?"]


async def test_an_edit_of_an_older_question_is_ignored(tmp_path: Path) -> None:
    async with controls_bot(tmp_path, agent=RERUN) as bot, bot.running():
        await bot.ask("first?")
        await bot.ask("second?")
        await _edit_then_ask(bot, "first?", "first, edited?", "third?")
        assert len(bot.requests()) == 3
        assert _sent(bot) == ["first?", "ok", "second?", "ok", "third?"]


async def test_an_edit_is_ignored_by_default(tmp_path: Path) -> None:
    async with controls_bot(tmp_path) as bot, bot.running():
        await bot.ask("first?")
        await _edit_then_ask(bot, "first?", "first, edited?", "second?")
        assert len(bot.requests()) == 2
        assert _sent(bot) == ["first?", "ok", "second?"]


async def test_discord_an_edited_last_question_is_answered_again_in_the_same_message(
    tmp_path: Path,
) -> None:
    replies = [reply(text_stream(["four"])), reply(text_stream(["five"]))]
    replies.append(reply(text_stream(["ok"])))
    async with discord_bot(tmp_path, replies, agent_extra=RERUN) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        question = await bot.ask("two and two?")
        [answer] = peer.messages(dm)
        before = bot.channel.replies_finished
        peer.inject_edit(int(question["id"]), "two and three?")
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 1)
        await peer.wait_for(lambda: _labels(peer.message(answer.id)) == [REGENERATE_LABEL], 10)
        [rewritten] = peer.messages(dm)
        assert (rewritten.id, rewritten.content) == (answer.id, "five")
        await bot.ask("and more?")
        contents = [m["content"] for m in bot.provider.requests[-1].json["messages"][1:]]
        assert contents == ["two and three?", "five", "and more?"]


async def test_discord_an_edit_is_ignored_by_default(tmp_path: Path) -> None:
    replies = [reply(text_stream(["four"])), reply(text_stream(["ok"]))]
    async with discord_bot(tmp_path, replies) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        question = await bot.ask("two and two?")
        before = bot.channel.replies_finished
        peer.inject_edit(int(question["id"]), "two and three?")
        peer.inject_message(dm, "and more?")
        with anyio.fail_after(20):  # each ends a reply of the channel, in order
            await bot.channel.wait_replies(before + 2)
        assert len(bot.provider.requests) == 2
        contents = [m["content"] for m in bot.provider.requests[-1].json["messages"][1:]]
        assert contents == ["two and two?", "four", "and more?"]
        assert [m.content for m in peer.messages(dm)] == ["four", "ok"]


def _matrix_edit(event_id: str, text: str) -> dict[str, Any]:
    """An ``m.replace`` edit of ``event_id`` to ``text`` (spec "Event replacements")."""
    return {
        "msgtype": "m.text",
        "body": f"* {text}",
        "m.new_content": {"msgtype": "m.text", "body": text},
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


async def test_matrix_an_edited_last_question_is_answered_again_in_the_same_message(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    replies = [reply(text_stream(["four"])), reply(text_stream(["five"]))]
    replies.append(reply(text_stream(["ok"])))
    async with (
        matrix_world(synapse, tmp_path, replies) as world,
        running_bot(world, agent=RERUN),
    ):
        question = await world.ask("two and two?")
        [answer] = resolve_edits(await world.bot_events())
        before = world.channel.replies_finished
        await world.send(_matrix_edit(question, "two and three?"))
        with anyio.fail_after(30):
            await world.channel.wait_replies(before + 1)
        shown = resolve_edits(await world.bot_events())
        assert {key: event["body"] for key, event in shown.items()} == {answer: "five"}
        await world.ask("and more?")
        last = world.provider.requests_to(MATRIX_PATH)[-1]
        contents = [m["content"] for m in last.json["messages"][1:]]
        assert contents == ["two and three?", "five", "and more?"]
