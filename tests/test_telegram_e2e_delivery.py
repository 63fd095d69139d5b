"""Telegram end to end through ``Daemon.run`` where delivery used to lose text or stall (issue
#10; architecture §3 "Network errors", §4 "The hook"): 5xx answers on the final edit, on every edit
and on a ``multi_message`` send end with the whole answer in the chat; a hook that sleeps 3 s in
one chat leaves another chat's writes their spacing. Real time, real sockets.
"""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest

from channels.telegram.format import markdown_to_telegram
from tests.peers.telegram import ApiError
from tests.telegram_harness import (
    CHAT,
    SPACING_TOLERANCE_SECS,
    Bot,
    pieces_of,
    reply,
    running_bot,
    text_stream,
    tool_call_stream,
    words,
)

SERVER_ERROR = ApiError(500, "Internal Server Error")
BAD_GATEWAY = ApiError(502, "Bad Gateway")
ANSWER = "**Summary.** " + words("finding", 1500) + " That is all."


def _formatted(params: dict[str, Any]) -> bool:
    return "entities" in params


def _account_for(bot: Bot, error: ApiError) -> None:
    """Every refusal the peer answered with ``error`` was scheduled (for the invariants)."""
    bot.injected.extend(error for c in bot.writes() if c.error == error.description)


async def test_a_502_on_the_final_formatted_edit_and_its_retry_still_ends_whole(
    tmp_path: Path,
) -> None:
    """The final formatted edit and the next try are refused (502): they did not land, so the
    engine backs off and tries again; the chat ends with the whole answer, formatted (it used to
    keep the preview, 1372 of 1522 characters, with no marker)."""
    refused: list[bool] = []

    def final_then_next(params: dict[str, Any]) -> bool:
        if refused or _formatted(params):
            refused.append(True)
            return len(refused) <= 2
        return False

    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(ANSWER, 60)), delay_secs=0.02)]
    ) as bot:
        bot.peer.fail_every("editMessageText", where=final_then_next, error=BAD_GATEWAY)
        await bot.ask("summarise", within=30)
    _account_for(bot, BAD_GATEWAY)
    bot.check()
    edits = bot.peer.calls_to("editMessageText", CHAT)
    assert [c.status for c in edits[-3:]] == [502, 502, 200]
    assert edits[-1].answered_at is not None and edits[-1].at - edits[-2].at >= 3.0  # backed off
    [message] = bot.peer.messages(CHAT)
    assert message.text == markdown_to_telegram(ANSWER).text
    assert {"type": "bold", "offset": 0, "length": len("Summary.")} in message.entities


async def test_500_on_every_edit_ends_with_the_whole_answer_in_a_new_message(
    tmp_path: Path,
) -> None:
    """Every edit is refused (500): after three tries the draft is deleted and the text goes
    out as a new message; the chat never keeps the first preview as if it were the answer."""
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(ANSWER, 60)), delay_secs=0.02)]
    ) as bot:
        bot.peer.fail_every("editMessageText", error=SERVER_ERROR)
        await bot.ask("summarise", within=40)
    _account_for(bot, SERVER_ERROR)
    bot.check()
    assert bot.peer.calls_to("deleteMessage", CHAT)
    whole = markdown_to_telegram(ANSWER).text
    [message] = bot.peer.messages(CHAT)
    assert message.text == whole and message.entities
    for state in bot.peer.states(CHAT):  # one message at a time: a preview, or the answer
        assert len(state) <= 1
        assert all(ANSWER.startswith(t.rstrip()) or t == whole for t in state)


async def test_multi_message_two_500s_on_one_send_lose_nothing(tmp_path: Path) -> None:
    """``multi_message``: the first turn's send is refused twice (500); the third try lands, and
    both turns are in the chat in order (it used to drop that turn's message)."""
    narration = "Let me look that up: " + words("step", 120) + "."
    answer = "It is **noon** in UTC."
    replies = [
        reply(tool_call_stream(pieces_of(narration, 30)), delay_secs=0.02),
        reply(text_stream(pieces_of(answer, 8)), delay_secs=0.02),
    ]
    async with running_bot(tmp_path, replies, mode="multi_message") as bot:
        bot.fail("sendMessage", call=1, error=SERVER_ERROR)
        bot.fail("sendMessage", call=2, error=SERVER_ERROR)
        await bot.ask("time?", within=30)
    bot.check()
    sends = bot.peer.calls_to("sendMessage", CHAT)
    assert [c.status for c in sends[:3]] == [500, 500, 200]
    assert [m.text for m in bot.peer.messages(CHAT)] == [
        markdown_to_telegram(narration).text,
        markdown_to_telegram(answer).text,
    ]


