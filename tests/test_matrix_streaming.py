"""Matrix streaming through Synapse (issue 12; architecture §3; cases C17, C18): paragraphs in
``multi_message``, the edit cap and interval of one event, Synapse's default rate limits, a
restart mid-conversation, a secret split across paragraphs.

Real sockets, real time: intervals and counts are scaled down.
"""

from __future__ import annotations

import json
import logging
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.matrix_harness import PATH, matrix_world, running_bot
from tests.peers.matrix_client import resolve_edits
from tests.peers.synapse import SynapseHomeserver
from tests.telegram_harness import pieces_of, reply, text_stream, tool_call_stream, words

SPACING_TOLERANCE_MS = 30


def _is_edit(event: dict[str, Any]) -> bool:
    return event["content"].get("m.relates_to", {}).get("rel_type") == "m.replace"


def _shown(events: list[dict[str, Any]]) -> list[str]:
    """The bodies the human's client shows, one per original event, in order."""
    resolved = resolve_edits(events)
    return [resolved[e["event_id"]]["body"] for e in events if not _is_edit(e)]


def _assert_spaced(events: list[dict[str, Any]], interval_ms: int) -> None:
    stamps = [e["origin_server_ts"] for e in events]
    for earlier, later in pairwise(stamps):
        assert later - earlier >= interval_ms - SPACING_TOLERANCE_MS, (earlier, later)


def _assert_never_shown(events: list[dict[str, Any]], secret: str) -> None:
    windows = {secret[i : i + 5] for i in range(len(secret) - 4)}
    for event in events:
        content = event["content"]
        texts = [content.get("body", ""), content.get("formatted_body", "")]
        new = content.get("m.new_content", {})
        texts += [new.get("body", ""), new.get("formatted_body", "")]
        for text in texts:
            leaked = [w for w in windows if w in text]
            assert not leaked, f"{leaked[0]!r} shown in {text!r}"


PARAGRAPHS = [
    "First paragraph, **bold**.",
    "Code with a blank line:\n```python\nx = 1\n\ny = 2\n```",
    "Third paragraph.",
    "Last one.",
]


