"""Redaction removes the secret, not the answer, through a paragraph-splitting channel: the real
daemon against the local Discord peer in ``multi_message`` (architecture §4 "Leak catalogue",
"What the reader sees is what is checked"). Every message and edit the peer received is read as
a reader reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.policy.catalogue import Redactor
from tests.discord_harness import EDIT, SEND, DiscordBot, running_bot
from tests.policy_forms import reader_view
from tests.policy_samples import windows
from tests.telegram_harness import reply, text_stream
from tests.test_policy_telegram_e2e import READER_FORMS_ANSWER, URL_FORMS, pieces, url_answer


def _shown(bot: DiscordBot, channel: int) -> list[str]:
    peer = bot.peer
    return [
        str((r.json or {}).get("content", ""))
        for kind in (SEND, EDIT)
        for r in peer.requests_to(kind, channel)
    ]


def _assert_hidden(texts: list[str], *secrets: str) -> None:
    for text in texts:
        view = reader_view(text)
        for secret in secrets:
            leaked = [w for w in windows(reader_view(secret)) if w in view or w in text]
            assert not leaked, (secret, leaked[:3], text)


@pytest.mark.parametrize("position", ["first", "middle", "last", "inline"])
@pytest.mark.parametrize("url", URL_FORMS)
async def test_a_url_password_answer_keeps_every_other_line_in_multi_message(
    tmp_path: Path, url: str, position: str
) -> None:
    answer = url_answer(url, position).replace("\n", "\n\n")  # one paragraph per line
    async with running_bot(
        tmp_path,
        [reply(text_stream(pieces(answer, 7)), delay_secs=0.01)],
        mode="multi_message",
        multi_message_delay_ms=50,
    ) as bot:
        await bot.ask("how do I connect?")
    dm = bot.peer.dm_channel_id
    _assert_hidden(_shown(bot, dm), "QXZhunter2", "QXZ%40hunter2")
    expected = [p for p in Redactor().redact(answer).split("\n\n") if p]
    assert bot.peer.texts(dm) == expected


async def test_reader_forms_never_show_in_multi_message(tmp_path: Path) -> None:
    async with running_bot(
        tmp_path,
        [reply(text_stream(pieces(READER_FORMS_ANSWER, 5)), delay_secs=0.01)],
        mode="multi_message",
        multi_message_delay_ms=50,
    ) as bot:
        await bot.ask("show me")
    dm = bot.peer.dm_channel_id
    _assert_hidden(
        _shown(bot, dm), "AAAABBBBCCCCDDDD", "EEEEFFFFGGGGHHHHIIIIJJJJ",
        "MIIEpAIBAAKCAQEA3Tz2mr7", "QXZJVWKY13579QXZJVWKY13579", "JJJJQXZJVWKY13579KKKK",
    )  # fmt: skip
    joined = "\n\n".join(bot.peer.texts(dm))
    assert joined.count("[REDACTED:anthropic_key]") == 4 and "That is all." in joined
