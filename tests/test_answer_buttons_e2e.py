"""The answer buttons through the Telegram wire server and the provider server (architecture §3
"Buttons"): ⏹ Stop on a streaming answer ends the provider stream (the server sees the client
close the connection) and is gone from the final message; 🔄 Regenerate asks the same question
again, answered below, the history replaced; a press by someone other than the asker or an
admin is refused politely, and so is their answer to a tool approval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from channels.controls import REGENERATE_LABEL, STOP_LABEL
from orchestrator.chats.presses import NOT_YOURS
from orchestrator.turn.runner import STOPPED_MARKER
from tests.controls_harness import ADMIN, GROUP, PATH, USER, ControlsBot, controls_bot
from tests.telegram_harness import reply, text_stream, tool_call_stream

pytestmark = pytest.mark.anyio

SLOW = reply(text_stream([f"word{n} " for n in range(40)]), delay_secs=0.15)


def _buttons(bot: ControlsBot, chat: int) -> list[tuple[int, str, str]]:
    """(message id, label, callback data) of every inline button in ``chat``."""
    out = []
    for message in bot.peer.messages(chat):
        markup: dict[str, Any] = message.reply_markup or {}
        for row in markup.get("inline_keyboard", []):
            out += [(message.message_id, b["text"], b["callback_data"]) for b in row]
    return out


async def _button(bot: ControlsBot, chat: int, label: str) -> tuple[int, str]:
    with anyio.fail_after(10):
        while not [b for b in _buttons(bot, chat) if b[1] == label]:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    [(message_id, _, data)] = [b for b in _buttons(bot, chat) if b[1] == label]
    return message_id, data


async def _press(bot: ControlsBot, chat: int, label: str, user: int) -> str:
    """``user`` presses the button ``label``; returns the callback's answer text."""
    message_id, data = await _button(bot, chat, label)
    query = bot.peer.inject_callback_query(chat, message_id, data, user_id=user, username=None)
    with anyio.fail_after(10):
        while query not in bot.peer.answered_callbacks:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return str(bot.peer.answered_callbacks[query].get("text"))


async def test_stop_button_ends_the_stream_and_is_gone_from_the_final_message(
    tmp_path: Path,
) -> None:
    async with controls_bot(tmp_path) as bot, bot.running():
        bot.provider.script(PATH, [SLOW])
        before = bot.channel.replies_finished
        bot.peer.inject_message(USER, "tell me a long story", user_id=USER)
        assert await _press(bot, USER, STOP_LABEL, USER) == "Stopping…"
        with anyio.fail_after(10):
            await bot.channel.wait_replies(before + 1)
        [request] = bot.requests()
        with anyio.fail_after(5):
            while request.ended_at is None:  # noqa: ASYNC110 - the server is polled
                await anyio.sleep(0.02)
        assert request.client_closed
        final = bot.peer.messages(USER)[-1]
        assert final.text.endswith(STOPPED_MARKER) and "word39" not in final.text
        assert [label for _, label, _ in _buttons(bot, USER)] == [REGENERATE_LABEL]


async def test_regenerate_asks_the_same_question_again_below_with_the_history_replaced(
    tmp_path: Path,
) -> None:
    async with controls_bot(tmp_path) as bot, bot.running():
        assert await bot.ask("what is two and two?") == "ok"
        first_answer, _ = await _button(bot, USER, REGENERATE_LABEL)
        before = bot.channel.replies_finished
        assert await _press(bot, USER, REGENERATE_LABEL, USER) == "Asking again…"
        with anyio.fail_after(10):
            await bot.channel.wait_replies(before + 1)
        first, second = bot.requests()
        assert first.json["messages"] == second.json["messages"]
        assert second.json["messages"][-1] == {"role": "user", "content": "what is two and two?"}
        answers = bot.peer.messages(USER)
        assert answers[-1].message_id > first_answer and answers[-1].text == "ok"
        # Only the last answer offers Regenerate.
        assert [(m, label) for m, label, _ in _buttons(bot, USER)] == [
            (answers[-1].message_id, REGENERATE_LABEL)
        ]
        await bot.ask("and three?")
        sent = [m["content"] for m in bot.last_request()["messages"][1:]]
        assert sent == ["what is two and two?", "ok", "and three?"]


async def test_buttons_of_another_users_answer_are_refused_politely(tmp_path: Path) -> None:
    async with controls_bot(tmp_path) as bot, bot.running():
        bot.provider.script(PATH, [SLOW])
        before = bot.channel.replies_finished
        bot.peer.inject_message(GROUP, "a long story please", user_id=222)
        assert await _press(bot, GROUP, STOP_LABEL, 333) == NOT_YOURS
        assert await _press(bot, GROUP, STOP_LABEL, ADMIN) == "Stopping…"
        with anyio.fail_after(10):
            await bot.channel.wait_replies(before + 1)
        assert bot.peer.texts(GROUP)[-1].endswith(STOPPED_MARKER)
        assert await _press(bot, GROUP, REGENERATE_LABEL, 333) == NOT_YOURS
        assert len(bot.requests()) == 1


async def test_an_approval_is_answered_by_the_asker_or_an_admin_only(tmp_path: Path) -> None:
    agent = "  require_approval: [current_time]\n"
    async with controls_bot(tmp_path, agent=agent, tools="[current_time]") as bot, bot.running():
        bot.provider.script(PATH, [reply(tool_call_stream(["Let me look."])), SLOW])
        bot.peer.inject_message(GROUP, "what time is it?", user_id=222)
        with anyio.fail_after(10):
            while not [b for b in _buttons(bot, GROUP) if b[1].startswith("✅")]:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        [(message_id, _, data)] = [b for b in _buttons(bot, GROUP) if b[1].startswith("✅")]
        refused = bot.peer.inject_callback_query(GROUP, message_id, data, user_id=333)
        taken = bot.peer.inject_callback_query(GROUP, message_id, data, user_id=222)
        with anyio.fail_after(10):
            while taken not in bot.peer.answered_callbacks:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        assert bot.peer.answered_callbacks[refused]["text"] == NOT_YOURS
        assert bot.peer.answered_callbacks[taken]["text"] == "Approved."