async def test_multi_message_sends_one_event_per_paragraph_in_order(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    text = "\n\n".join(PARAGRAPHS)
    stream = reply(text_stream(pieces_of(text, 7)), delay_secs=0.03)
    async with matrix_world(synapse, tmp_path, [stream]) as world:
        async with running_bot(world, mode="multi_message", interval_ms=150, delay_ms=250):
            await world.ask("paragraphs please")
        events = await world.bot_events()
    assert not any(_is_edit(e) for e in events)
    assert [e["content"]["body"].strip() for e in events] == PARAGRAPHS
    assert all(e["content"]["msgtype"] == "m.text" for e in events)
    assert "<strong>bold</strong>" in events[0]["content"]["formatted_body"]
    assert "<pre><code" in events[1]["content"]["formatted_body"]
    _assert_spaced(events, 250)


async def test_c17_edits_of_one_event_keep_the_interval_and_the_cap(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    """C17, scaled down: 600 deltas of 3 characters 20 ms apart (not 3000 at 50 ms), an
    interval of 100 ms and a cap of 20 edits (not 100): the cap binds long before the end."""
    deltas = [f"{n % 100:02d} " for n in range(600)]
    text = "".join(deltas).strip()
    stream = reply(text_stream(deltas), delay_secs=0.02)
    extra = "    max_edits_per_message: 20\n"
    async with matrix_world(synapse, tmp_path, [stream]) as world:
        async with running_bot(world, mode="partial", interval_ms=100, extra=extra):
            await world.ask("count", within=60)
        events = await world.bot_events()
    originals = [e for e in events if not _is_edit(e)]
    for original in originals:
        edits = [
            e
            for e in events
            if _is_edit(e) and e["content"]["m.relates_to"]["event_id"] == original["event_id"]
        ]
        assert len(edits) <= 20
        for edit in edits:
            new = edit["content"]["m.new_content"]
            assert {"body", "formatted_body"} <= set(new)
    assert len([e for e in events if _is_edit(e)]) >= 5, "the reply did not stream"
    _assert_spaced(events, 100)
    assert " ".join(b.strip() for b in _shown(events)) == text


async def test_default_rate_limits_a_6000_character_answer_arrives_complete(
    synapse_default_limits: SynapseHomeserver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Synapse's own rc_message (0.2/s, bursts of 10): the edits run into real 429s; the
    engine waits out each retry_after_ms and the whole answer arrives."""
    answer = words("alpha", 3100) + "\n\n" + words("beta", 3100)
    assert len(answer) >= 6000
    stream = reply(text_stream(pieces_of(answer, 100)), delay_secs=0.05)
    caplog.set_level(logging.INFO, logger="orchestrator.delivery")
    async with matrix_world(synapse_default_limits, tmp_path, [stream]) as world:
        async with running_bot(world, mode="partial", interval_ms=100):
            await world.ask("a long one", within=120)
        events = await world.bot_events()
    shown = [b.strip() for b in _shown(events)]
    assert "\n\n".join(shown).split() == answer.split()
    assert all(len(b) <= 4000 for b in shown)
    assert "rate limited" in caplog.text, "no 429 was met: the test proves nothing"


async def test_a_restart_mid_conversation_answers_nothing_twice(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    replies = [reply(text_stream(["Answer one."])), reply(text_stream(["Answer two."]))]
    async with matrix_world(synapse, tmp_path, replies) as world:
        async with running_bot(world, mode="partial"):
            await world.ask("one")
        await world.send({"msgtype": "m.text", "body": "two"})  # while the bot is down
        async with running_bot(world, mode="partial"):
            with anyio.fail_after(30):
                await world.channel.wait_replies(1)
            await anyio.sleep(2)  # a sync or two more: nothing else is answered
        events = await world.bot_events()
        requests = world.provider.requests_to(PATH)
    assert [b.strip() for b in _shown(events)] == ["Answer one.", "Answer two."]
    assert len(requests) == 2


async def test_a_restart_after_more_than_a_sync_page_misses_nothing(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    """While the bot is down, a question and then 210 other messages arrive: more than the
    sync filter's 200, so the sync after the restart is ``limited`` and the question is only
    in the gap the adapter fetches with ``/messages``."""
    replies = [reply(text_stream(["Answer one."])), reply(text_stream(["Caught up."]))]
    async with matrix_world(synapse, tmp_path, replies) as world:
        await world.add_member()  # a room of three: unaddressed chatter is not answered
        mention = {"m.mentions": {"user_ids": [world.bot_user.user_id]}}
        async with running_bot(world):
            await world.ask("one", **mention)
        await world.send({"msgtype": "m.text", "body": "the missed question", **mention})
        for n in range(210):
            await world.send({"msgtype": "m.text", "body": f"chatter {n}"})
        async with running_bot(world):
            with anyio.fail_after(60):
                while True:
                    if len(world.provider.requests_to(PATH)) >= 2:
                        break
                    await anyio.sleep(0.2)
            await anyio.sleep(1.0)
        asked = [
            json.loads(r.body)["messages"][-1]["content"] for r in world.provider.requests_to(PATH)
        ]
    assert asked == ["one", "the missed question"]


async def test_a_secret_split_across_two_paragraphs_never_shows(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    """``AKIAABCDEFGH`` ends one paragraph (and model turn), ``IJKLMNOP`` starts the next."""
    secret = "AKIAABCDEFGHIJKLMNOP"
    replies = [
        reply(tool_call_stream(["Intro.\n\nChecking the key ", "AKIAABCDEFGH"]), delay_secs=0.05),
        reply(text_stream(["IJKLMNOP", " is the key.\n\nDone."]), delay_secs=0.05),
    ]
    async with matrix_world(synapse, tmp_path, replies) as world:
        async with running_bot(world, mode="multi_message", interval_ms=150, delay_ms=150):
            await world.ask("key?")
        events = await world.bot_events()
    _assert_never_shown(events, secret)
    joined = "\n".join(_shown(events))
    assert "[REDACTED:aws_access_key]" in joined
    assert "Done." in joined
