"""``relaybot usage`` (architecture §5 "Usage and cost"): the sums of what a daemon recorded,
per user or chat, as JSON lines or a table."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from orchestrator.cli import main
from tests.controls_harness import GROUP, controls_bot


async def _two_answers(tmp_path: Path) -> Path:
    """A daemon answers user 111 in private and user 222 in the group (11 in, 5 out each,
    $1 / $2 per million); returns the config file."""
    async with controls_bot(tmp_path, prices="    prices: {input: 1.0, output: 2.0}\n") as bot:
        async with bot.running():
            await bot.ask("one")
            await bot.ask("two", chat=GROUP, user=222)
        config = tmp_path / "relaybot.yaml"
        config.write_text(bot.yaml, encoding="utf-8")
    return config


def test_relaybot_usage_prints_the_sums_by_user_and_chat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = anyio.run(_two_answers, tmp_path)
    capsys.readouterr()
    assert main(["usage", "--config", str(config), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["key"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        ("111", 11, 5),
        ("222", 11, 5),
    ]
    assert rows[0]["cost"] == pytest.approx(21 / 1e6)
    assert rows[0]["estimated_rounds"] == 0
    assert main(["usage", "--config", str(config), "--by", "chat", "--since", "2000-01-01"]) == 0
    table = capsys.readouterr().out
    assert "usage since 2000-01-01 (UTC), by chat" in table
    assert {line.split()[1] for line in table.splitlines()[2:]} == {"111", "-100"}
    assert main(["usage", "--config", str(config), "--since", "2999-01-01"]) == 0
    assert "(no usage recorded)" in capsys.readouterr().out


def test_relaybot_usage_refuses_a_bad_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--since", "yesterday"]) == 2
    assert "expected a date as YYYY-MM-DD" in capsys.readouterr().err