# -- a slow hook in one chat --------------------------------------------------------------

HOOK_SLEEP_SECS = 3.0
SLOW_CHAT = CHAT
OTHER_CHAT = 222


def sleepy_hook(channel: str, chat_id: str, text: str) -> str:
    """``on_message_sending`` that takes 3 s in chat 111 (a synchronous service call) and keeps
    the text."""
    if chat_id == str(SLOW_CHAT):
        time.sleep(HOOK_SLEEP_SECS)
    return text


async def test_a_hook_sleeping_3_s_in_one_chat_leaves_the_other_chat_its_spacing(
    tmp_path: Path,
) -> None:
    """Chat A's answer ends and its hook sleeps 3 s on the final text; meanwhile chat B streams.
    B's writes keep their spacing: no gap between two of them comes near the hook's 3 s (the
    hook used to run on the event loop and stall every chat)."""
    short = "A short answer for chat A."
    long_deltas = pieces_of(words("bee", 3000), 25)  # ~6 s of streaming
    replies = [
        reply(text_stream(pieces_of(short, 5)), delay_secs=0.05),
        reply(text_stream(long_deltas), delay_secs=0.05),
    ]
    async with running_bot(
        tmp_path, replies, hook="tests.test_telegram_e2e_delivery:sleepy_hook"
    ) as bot:
        channel = bot.channel
        bot.peer.inject_message(SLOW_CHAT, "first")
        await bot.peer.wait_for(lambda: len(bot.provider.requests) == 1, 10)
        bot.peer.inject_message(OTHER_CHAT, "second", user_id=222, username="bob")
        with anyio.fail_after(40):
            await channel.wait_replies(2)
    writes_b = [
        c
        for c in bot.peer.calls
        if c.chat_id == OTHER_CHAT and c.method in ("sendMessage", "editMessageText")
    ]
    # Chat A's answer is shorter than the redaction holdback: its one write is the final send,
    # right after the hook.
    [a_final] = bot.peer.calls_to("sendMessage", SLOW_CHAT)
    hook_end = a_final.at
    hook_start = hook_end - HOOK_SLEEP_SECS
    during = [c for c in writes_b if hook_start <= c.at <= hook_end]
    assert len(during) >= 5, "chat B streamed while chat A's hook slept"
    interval = bot.interval_ms / 1000
    gaps = [b.at - a.at for a, b in pairwise(writes_b) if b.at <= hook_end + interval]
    assert max(gaps) < HOOK_SLEEP_SECS / 2  # a stalled loop would leave a gap of about 3 s
    assert min(gaps) >= interval - SPACING_TOLERANCE_SECS
    assert bot.peer.texts(SLOW_CHAT) == [short]
    assert bot.peer.texts(OTHER_CHAT) == [words("bee", 3000)]


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_a_hook_that_times_out_withholds_its_piece(tmp_path: Path, mode: str) -> None:
    """``hook_timeout_secs`` 0.5 and a hook that sleeps 3 s: the piece fails closed as the
    withheld notice (partial: the draft edited to it), and the bot goes on."""
    config_hook = "tests.test_telegram_e2e_delivery:sleepy_hook"
    async with running_bot(
        tmp_path,
        [reply(text_stream(pieces_of(ANSWER[:300], 30)), delay_secs=0.02)],
        mode=mode,
        hook=config_hook,
        hook_timeout_secs=0.5,
    ) as bot:
        started = time.monotonic()
        await bot.ask("withheld?", within=20)
        assert time.monotonic() - started < HOOK_SLEEP_SECS  # the sleeping hook is not awaited
    bot.check()
    assert bot.peer.texts(CHAT) == ["⚠️ Part of this answer was withheld."]
