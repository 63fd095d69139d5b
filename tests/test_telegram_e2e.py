"""Telegram end to end through ``Daemon.run`` (issue #4; architecture §3; cases C12–C14): the local
Bot API peer receives every write python-telegram-bot makes for the real daemon, whose provider is a
local Chat Completions server. Each test ends with :func:`assert_chat_invariants`.

Real sockets, real time: intervals are scaled down (150 ms instead of Telegram's 1000 ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from channels.base import utf16_len
from channels.telegram.format import markdown_to_telegram
from tests.peers.provider_server import Reply
from tests.peers.telegram import ApiError, Call, TelegramBotApiServer
from tests.peers.telegram_wire import NOT_MODIFIED
from tests.telegram_harness import (
    CHAT,
    assert_chat_invariants,
    assert_split_exactly,
    pieces_of,
    reply,
    running_bot,
    text_stream,
    tool_call_stream,
    words,
)

NARRATION = "Let me check the time in UTC for you before I answer."
ANSWER = "It is **morning** in UTC right now, read from the clock just this moment."
STATUS = "⏳ current_time…"


def _paragraphs(total: int) -> str:
    """``total`` ASCII characters of words, a paragraph break (``\\n\\n``) ending every 800."""
    paragraph = "".join(f"p{{i}}w{j:04d} " for j in range(99)) + "p{i}end.\n\n"
    assert len(paragraph.format(i=0)) == 800
    return "".join(paragraph.format(i=i) for i in range(total // 800 + 1))[:total]


# -- the invariants helper itself ----------------------------------------------------------


def _calls(*specs: tuple[str, float, str, dict[str, Any]]) -> TelegramBotApiServer:
    """A peer (not started) whose record holds the given calls: (method, at, text, extra)."""
    peer = TelegramBotApiServer()
    for method, at, text, extra in specs:
        params: dict[str, Any] = {"chat_id": CHAT, "text": text}
        if method == "editMessageText":
            params["message_id"] = 1
        call = Call(method, params, at, **{"answered_at": at + 0.01, "status": 200, **extra})
        if method == "sendMessage":
            call.result = {"message_id": 1}
        peer.calls.append(call)
    return peer


def test_invariants_catch_close_writes_identical_edits_and_unscheduled_refusals() -> None:
    ok = _calls(("sendMessage", 0.0, "a", {}), ("editMessageText", 0.2, "ab", {}))
    assert_chat_invariants(ok, CHAT, 150)
    close = _calls(("sendMessage", 0.0, "a", {}), ("editMessageText", 0.1, "ab", {}))
    with pytest.raises(AssertionError, match="started 100 ms after"):
        assert_chat_invariants(close, CHAT, 150)
    same = _calls(("sendMessage", 0.0, "a", {}), ("editMessageText", 0.2, "a", {}))
    with pytest.raises(AssertionError, match="identical consecutive edit"):
        assert_chat_invariants(same, CHAT, 150)
    refused = {"status": 429, "error": ApiError.flood(1).description}
    flood = _calls(("sendMessage", 0.0, "a", {}), ("editMessageText", 0.2, "ab", refused))
    with pytest.raises(AssertionError, match="refused"):
        assert_chat_invariants(flood, CHAT, 150)
    assert_chat_invariants(flood, CHAT, 150, injected=[ApiError.flood(1)])


def test_invariants_let_a_timed_out_edit_be_retried() -> None:
    lost = {"status": None, "abandoned": True, "answered_at": None}
    unchanged = {"status": 400, "error": NOT_MODIFIED.description}
    retried = _calls(
        ("sendMessage", 0.0, "a", {}),
        ("editMessageText", 0.2, "ab", lost),
        ("editMessageText", 1.5, "ab", unchanged),
        ("editMessageText", 1.7, "abc", {}),
    )
    assert_chat_invariants(retried, CHAT, 150)
    twice = _calls(
        ("sendMessage", 0.0, "a", {}),
        ("editMessageText", 0.2, "ab", lost),
        ("editMessageText", 1.5, "ab", unchanged),
        ("editMessageText", 1.7, "ab", unchanged),
    )
    with pytest.raises(AssertionError, match="identical consecutive edit"):
        assert_chat_invariants(twice, CHAT, 150)


# -- C12 ----------------------------------------------------------------------------------


async def test_c12_short_answer_is_one_message_without_any_edit(tmp_path: Path) -> None:
    """C12: deltas "Hello", " world". The text is shorter than the redaction holdback, so it
    arrives whole at the end: one send, no edit at all (so none the server finds unchanged)."""
    async with running_bot(tmp_path, [reply(text_stream(["Hello", " world"]))]) as bot:
        await bot.ask("hi")
    bot.check()
    assert bot.peer.texts(CHAT) == ["Hello world"]
    assert [c.method for c in bot.writes()] == ["sendMessage"]
    assert bot.peer.states(CHAT) == [("Hello world",)]


async def test_c12_long_plain_answer_never_repeats_an_edit(tmp_path: Path) -> None:
    """A long plain answer: the draft shows all but the held tail; the final (formatted) text
    renders like the plain one, so the last edit completes it and nothing repeats it."""
    text = " ".join(f"plain{i}" for i in range(80))
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(text, 60)), delay_secs=0.03)]
    ) as bot:
        await bot.ask("hi")
    bot.check()
    assert bot.peer.texts(CHAT) == [text]
    edits = bot.peer.calls_to("editMessageText", CHAT)
    assert edits and edits[-1].params["text"] == text
    assert all(c.status == 200 for c in bot.writes())


# -- C13 and long answers -----------------------------------------------------------------


C13_TEXT = _paragraphs(6000)


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_c13_six_thousand_characters_split_at_a_paragraph(tmp_path: Path, mode: str) -> None:
    """C13: 30 deltas of 200 ASCII characters, a paragraph break every 800. Message 1 is
    frozen at a paragraph boundary within 4096, message 2 continues, together exactly the
    6000 characters; no write is ever refused as too long."""
    assert len(C13_TEXT) == 6000
    deltas = pieces_of(C13_TEXT, 200)
    assert len(deltas) == 30
    async with running_bot(
        tmp_path, [reply(text_stream(deltas), delay_secs=0.03)], mode=mode
    ) as bot:
        await bot.ask("write a lot")
    bot.check()
    texts = bot.peer.texts(CHAT)
    assert_split_exactly(texts, C13_TEXT)
    assert texts[0] == C13_TEXT[:4000].rstrip()  # five whole paragraphs
    assert not any(c.error for c in bot.writes())


EMOJI_TEXTS = {
    "spaced": "😀🎉🚀 " * 1428 + "✅🎉!",  # 7 units a group
    "solid": "😀" * 5000,  # no boundary at all: hard cuts
}


@pytest.mark.parametrize(
    ("mode", "kind"),
    [("partial", "spaced"), ("multi_message", "spaced"), ("off", "spaced"), ("partial", "solid")],
)
async def test_ten_thousand_utf16_units_of_emoji(tmp_path: Path, mode: str, kind: str) -> None:
    """Emoji are two UTF-16 units each: the limit is counted in UTF-16 units, a cut never
    splits a surrogate pair, every message is accepted and the concatenation is exact."""
    text = EMOJI_TEXTS[kind]
    assert utf16_len(text) == 10_000
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(text, 300)), delay_secs=0.02)], mode=mode
    ) as bot:
        await bot.ask("emoji please")
    bot.check()
    texts = bot.peer.texts(CHAT)
    assert len(texts) == 3
    assert_split_exactly(texts, text)
    assert not any(c.error for c in bot.writes())


# -- C14 ----------------------------------------------------------------------------------

C14_DELTAS = ["All timestamps are ", "*UTC", "* and ", "```py\nx = 1", "\n```"]
C14_LEAD = " ".join(f"lead{i}" for i in range(30)) + "\n\n"
C14_TAIL = "\n\n" + " ".join(f"tail{i}" for i in range(30))


async def test_c14_markup_mid_stream_previews_plain_final_formatted(tmp_path: Path) -> None:
    """C14: the markup arrives in pieces, with text around it so that previews show it half
    done (an unclosed ``*``, an open fence). Every preview is accepted (plain text); the final
    edit is formatted, as entities: italic UTC. (The ```` ```py ```` of the case is not at a
    line start, so by CommonMark the lone closing ```` ``` ```` opens a code block.)"""
    deltas = [*pieces_of(C14_LEAD, 40), *C14_DELTAS, *pieces_of(C14_TAIL, 20)]
    async with running_bot(
        tmp_path, [reply(text_stream(deltas), delay_secs=0.06)], interval_ms=100
    ) as bot:
        await bot.ask("markup")
    bot.check()
    writes = bot.writes()
    assert all(c.status == 200 for c in writes)
    previews, final = writes[:-1], writes[-1]
    assert all("entities" not in c.params for c in previews)
    half_done = [c.params["text"] for c in previews]
    assert any(t.endswith(("*UTC", "*UTC* ", "x = 1")) or t.count("```") == 1 for t in half_done)
    assert "entities" in final.params
    [message] = bot.peer.messages(CHAT)
    assert message.text == markdown_to_telegram("".join(deltas)).text
    assert message.text.startswith(C14_LEAD.strip() + "\n\nAll timestamps are UTC and")
    assert {"type": "italic", "offset": message.text.index("UTC"), "length": 3} in (
        message.entities
    )


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_c14_a_parse_error_sends_only_that_message_plain(tmp_path: Path, mode: str) -> None:
    """A real "can't parse entities" on the first formatted write (of the first of two
    messages): that message is written again plain, markers as typed, an interval later (the
    invariants check the spacing); the second message is formatted; nothing is lost."""
    first = "**Part one** " + words("one", 4060) + "\n\n"
    second = "".join(C14_DELTAS) + "\n\n" + words("two", 200)
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(first + second, 500)), delay_secs=0.02)], mode=mode
    ) as bot:
        error = ApiError.cant_parse("Unsupported start tag")
        bot.injected.append(error)
        method = "editMessageText" if mode == "partial" else "sendMessage"  # m1 is a draft
        bot.peer.fail_first(method, where=lambda p: "entities" in p, error=error)
        await bot.ask("markup")
    bot.check()
    [refused] = [c for c in bot.writes() if c.error]
    assert refused.params["text"].startswith("Part one one0")  # rendered: no markers
    one, two = bot.peer.messages(CHAT)
    assert one.text.strip() == first.strip() and one.entities == ()
    assert two.text == markdown_to_telegram(second).text and two.entities


# -- the three stream modes with a tool round ---------------------------------------------


def _tool_then_answer() -> list[Reply]:
    return [
        reply(tool_call_stream(pieces_of(NARRATION, 12)), delay_secs=0.02),
        reply(text_stream(pieces_of(ANSWER, 10)), delay_secs=0.02),
    ]


async def test_partial_draft_shows_the_tool_status_then_the_whole_answer(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, _tool_then_answer()) as bot:
        await bot.ask("what time is it?")
    bot.check()
    [message] = bot.peer.messages(CHAT)
    assert message.text == NARRATION + "\n\n" + ANSWER.replace("**", "")
    assert any(e["type"] == "bold" for e in message.entities)
    states = [s[0] for s in bot.peer.states(CHAT)]
    assert f"{NARRATION}\n\n{STATUS}" in states  # the status was the last line
    assert len(bot.peer.calls_to("sendMessage", CHAT)) == 1
    second = bot.provider.requests[1].json["messages"]
    assert [m["role"] for m in second][-3:] == ["user", "assistant", "tool"]


async def test_multi_message_sends_one_message_per_model_turn(tmp_path: Path) -> None:
    async with running_bot(tmp_path, _tool_then_answer(), mode="multi_message") as bot:
        await bot.ask("what time is it?")
    bot.check()
    assert bot.peer.texts(CHAT) == [NARRATION, ANSWER.replace("**", "")]
    assert [c.method for c in bot.writes()] == ["sendMessage", "sendMessage"]
    assert not any(STATUS in "".join(s) for s in bot.peer.states(CHAT))
    assert bot.peer.calls_to("sendChatAction", CHAT)  # the tool ran under typing only


async def test_off_sends_one_message_at_the_end(tmp_path: Path) -> None:
    async with running_bot(tmp_path, _tool_then_answer(), mode="off") as bot:
        await bot.ask("what time is it?")
    bot.check()
    assert bot.peer.texts(CHAT) == [NARRATION + "\n\n" + ANSWER.replace("**", "")]
    assert [c.method for c in bot.writes()] == ["sendMessage"]
    assert bot.peer.messages(CHAT)[0].entities  # formatted
    assert bot.peer.calls_to("sendChatAction", CHAT)
