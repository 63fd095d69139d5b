"""Chinese text split at a sentence end through the Telegram wire server, in every mode
(architecture §3 "Limits"): 6000 characters with ``。`` every 70–90 are cut after the last full stop
within 4096 UTF-16 units, never mid-sentence, and together they are the text exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels.base import utf16_len
from tests.telegram_harness import (
    CHAT,
    assert_split_exactly,
    pieces_of,
    reply,
    running_bot,
    text_stream,
)
from tests.test_splitting_sentences import chinese_text

TEXT = chinese_text(6000)


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_six_thousand_chinese_characters_split_after_a_full_stop(
    tmp_path: Path, mode: str
) -> None:
    deltas = pieces_of(TEXT, 300)
    async with running_bot(
        tmp_path, [reply(text_stream(deltas), delay_secs=0.02)], mode=mode
    ) as bot:
        await bot.ask("写很多")
    bot.check()
    texts = bot.peer.texts(CHAT)
    assert len(texts) == 2
    assert_split_exactly(texts, TEXT)
    assert texts[0][-1] in "。！？"  # after a sentence end, not at exactly 4096
    assert utf16_len(texts[0]) < 4096 and "".join(texts) == TEXT
    assert not any(c.error for c in bot.writes())
