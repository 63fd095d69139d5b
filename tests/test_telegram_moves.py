"""Where a reply goes changes under it, through the Telegram wire server (architecture §3 "Network
errors", §5): a group that becomes a supergroup mid-answer (400 with
``parameters.migrate_to_chat_id``), and a forum topic deleted mid-answer (400 "message thread
not found").

* Migration: the rest of the reply goes to the new chat id, nothing is lost, nothing is given
  up, the round is ``ok``; the conversation moves (the queued message is answered in the new
  chat with the history, and so is the next message from the supergroup).
* A deleted topic: the reply stops after one failed write, logged once; the model stream is
  closed; the turn and its round are ``undelivered``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from orchestrator.store import Store
from tests.peers.provider_server import Reply
from tests.peers.telegram_wire import THREAD_NOT_FOUND
from tests.pipeline import sse
from tests.telegram_harness import Bot, reply, running_bot, text_stream

GROUP = -500
SUPERGROUP = -1001234567890
FORUM = -1009876543210
MENTION = "@relay_test_bot "
_WRITES = ("sendmessage", "editmessagetext", "deletemessage")


def _slow_words(count: int, delay_secs: float = 0.05) -> tuple[Reply, str]:
    """An answer of ``count`` words, one every ``delay_secs``; and its text."""
    events = [{"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]} for i in range(count)]
    body, cuts = b"", []
    for event in events:
        body += sse(event)
        cuts.append(len(body))
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body += sse(finish, "[DONE]")
    text = " ".join(f"w{i}" for i in range(count))
    return Reply(body=body, cuts=cuts, delay_secs=delay_secs), text


def _user_texts(request_json: dict[str, object]) -> list[str]:
    messages = request_json["messages"]
    assert isinstance(messages, list)
    return [m["content"].removeprefix(MENTION) for m in messages if m["role"] == "user"]


def _writes(bot: Bot, chat_id: int) -> list[str]:
    return [
        c.method for c in bot.peer.calls if c.chat_id == chat_id and c.method.lower() in _WRITES
    ]


async def _finished(bot: Bot, count: int, within: float = 30.0) -> None:
    with anyio.fail_after(within):
        await bot.channel.wait_replies(count)


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_a_group_that_becomes_a_supergroup_mid_answer_gets_the_rest_there(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    story, text = _slow_words(60)
    replies = [
        story,
        reply(text_stream(["Queued ", "answer."])),
        reply(text_stream(["Third ", "answer."])),
    ]
    caplog.set_level(logging.INFO)
    async with running_bot(tmp_path, replies, mode=mode) as bot:
        bot.peer.inject_message(GROUP, MENTION + "tell a story", chat_type="group")
        if mode == "partial":  # mid-answer: a draft shows in the group
            await bot.peer.wait_for(lambda: bool(bot.peer.texts(GROUP)), 15)
        else:
            await bot.peer.wait_for(lambda: bool(bot.provider.requests), 15)
        bot.peer.inject_message(GROUP, MENTION + "and then?", chat_type="group")
        with anyio.fail_after(5):
            while not bot.daemon.store.waiting():  # noqa: ASYNC110 - until it is queued
                await anyio.sleep(0.02)
        bot.peer.migrate_chat(GROUP, SUPERGROUP)
        await _finished(bot, 2)
        bot.peer.inject_message(SUPERGROUP, MENTION + "one more", chat_type="supergroup")
        await _finished(bot, 3)
    answers = bot.peer.texts(SUPERGROUP)
    assert answers[-2:] == ["Queued answer.", "Third answer."]
    shown = "".join(answers[:-2]) if mode != "partial" else answers[0]
    assert shown.split() == text.split()  # the whole story, in the supergroup
    group_texts = bot.peer.texts(GROUP)
    assert all(text.startswith(t.strip()) for t in group_texts)  # at most an early draft
    # Each later request holds the conversation's history, moved with the chat.
    assert [_user_texts(r.json) for r in bot.provider.requests] == [
        ["tell a story"],
        ["tell a story", "and then?"],
        ["tell a story", "and then?", "one more"],
    ]
    assert not [r for r in caplog.records if "gave up" in r.getMessage()]
    store = Store(tmp_path / "relaybot.db")
    assert [r.outcome for r in store.rounds()] == ["ok", "ok", "ok"]
    assert [r.chat_id for r in store.rounds()][1:] == [str(SUPERGROUP)] * 2
    assert store.history("tg", str(GROUP)) == []
    assert len(store.history("tg", str(SUPERGROUP))) == 6
    assert store.waiting() == []
    # Exactly one write was refused with the migration per message of the old chat.
    migrated = [c for c in bot.peer.calls if c.error and "upgraded to a supergroup" in c.error]
    assert 1 <= len(migrated) <= 2 and all(c.chat_id == GROUP for c in migrated)


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_a_topic_deleted_mid_answer_stops_the_reply_after_one_failure(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    story, _ = _slow_words(200)
    caplog.set_level(logging.INFO)
    async with running_bot(tmp_path, [story], mode=mode) as bot:
        bot.peer.inject_message(FORUM, MENTION + "a story", chat_type="supergroup", topic_id=7)
        if mode == "partial":
            await bot.peer.wait_for(lambda: bool(bot.peer.texts(FORUM)), 15)
        else:
            await bot.peer.wait_for(lambda: bool(bot.provider.requests), 15)
        bot.peer.delete_topic(FORUM, 7)
        await _finished(bot, 1, within=40)
    failed = [c for c in bot.peer.calls if c.error == THREAD_NOT_FOUND.description]
    writes_after = [
        c
        for c in bot.peer.calls
        if c.chat_id == FORUM and failed and c.at > failed[0].at and c.method != "getUpdates"
    ]
    assert len(failed) == 1 and writes_after == []
    story_request = bot.provider.requests[0]
    assert story_request.client_closed  # the model work stopped once the topic was gone
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if "message thread not found" in m.lower()]) == 1
    assert not [m for m in lines if "gave up" in m]
    assert any("undelivered" in m and "reply in tg" in m for m in lines)
    rounds = Store(tmp_path / "relaybot.db").rounds()
    assert [r.outcome for r in rounds] == ["undelivered"]
