"""The pure cores of the chat controls (architecture §5 "Chat controls", "Roles", "Usage and
cost", "Budgets") and their store rows on SQLite."""

from __future__ import annotations

import calendar
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from config.controls import LimitSet, Prices
from orchestrator.chats.roles import Presser, Roles, may_change_settings, may_press
from orchestrator.controls.budgets import (
    Spent,
    minute_window,
    next_day,
    next_month,
    rate_refusal,
    refusal,
    resets_in,
)
from orchestrator.controls.usage import (
    cost_of,
    day_start,
    group_usage,
    month_start,
    round_usage,
    usage_report,
)
from orchestrator.store import AsyncStore, Store
from orchestrator.store.control_rows import UsageRecord, UsageTotals
from orchestrator.turn.answering import command_of

NOW = float(calendar.timegm((2026, 12, 31, 21, 30, 0)))


def test_roles_match_ids_and_verified_handles_only() -> None:
    roles = Roles([999, "@Boss"])
    assert roles.is_admin(Presser("999"))
    assert roles.is_admin(Presser("5", "boss"))
    assert not roles.is_admin(Presser("5", "bossy"))
    assert may_change_settings(roles, Presser("5"), is_direct=True)
    assert not may_change_settings(roles, Presser("5"), is_direct=False)
    assert may_change_settings(roles, Presser("999"), is_direct=False)
    assert may_press(roles, Presser("5"), asker_id="5")
    assert not may_press(roles, Presser("6"), asker_id="5")
    assert may_press(roles, Presser("999"), asker_id="5")
    assert not may_press(roles, Presser("5"), asker_id=None)


def test_commands_take_the_channel_prefix_and_slash() -> None:
    assert command_of("!model smart", "!") == "/model"
    assert command_of("/model@bot smart", "!") == "/model"
    assert command_of("!model smart") is None
    assert command_of("!", "!") is None
    assert command_of("hello /model", "!") is None


def test_cost_is_per_million_with_cached_input_priced_apart() -> None:
    prices = Prices(input=2.0, cached_input=0.5, output=8.0)
    assert cost_of(1_000_000, 0, 0, prices) == pytest.approx(2.0)
    assert cost_of(1_000, 400, 100, prices) == pytest.approx((600 * 2 + 400 * 0.5 + 800) / 1e6)
    assert cost_of(100, 100, 0, Prices(input=3.0)) == pytest.approx(300 / 1e6)
    assert cost_of(10, 0, 10, None) == 0.0


def test_a_round_without_reported_usage_is_estimated_and_said_so() -> None:
    common = {
        "where": ("tg", "1", None),
        "user_id": "7",
        "provider": "main",
        "model": "m",
        "estimate": (120, 30),
        "prices": Prices(input=1.0, output=1.0),
        "now": NOW,
    }
    reported = round_usage(reported=(11, 3, 5), **common)  # type: ignore[arg-type]
    assert (reported.input_tokens, reported.cached_tokens, reported.output_tokens) == (11, 3, 5)
    assert not reported.estimated
    missing = round_usage(reported=None, **common)  # type: ignore[arg-type]
    assert (missing.input_tokens, missing.output_tokens, missing.estimated) == (120, 30, True)
    partial = round_usage(reported=(11, None, None), **common)  # type: ignore[arg-type]
    assert (partial.input_tokens, partial.output_tokens, partial.estimated) == (11, 30, True)
    rows = group_usage([reported, missing], "user")
    assert rows[0].totals == UsageTotals(131, 3, 35, reported.cost + missing.cost, 1, 2)
    assert "1" in usage_report(rows, "user").splitlines()[1].split()[-1]


def test_periods_are_utc_days_and_calendar_months() -> None:
    assert day_start(NOW) == calendar.timegm((2026, 12, 31, 0, 0, 0))
    assert month_start(NOW) == calendar.timegm((2026, 12, 1, 0, 0, 0))
    assert next_month(NOW) == calendar.timegm((2027, 1, 1, 0, 0, 0))
    assert minute_window(NOW + 59) == NOW


def test_a_reached_cap_is_refused_with_when_it_resets() -> None:
    spent = Spent(UsageTotals(600, 0, 400, 0.5, 0, 3), UsageTotals(600, 0, 400, 12.0, 0, 30))
    day = refusal("user", LimitSet(tokens_per_day=1000), spent, NOW)
    assert day is not None and day.line == (
        "⛔ Your daily token limit (1,000) is used up: it resets in 2 h 30 min (at 00:00 UTC)."
    )
    assert day.resets_at == next_day(NOW)
    assert refusal("user", LimitSet(tokens_per_day=1001), spent, NOW) is None
    month = refusal("chat", LimitSet(cost_per_month=10), spent, NOW)
    assert month is not None and month.line.startswith("⛔ This chat's monthly budget ($10.00)")
    assert "(on 2027-01-01)" in month.line and month.resets_at == next_month(NOW)
    rate = rate_refusal("user", 2, NOW + 15)
    assert rate.line.endswith("a minute: try again in 45 s.") and rate.resets_at == NOW + 60
    assert refusal("chat", LimitSet(), spent, NOW) is None


@given(st.floats(min_value=0, max_value=10 * 86_400))
def test_resets_in_never_says_zero(seconds: float) -> None:
    text = resets_in(seconds)
    assert text.startswith("in ") and " 0 " not in text and not text.startswith("in 0")


@pytest.mark.anyio
async def test_control_rows_on_sqlite(tmp_path: Path) -> None:
    store = AsyncStore(Store(tmp_path / "s.db"))
    rows = store.controls
    await rows.set_chat_setting("tg", "1", None, "model", "smart")
    await rows.set_chat_setting("tg", "1", "9", "system_prompt", "topic prompt")
    assert await rows.chat_settings("tg", "1", None) == {"model": "smart"}
    assert await rows.chat_settings("tg", "1", "9") == {
        "model": "smart",
        "system_prompt": "topic prompt",
    }
    await rows.set_chat_setting("tg", "1", None, "model", None)
    assert await rows.chat_settings("tg", "1", "9") == {"system_prompt": "topic prompt"}
    assert [await rows.take_message("u", 60, 2) for _ in range(3)] == [True, True, False]
    assert await rows.take_message("u", 120, 2)  # a new minute
    record = UsageRecord("tg", "1", None, "7", "main", "m", 10, 2, 5, 0.25, False, NOW)
    await rows.record_usage(record)
    await rows.record_usage(UsageRecord("tg", "2", None, "8", "main", "m", 1, 0, 1, 0.0, True, NOW))
    totals = await rows.usage_totals(NOW - 1, channel="tg", user_id="7")
    assert totals == UsageTotals(10, 2, 5, 0.25, 0, 1)
    assert (await rows.usage_totals(NOW - 1)).estimated_rounds == 1
    assert await rows.usage_rows(NOW + 1) == []
    assert (await rows.usage_rows(NOW))[0] == record
    store.sync.close()
