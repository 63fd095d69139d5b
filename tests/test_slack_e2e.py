"""The Slack channel end to end: the real daemon, unmodified slack_sdk, the local Slack peer
(architecture §3, §8). Native streaming, the edit path, threads (two answered at once),
mention-only channels, a provider restart mid-stream."""

from __future__ import annotations

import itertools
from pathlib import Path

from channels.slack.format import mrkdwn
from orchestrator.policy.catalogue import Redactor
from tests.peers.provider_server import Reply
from tests.peers.slack import BOT_ID, SlackServer
from tests.pipeline import sse
from tests.slack_harness import BACKUP_PATH, running_bot, started_channel
from tests.telegram_harness import reply, text_stream
from tests.test_fallback import A_TEXT, B_TEXT
from tests.test_policy_telegram_e2e import pieces, url_answer

SECRET = "QXZhunter2"


async def test_a_streamed_answer_appends_exactly_the_redacted_answer(tmp_path: Path) -> None:
    answer = url_answer("postgres://admin:QXZhunter2@db.internal:5432/app", "middle")
    answer += "\n\n" + " ".join(f"word{i}" for i in range(60))
    async with running_bot(
        tmp_path, [reply(text_stream(pieces(answer, 7)), delay_secs=0.01)]
    ) as bot:
        asked = await bot.ask("how do I connect?")
    peer = bot.peer
    [message] = bot.answers(peer.dm_channel)
    assert message.thread_ts == asked  # a top-level DM message starts the thread
    assert not message.streaming
    assert len(message.appends) > 2
    assert all(SECRET not in piece and "hunter2" not in piece for piece in message.appends)
    assert "".join(message.appends).rstrip() == Redactor().redact(answer).rstrip()
    assert [r.method for r in peer.calls("chat.startStream", "chat.stopStream")] == [
        "chat.startStream",
        "chat.stopStream",
    ]
    assert not peer.calls("chat.update")


async def test_the_edit_path_posts_and_updates_to_the_mrkdwn_answer(tmp_path: Path) -> None:
    answer = "Here is **bold** and a [link](https://example.org).\n\n" + "more " * 80
    async with running_bot(
        tmp_path, [reply(text_stream(pieces(answer, 9)), delay_secs=0.01)], native="off"
    ) as bot:
        asked = await bot.ask("format please")
    peer = bot.peer
    [message] = bot.answers(peer.dm_channel)
    assert message.thread_ts == asked
    assert message.text == mrkdwn(answer)
    assert "*bold*" in message.text and "<https://example.org|link>" in message.text
    assert peer.calls("chat.update") and not peer.calls("chat.startStream")


async def test_a_channel_answers_a_mention_once_in_its_thread(tmp_path: Path) -> None:
    answer = "Mentioned and answered, " + "once " * 40
    async with running_bot(
        tmp_path, [reply(text_stream(pieces(answer, 8)), delay_secs=0.01)]
    ) as bot:
        peer = bot.peer
        before = bot.channel.replies_finished
        await peer.inject_message("talking among ourselves", channel=peer.channel)
        asked = await bot.ask(f"<@{BOT_ID}> please answer", channel=peer.channel)
        thread_ts = await peer.inject_message("a reply in the thread, no mention",
                                              channel=peer.channel, thread_ts=asked)  # fmt: skip
        await peer.wait_until(lambda: bot.channel.replies_finished >= before + 3)
    assert thread_ts
    [message] = bot.answers(peer.channel)
    assert message.thread_ts == asked
    assert "".join(message.appends).rstrip() == answer.rstrip()
    [start] = peer.calls("chat.startStream")
    assert start.args["recipient_user_id"] == peer.user and start.args["recipient_team_id"]
    assert len(bot.provider.requests_to("/v1/chat/completions")) == 1


async def test_a_text_that_no_longer_extends_the_stream_stops_it_and_edits_the_message() -> None:
    """A restart (architecture §4 "Restart") rolls the draft back and it grows again with the
    new attempt's text: appended text cannot be taken back, so the stream is stopped and the
    message edited to the new text, never left showing the old half answer."""
    async with SlackServer() as peer, started_channel(peer) as (channel, inbox):
        asked = await peer.inject_message("weather?")
        await peer.wait_until(lambda: bool(inbox))
        await channel.answer_started(peer.dm_channel, asked, peer.user)
        ref = await channel.send_message(peer.dm_channel, "Provider A starts", thread_id=asked)
        await channel.edit_message(ref, "Provider A starts a careful")
        await channel.edit_message(ref, "Provider B")  # the restart
        await channel.edit_message(ref, "Provider B answers.", formatted=True)
        await channel.answer_finished(peer.dm_channel, asked, regenerate=False)
    [message] = peer.bot_messages(peer.dm_channel)
    assert message.appends == ["Provider A starts", " a careful"]
    assert not message.streaming and message.text == "Provider B answers."
    assert [r.method for r in peer.requests if r.method.startswith("chat.")] == [
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
        "chat.update",
        "chat.update",
    ]


