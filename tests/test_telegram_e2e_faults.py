"""Telegram end to end through ``Daemon.run`` when the network pushes back (issue #4; architecture
§3, §4, §7; cases C15, C18): flood control, an edit answered 12 s after it landed, secrets split
across deltas and messages, and ``relaybot run`` with a token the server refuses. Each reply test
ends with :func:`assert_chat_invariants`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from channels.telegram.format import markdown_to_telegram
from tests.peers.provider_server import Reply
from tests.peers.telegram import ApiError, TelegramBotApiServer
from tests.telegram_harness import (
    CHAT,
    Bot,
    assert_split_exactly,
    pieces_of,
    reply,
    running_bot,
    text_stream,
    tool_call_stream,
    words,
)

REPO = Path(__file__).resolve().parents[1]
STATUS = "⏳ current_time…"


def timed(stream: tuple[bytes, list[int]], gaps: list[float]) -> Reply:
    """A reply whose piece ``i`` (delta ``i``; the last piece ends the stream) is written
    ``gaps[i]`` seconds after the previous one."""
    body, cuts = stream
    assert len(gaps) == len(cuts) + 1
    return Reply(body=body, cuts=cuts, pauses=dict(enumerate(gaps)))


# -- C15: flood control, with the case's own numbers ----------------------------------------


async def test_c15_flood_control_with_the_case_numbers(tmp_path: Path) -> None:
    """C15: interval 800 ms; the 3rd edit gets 429 ``retry_after: 9``; 20 more deltas arrive
    within 5 s; the stream ends 6 s after that 429. No write to the chat (typing included)
    until 9 s after the 429 answer; then one edit with the newest, final text, formatted;
    identical text is never sent again; the answer is delivered once."""
    before = [words("first", 300)] + [f" early{i} " + "x" * 50 for i in range(13)]
    during = [f" late{i} " + "y" * 50 for i in range(19)] + [" That is **all**."]
    # The 3rd edit comes about 3 × 0.8 s after the first send, ~2.4 s into the stream: the 20
    # later deltas arrive within 5 s of the 429 and the stream ends ~6 s after it.
    gaps = [0.0] + [0.2] * 13 + [0.25] * 20 + [0.8]
    async with running_bot(
        tmp_path, [timed(text_stream(before + during), gaps)], interval_ms=800
    ) as bot:
        bot.fail("editMessageText", call=3, error=ApiError.flood(9))
        await bot.ask("flood", within=30)
    bot.check()
    edits = bot.peer.calls_to("editMessageText", CHAT)
    flood = edits[2]
    assert flood.status == 429 and flood.answered_at is not None
    request = bot.provider.requests[0]
    assert request.ended_at is not None and request.ended_at < flood.answered_at + 9, (
        "scenario: the stream must end during the flood wait"
    )
    after = [c for c in bot.peer.calls if c.chat_id == CHAT and c.at > flood.at]
    assert after and all(c.at >= flood.answered_at + 9 for c in after)
    writes_after = [c for c in after if c.method != "sendChatAction"]
    assert [c.method for c in writes_after] == ["editMessageText"]
    [final] = writes_after
    text = "".join(before + during)
    assert final.status == 200 and "entities" in final.params
    assert final.params["text"] != flood.params["text"]
    [message] = bot.peer.messages(CHAT)
    assert message.text == markdown_to_telegram(text).text
    assert {"type": "bold", "offset": message.text.index("all"), "length": 3} in message.entities
    assert len(bot.peer.calls_to("sendMessage", CHAT)) == 1


# -- an edit answered 12 s after it landed ----------------------------------------------------


@pytest.mark.parametrize("which", ["preview", "final"])
async def test_edit_answered_12_s_after_it_landed_is_retried_never_resent(
    tmp_path: Path, which: str
) -> None:
    """The peer applies the edit and answers 12 s later; the client gives up first (its read
    timeout is 1 s) without knowing whether it landed. The engine retries the edit (the same
    text when nothing newer came: the server finds it unchanged, which is success) and never
    sends a second message."""
    if which == "final":  # one preview send, then the final edit is the first edit
        deltas_ = [words("held", 300), " and **done**."]
        provider_reply = timed(text_stream(deltas_), [0.0, 0.5, 0.0])
    else:
        deltas_ = [words("grow", 300)] + [f" more{i}" + "z" * 30 for i in range(12)]
        provider_reply = reply(text_stream(deltas_), delay_secs=0.1)
    async with running_bot(tmp_path, [provider_reply]) as bot:
        bot.peer.delay("editMessageText", call=1, seconds=12)
        await bot.ask("slow server", within=30)
    bot.check()
    edits = bot.peer.calls_to("editMessageText", CHAT)
    assert edits[0].abandoned  # the client went away before the answer
    assert len(edits) >= 2
    assert len(bot.peer.calls_to("sendMessage", CHAT)) == 1
    assert all(len(state) == 1 for state in bot.peer.states(CHAT))  # never a duplicate
    assert bot.peer.texts(CHAT) == [markdown_to_telegram("".join(deltas_)).text]
    if which == "final":
        assert edits[1].params == edits[0].params  # the same edit again, not a new one
        assert edits[1].error is not None and "not modified" in edits[1].error


async def test_send_answered_12_s_after_it_landed_is_not_sent_again(tmp_path: Path) -> None:
    """``off``: the one message of the answer is applied and answered 12 s later; the client
    gives up after 1 s. The send may have landed, so it is never repeated."""
    deltas_ = [words("whole", 300), " and **done**."]
    async with running_bot(tmp_path, [reply(text_stream(deltas_))], mode="off") as bot:
        bot.peer.delay("sendMessage", call=1, seconds=12)
        await bot.ask("slow server", within=30)
    bot.check()
    [send] = bot.peer.calls_to("sendMessage", CHAT)
    assert send.abandoned
    assert bot.peer.texts(CHAT) == [markdown_to_telegram("".join(deltas_)).text]


async def test_draft_send_answered_12_s_after_it_landed_is_continued_never_repeated(
    tmp_path: Path,
) -> None:
    """``partial``: the first draft's send is applied and answered 12 s later; the client gives
    up after 1 s, without a message id. The message is assumed landed and holds that text for
    good (it cannot be edited); the reply goes on after it in a second message. Every state the
    chat showed is the answer's text up to some point, each part once: no duplicate, and in the
    end the whole answer."""
    deltas_ = [words("lead", 40)] + [f" more{i}" + "z" * 30 for i in range(12)] + [" done."]
    text = "".join(deltas_)
    async with running_bot(tmp_path, [reply(text_stream(deltas_), delay_secs=0.1)]) as bot:
        bot.peer.delay("sendMessage", call=1, seconds=12)
        await bot.ask("slow server", within=30)
    bot.check()
    sends = bot.peer.calls_to("sendMessage", CHAT)
    assert sends[0].abandoned and len(sends) == 2
    first, second = bot.peer.texts(CHAT)
    assert first == sends[0].params["text"] and text.startswith(first)
    assert second == markdown_to_telegram(text[len(first) :]).text
    for state in bot.peer.states(CHAT):
        assert text.startswith("".join(state))  # never a part twice
    assert all(c.params["message_id"] != 1 for c in bot.peer.calls_to("editMessageText", CHAT))


# -- flood wait in the middle of narration before a tool call ------------------------------

NARRATION = " ".join(f"narr{i}" for i in range(110)) + "."
ANSWER = "The time in UTC is what the tool said, to the second."


@pytest.mark.parametrize("mode", ["partial", "multi_message"])
async def test_flood_wait_in_narration_before_a_tool_call_loses_no_text(
    tmp_path: Path, mode: str
) -> None:
    """A 429 (retry_after 1 s) while the narration streams; the narration ends, the tool runs
    and the answer starts during the wait. Nothing is written during the wait; afterwards the
    newest text goes out and nothing of the narration or the answer is lost."""
    replies = [
        reply(tool_call_stream(pieces_of(NARRATION, 40)), delay_secs=0.05),
        reply(text_stream(pieces_of(ANSWER, 8)), delay_secs=0.03),
    ]
    method, call = ("editMessageText", 2) if mode == "partial" else ("sendMessage", 1)
    async with running_bot(tmp_path, replies, mode=mode) as bot:
        bot.fail(method, call=call, error=ApiError.flood(1))
        await bot.ask("time?")
    bot.check()
    [flood] = [c for c in bot.writes() if c.status == 429]
    assert flood.answered_at is not None
    assert all(
        c.at >= flood.answered_at + 1
        for c in bot.peer.calls
        if c.chat_id == CHAT and c.at > flood.at
    )
    if mode == "partial":
        assert bot.peer.texts(CHAT) == [NARRATION + "\n\n" + ANSWER]
        assert flood.params["text"] in NARRATION  # it hit the narration mid-way
    else:
        assert bot.peer.texts(CHAT) == [NARRATION, ANSWER]
    assert len(bot.provider.requests) == 2  # the tool round ran


# -- C18: a key split across deltas and messages -------------------------------------------

KEY = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"
C18_DELTAS = ["key: sk-ant-api03-", "AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH", "IIIIJJJJ done"]
MARKER = "[REDACTED:anthropic_key]"


def assert_never_shown(bot: Bot, secret: str) -> None:
    """No state a user could see (every applied send and edit) holds any 5-character window
    of ``secret``; nor does any write the bot asked for, applied or not."""
    windows = {secret[i : i + 5] for i in range(len(secret) - 4)}
    texts = [text for state in bot.peer.states(CHAT) for text in state]
    texts += [c.params["text"] for c in bot.writes() if "text" in c.params]
    assert texts
    for text in texts:
        leaked = [w for w in windows if w in text]
        assert not leaked, f"{leaked[0]!r} shown in {text!r}"


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_c18_key_split_across_deltas_is_never_shown(tmp_path: Path, mode: str) -> None:
    assert "".join(C18_DELTAS) == f"key: {KEY} done"
    async with running_bot(
        tmp_path, [reply(text_stream(C18_DELTAS), delay_secs=0.1)], mode=mode
    ) as bot:
        await bot.ask("show me the key")
    bot.check()
    assert_never_shown(bot, KEY)
    assert bot.peer.texts(CHAT) == [f"key: {MARKER} done"]


@pytest.mark.parametrize(
    ("mode", "key_at"),
    [("partial", 3980), ("partial", 4076), ("multi_message", 4076), ("off", 4076)],
)
async def test_c18_split_between_two_messages_inside_the_key(
    tmp_path: Path, mode: str, key_at: int
) -> None:
    """The text outgrows a message right where the key is (``key_at``: where ``sk-`` starts,
    so the key spans 3996, past which a partial draft is frozen, or 4096, the limit). The
    window holds the key until it is masked whole, so the cut falls before, after or around
    the marker, never inside the key."""
    lead = words("fill", key_at)[: key_at - 6] + " "
    deltas_ = [*pieces_of(lead, 200), *C18_DELTAS, " " + words("after", 400)]
    text = "".join(deltas_)
    assert text.index(KEY) == key_at
    async with running_bot(
        tmp_path, [reply(text_stream(deltas_), delay_secs=0.02)], mode=mode
    ) as bot:
        await bot.ask("a long one with a key")
    bot.check()
    assert_never_shown(bot, KEY)
    texts = bot.peer.texts(CHAT)
    assert_split_exactly(texts, text.replace(KEY, MARKER))
    assert sum(t.count(MARKER) for t in texts) == 1


async def test_c18_key_split_across_a_tool_round_in_multi_message(tmp_path: Path) -> None:
    """``AKIAABCDEFGH`` ends one turn's text and ``IJKLMNOP`` starts the next: the window sees
    the rounds' raw text as one, so nothing of the key is ever shown and the marker appears."""
    secret = "AKIAABCDEFGHIJKLMNOP"
    replies = [
        reply(tool_call_stream(["Checking the key ", "AKIAABCDEFGH"]), delay_secs=0.05),
        reply(text_stream(["IJKLMNOP", " is the key."]), delay_secs=0.05),
    ]
    async with running_bot(tmp_path, replies, mode="multi_message") as bot:
        await bot.ask("key?")
    bot.check()
    assert_never_shown(bot, secret)
    assert [t.strip() for t in bot.peer.texts(CHAT)] == [
        "Checking the key",
        "[REDACTED:aws_access_key] is the key.",
    ]


