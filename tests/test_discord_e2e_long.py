"""Discord end to end, long answers and faults (architecture §3 "Limits", "Network errors"; field
case C16): a 9000-character answer in ``partial`` arrives as messages of at most 2000 characters
whose concatenation is the answer, a code fence balanced across a cut; a 429 on the 3rd send is
waited out inside discord.py's call (the write stays in flight) and no part is dropped or
reordered; a gateway drop mid-answer is RESUMEd and the answer completes once. Real time, real
sockets.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio

from tests.discord_harness import EDIT, SEND, assert_spacing, running_bot
from tests.telegram_harness import pieces_of, reply, text_stream, words

NONE = {"parse": []}
FENCE_LINE = re.compile(r"^```", re.MULTILINE)


def assert_split_exactly(texts: list[str], text: str, *, limit: int = 2000) -> None:
    """``texts`` are ``text`` cut into messages of at most ``limit`` characters whose
    concatenation is the text, but for whitespace at the ends of a message."""
    assert len(texts) >= 2
    assert all(0 < len(t) <= limit for t in texts), [len(t) for t in texts]
    position = 0
    for index, message in enumerate(texts):
        body = message.strip()
        position += len(text) - position - len(text[position:].lstrip())
        assert text.startswith(body, position), f"message {index + 1} does not continue the text"
        position += len(body)
    assert not text[position:].strip()


def paragraphs(count: int, size: int = 395) -> list[str]:
    return [words(f"p{n}w", size)[:size] for n in range(count)]


async def test_c16_a_429_on_the_third_send_loses_and_reorders_nothing(tmp_path: Path) -> None:
    """C16: 9000 characters in ``partial`` (5 messages); the 3rd send is answered 429
    ``retry_after: 1.2`` once. discord.py waits it out within the call: all 5 arrive in order,
    the 3rd at least 1.2 s after the 429; writes keep their spacing; ``@everyone`` is inert."""
    answer = "@everyone " + "\n\n".join(paragraphs(25, 375))[: 9000 - 10]
    assert len(answer) == 9000
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(answer, 60)), delay_secs=0.01)]
    ) as bot:
        bot.peer.rate_limit(SEND, retry_after=1.2, call=3)
        await bot.ask("write a lot", within=60)
    peer, dm = bot.peer, bot.peer.dm_channel_id
    texts = peer.texts(dm)
    assert len(texts) == 5, [len(t) for t in texts]
    assert_split_exactly(texts, answer)
    sends = peer.requests_to(SEND, dm)
    assert [r.status for r in sends] == [200, 200, 429, 200, 200, 200]
    refused, retried = sends[2], sends[3]
    assert refused.answered_at is not None and retried.at - refused.answered_at >= 1.2
    assert retried.content == refused.content  # the same write, retried by discord.py
    ids = [m.id for m in peer.messages(dm)]
    assert ids == sorted(ids)
    assert_spacing(bot.writes(dm), bot.interval_ms)
    writes = bot.writes(dm)
    assert all(w.allowed_mentions == NONE for w in writes)
    assert not any(m.pinged_everyone or m.pinged_users for m in peer.messages(dm))
    assert bot.channel.name == "dc" and len(peer.requests_to(EDIT, dm)) >= 5


async def test_9000_characters_in_partial_keep_a_fence_balanced_across_a_cut(
    tmp_path: Path,
) -> None:
    code = "".join(f"    value_{n:04d} = compute({n}, scale=2)  # step\n" for n in range(90))
    answer = (
        "\n\n".join(paragraphs(3))
        + "\n\n```python\n"
        + code
        + "```\n\n"
        + "\n\n".join(paragraphs(40))
    )[:9000]
    assert len(answer) == 9000 and answer.count("```") == 2
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(answer, 80)), delay_secs=0.005)]
    ) as bot:
        await bot.ask("code please", within=60)
    texts = bot.peer.texts(bot.peer.dm_channel_id)
    assert all(len(t) <= 2000 for t in texts)
    assert all(len(FENCE_LINE.findall(t)) % 2 == 0 for t in texts), "a fence left open"
    cut_inside = [  # the previous message was closed by the cut, this one reopens the fence
        i
        for i in range(1, len(texts))
        if texts[i].startswith("```python\n") and texts[i - 1].endswith("\n```")
    ]
    assert cut_inside, "the code block spans a cut"
    joined = list(texts)
    for i in cut_inside:  # take out the closing and reopening fences the cut added
        assert joined[i - 1].endswith("```")
        joined[i - 1] = joined[i - 1].removesuffix("```")
        joined[i] = joined[i].removeprefix("```python\n")
    assert_split_exactly(joined, answer)
    assert "".join(joined).replace("\n", "") == answer.replace("\n", "")


async def test_a_gateway_drop_mid_answer_resumes_and_the_answer_completes_once(
    tmp_path: Path,
) -> None:
    answer = "Slowly: " + words("step", 900) + "."
    async with running_bot(
        tmp_path, [reply(text_stream(pieces_of(answer, 30)), delay_secs=0.05)]
    ) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        before = bot.channel.replies_finished
        peer.inject_message(dm, "take your time")
        await peer.wait_for(lambda: bool(peer.requests_to(SEND, dm)), 10)
        await peer.disconnect()  # close 4000: discord.py RESUMEs
        with anyio.fail_after(30):
            await bot.channel.wait_replies(before + 1)
        await peer.wait_for(lambda: any(f.op == 6 for f in peer.frames), 10)
    assert peer.texts(dm) == [answer]
    assert len(bot.provider.requests) == 1, "the message was answered once"
    assert [f.op for f in peer.frames].count(2) == 1, "RESUMEd, not identified anew"
    assert len(peer.requests_to(SEND, dm)) == 1