async def test_auto_edits_instead_where_the_workspace_refuses_streaming(tmp_path: Path) -> None:
    answer = "Edited, not streamed: " + "word " * 60
    async with running_bot(
        tmp_path, [reply(text_stream(pieces(answer, 9)), delay_secs=0.01)]
    ) as bot:
        bot.peer.fail("chat.startStream", "feature_not_enabled")
        await bot.ask("stream if you can")
    peer = bot.peer
    [message] = bot.answers(peer.dm_channel)
    assert message.text == mrkdwn(answer) and not message.appends
    assert len(peer.calls("chat.startStream", ok=False)) == 1  # tried once, then edits
    assert peer.calls("chat.update")


async def test_two_threads_answered_at_once_keep_their_own_streams(tmp_path: Path) -> None:
    """The end of one thread's answer stops that thread's stream and Stop button only: the
    other thread's answer, still streaming in the same channel, keeps its native stream."""
    short = "Short and done: " + "quick " * 50
    long = "Long and still going: " + "slow " * 150
    replies = [
        reply(text_stream(pieces(short, 6)), delay_secs=0.03),
        reply(text_stream(pieces(long, 6)), delay_secs=0.04),
    ]
    async with running_bot(tmp_path, replies) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel
        before = bot.channel.replies_finished
        first = await peer.inject_message("a short one")
        second = await peer.inject_message("a long one")
        await peer.wait_until(lambda: bot.channel.replies_finished >= before + 2, within=30)
    answers = {m.thread_ts: m for m in bot.answers(dm)}
    assert set(answers) == {first, second}
    texts = {m.text.rstrip() for m in answers.values()}
    assert texts == {short.rstrip(), long.rstrip()}
    for message in answers.values():
        assert not message.streaming and message.edits == 0  # never fell back to chat.update
        assert "".join(message.appends) == message.text
    assert not peer.calls("chat.update")
    assert len(peer.calls("chat.startStream")) == len(peer.calls("chat.stopStream")) == 2
    stops = [m for m in peer.web.messages.values() if m.user != peer.user and m.blocks]
    regenerate = [m for m in stops if not m.deleted]
    assert sorted(m.thread_ts or "" for m in regenerate) == sorted([first, second])


async def test_an_announced_restart_ends_the_stream_and_shows_only_the_new_answer(
    tmp_path: Path,
) -> None:
    """Provider A streams, then dies; B serves the round (architecture §4 "Restart"), through
    the daemon. What A streamed cannot be taken back: the stream is stopped and the message at
    once edited to B's answer, so the chat ends showing B's alone, never A's half answer
    standing as if complete."""
    dies = _dies_after(A_TEXT * 4)
    async with running_bot(tmp_path, [dies], backup=[reply(text_stream([B_TEXT]))]) as bot:
        await bot.ask("weather?", within=30)
    peer, dm = bot.peer, bot.peer.dm_channel
    [message] = bot.answers(dm)
    assert message.appends[0].startswith("Provider A")  # A was streamed...
    assert (A_TEXT * 4).startswith("".join(message.appends))
    assert message.text == B_TEXT and not message.streaming  # ...and only B stands
    chat = [r for r in peer.requests if r.args.get("ts") == message.ts]
    assert [r.method for r in chat][-2:] == ["chat.stopStream", "chat.update"]
    assert len(bot.provider.requests_to(BACKUP_PATH)) == 1


def _dies_after(text: str) -> Reply:
    """A Chat Completions stream of ``text`` in pieces, then a broken body (the socket closes
    mid-event): the provider died after its text was shown."""
    events = [sse({"choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces(text, 40)]
    cuts = list(itertools.accumulate(len(e) for e in events))
    tail = b'data: {"choices":[{"index":0,"delta":{"content":" mor'
    return Reply(body=b"".join(events) + tail, cuts=cuts, delay_secs=0.02, abort=True)