# -- spacing when the hook is slow --------------------------------------------------------


@pytest.mark.parametrize("mode", ["partial", "off"])
async def test_a_slow_hook_does_not_squeeze_the_next_write(tmp_path: Path, mode: str) -> None:
    """The hook runs on the final text when the answer ends, before the first final write;
    it takes 0.4 s (longer than the interval). The final text fills two messages: the second
    final write must still come an interval after the first one, as the chat sees them."""
    text = "**Bold** " + words("one", 4060) + "\n\n" + words("two", 300)
    body, cuts = text_stream(pieces_of(text, 500))
    idle_then_end = Reply(body=body, cuts=cuts, delay_secs=0.02, pauses={len(cuts): 0.5})
    async with running_bot(
        tmp_path, [idle_then_end], mode=mode, hook="tests.telegram_harness:slow_hook"
    ) as bot:
        await bot.ask("hook")
    assert len(bot.peer.messages(CHAT)) == 2
    bot.check()


# -- relaybot run with a refused token ------------------------------------------------------


async def test_run_with_a_refused_token_exits_2_with_one_line(tmp_path: Path) -> None:
    """``relaybot run`` as a process against the peer, whose token differs: exit 2 at start (a
    config error: systemd's ``RestartPreventExitStatus=2`` ends the restarts),
    one line naming the channel, no traceback, no token."""
    token = "9999:refused-by-the-peer"
    async with TelegramBotApiServer() as peer:
        config = tmp_path / "bot.yaml"
        config.write_text(
            f"""\
providers:
  main: {{kind: openai_chat, base_url: "http://127.0.0.1:9/v1", api_key: k, model: m}}
agent:
  providers: [main]
channels:
  tg: {{kind: telegram, token: "{token}", base_url: "{peer.base_url}"}}
storage:
  path: state/bot.db
server:
  listen: null
"""
        )
        env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config)],
                env=env,
                cwd=tmp_path,
                check=False,
            )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    lines = [line for line in err.splitlines() if line.startswith("relaybot: channel tg:")]
    assert lines == ["relaybot: channel tg: cannot start: invalid token (401 Unauthorized)"]
    assert "Traceback" not in err and token not in err
    assert peer.calls[0].method == "getMe" and peer.calls[0].status == 401
