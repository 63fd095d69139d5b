"""Conversations through the Telegram wire server (architecture §3 "Stop", thread ids; §5 waiting
messages): the real daemon, the Bot API peer and a local Chat Completions server, real time.

* ``/stop`` mid-answer closes the provider connection at once, keeps the text shown so far with
  ``⏹ Stopped.`` after it, records the round as ``stopped`` and runs the queued message next.
* A forum topic is a conversation of its own, and every write of its reply carries the topic.
* Messages a previous run left waiting are answered at start, a stale one gets a notice.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from channels.base import InboundMessage
from orchestrator.store import Store
from tests.peers.provider_server import Reply
from tests.pipeline import sse
from tests.telegram_harness import CHAT, reply, running_bot, text_stream

STOPPED = "⏹ Stopped."


def _endless_words(count: int = 400) -> Reply:
    """An answer of ``count`` words, one every 50 ms (20 s: it is stopped long before)."""
    events = [{"choices": [{"index": 0, "delta": {"content": f"word{i} "}}]} for i in range(count)]
    body, cuts = b"", []
    for event in events:
        body += sse(event)
        cuts.append(len(body))
    return Reply(body=body, cuts=cuts, delay_secs=0.05)


def _topic(params: dict[str, object]) -> int | None:
    """``message_thread_id`` as sent (python-telegram-bot posts a form: numbers as text)."""
    value = params.get("message_thread_id")
    return None if value is None else int(str(value))


def _user_texts(request_json: dict[str, object]) -> list[str]:
    messages = request_json["messages"]
    assert isinstance(messages, list)
    return [m["content"] for m in messages if m["role"] == "user"]


async def test_stop_mid_answer_closes_the_stream_keeps_the_text_and_runs_the_next(
    tmp_path: Path,
) -> None:
    second = reply(text_stream(["The second ", "answer."]))
    async with running_bot(tmp_path, [_endless_words(), second]) as bot:
        bot.peer.inject_message(CHAT, "tell me a long story")
        # Mid-answer: the draft shows some of the story.
        await bot.peer.wait_for(lambda: any("word20" in t for t in bot.peer.texts(CHAT)), 15)
        bot.peer.inject_message(CHAT, "and then?")
        with anyio.fail_after(5):
            while not bot.daemon.store.waiting():  # noqa: ASYNC110 - until the daemon queued it
                await anyio.sleep(0.02)
        shown = bot.peer.texts(CHAT)[0]
        stopped_at = time.monotonic()
        bot.peer.inject_message(CHAT, "/stop")
        story = bot.provider.requests[0]
        with anyio.fail_after(5):
            await story.wait_ended()
        assert story.client_closed  # we closed the connection, the server did not finish
        assert story.ended_at is not None and story.ended_at - stopped_at < 1.0
        with anyio.fail_after(20):
            await bot.channel.wait_replies(3)  # the story, /stop, the queued message
    # (No bot.check(): the queued reply starts right after the stopped one, and the spacing of
    # writes across two replies of one chat is not kept by the per-reply delivery engine.)
    first, answer = bot.peer.texts(CHAT)
    assert first.endswith(f"\n\n{STOPPED}")
    kept = first.removesuffix(f"\n\n{STOPPED}")
    full = " ".join(f"word{i}" for i in range(400))
    assert kept.startswith(shown.rstrip()) and full.startswith(kept)
    assert answer == "The second answer."
    assert len(bot.provider.requests) == 2
    # The stopped turn is in the history: the user's question and what was said.
    history = bot.provider.requests[1].json
    assert _user_texts(history) == ["tell me a long story", "and then?"]
    assistant = [m["content"] for m in history["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 1 and assistant[0].startswith(kept.split(" word")[0])
    store = Store(tmp_path / "relaybot.db")  # the daemon closed its own
    assert [r.outcome for r in store.rounds()] == ["stopped", "ok"]
    assert store.waiting() == []


async def test_stop_without_a_running_answer_says_so(tmp_path: Path) -> None:
    async with running_bot(tmp_path, [reply(text_stream(["unused"]))]) as bot:
        await bot.ask("/stop")
    assert bot.peer.texts(CHAT) == ["Nothing to stop."]
    assert bot.provider.requests == []


async def test_help_lists_stop(tmp_path: Path) -> None:
    async with running_bot(tmp_path, [reply(text_stream(["unused"]))]) as bot:
        await bot.ask("/help")
    assert "/stop" in bot.peer.texts(CHAT)[0]


async def test_a_forum_topic_is_its_own_conversation_and_gets_every_write(tmp_path: Path) -> None:
    replies = [
        reply(text_stream(["In topic ", "seven."])),
        reply(text_stream(["In topic ", "eight."])),
        reply(text_stream(["Outside ", "any topic."])),
    ]
    async with running_bot(tmp_path, replies) as bot:
        for topic, text in ((7, "first in 7"), (8, "first in 8"), (None, "no topic")):
            before = bot.channel.replies_finished
            bot.peer.inject_message(CHAT, text, topic_id=topic)
            with anyio.fail_after(20):
                await bot.channel.wait_replies(before + 1)
    sends = bot.peer.calls_to("sendMessage", CHAT)
    assert [(_topic(c.params), c.params["text"]) for c in sends] == [
        (7, "In topic seven."),
        (8, "In topic eight."),
        (None, "Outside any topic."),
    ]
    assert [m.raw.get("message_thread_id") for m in bot.peer.messages(CHAT)] == [7, 8, None]
    typing = [_topic(c.params) for c in bot.peer.calls_to("sendChatAction", CHAT)]
    assert 7 in typing and 8 in typing and set(typing) <= {7, 8, None}
    # Each request holds only its own conversation's history.
    assert [_user_texts(r.json) for r in bot.provider.requests] == [
        ["first in 7"],
        ["first in 8"],
        ["no topic"],
    ]
    rounds = Store(tmp_path / "relaybot.db").rounds()
    assert [r.thread_id for r in rounds] == ["7", "8", None]


async def test_waiting_messages_of_a_previous_run_are_answered_or_noticed(
    tmp_path: Path,
) -> None:
    earlier = Store(tmp_path / "relaybot.db")
    old = InboundMessage("tg", str(CHAT), "111", "@alice", "an old question", thread_id=None)
    fresh = InboundMessage("tg", str(CHAT), "111", "@alice", "a recent question")
    earlier.add_waiting(old, received_at=time.time() - 3600)
    earlier.add_waiting(fresh, received_at=time.time() - 60)
    earlier.close()
    async with running_bot(tmp_path, [reply(text_stream(["A recent ", "answer."]))]) as bot:
        with anyio.fail_after(20):
            await bot.channel.wait_replies(1)
    notice, answer = bot.peer.texts(CHAT)
    assert "was not answered before the bot restarted" in notice
    assert answer == "A recent answer."
    assert [_user_texts(r.json) for r in bot.provider.requests] == [["a recent question"]]
    assert Store(tmp_path / "relaybot.db").waiting() == []
