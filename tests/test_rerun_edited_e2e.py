"""``agent.rerun_edited`` through the Telegram wire server and the provider server (architecture
§5 "Chat controls"): editing the last question (an ``edited_message`` update) answers it again
into the same answer message, the history's last question and answer replaced; an edit of an
older question, or any edit with the key off (the default), is ignored."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from channels.controls import REGENERATE_LABEL
from tests.controls_harness import PATH, USER, ControlsBot, controls_bot
from tests.telegram_harness import reply, text_stream

pytestmark = pytest.mark.anyio

RERUN = "  rerun_edited: true\n"


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
