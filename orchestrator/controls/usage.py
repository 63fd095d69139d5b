"""Usage and cost (architecture §5 "Usage and cost"), pure: a round's usage as a row, its cost
from ``providers.X.prices``, the UTC periods of the reports, and the tables ``/usage`` and
``relaybot usage`` print.

A round whose provider reported no usage is counted from our estimate (4 characters a token,
as the context budget estimates) and marked ``estimated``; reports say how many rounds were.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from config.controls import Prices
from orchestrator.store.control_rows import UsageRecord, UsageTotals

__all__ = [
    "Grouping",
    "UsageRow",
    "cost_of",
    "day_start",
    "estimate_tokens",
    "format_cost",
    "group_usage",
    "month_start",
    "round_usage",
    "totals_line",
    "usage_report",
]

Grouping = Literal["user", "chat"]
CHARS_PER_TOKEN = 4
"""The estimate of a round without reported usage (as :mod:`orchestrator.turn.history_budget`)."""


def estimate_tokens(text: str) -> int:
    """Tokens of ``text``, estimated: one per 4 characters, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def cost_of(
    input_tokens: int, cached_tokens: int, output_tokens: int, prices: Prices | None
) -> float:
    """The cost of a round: prices are per million tokens; ``cached_tokens`` are the part of
    ``input_tokens`` served from the cache (priced ``cached_input``, default ``input``). No
    prices: 0."""
    if prices is None:
        return 0.0
    cached = min(cached_tokens, input_tokens)
    cached_price = prices.input if prices.cached_input is None else prices.cached_input
    total = (input_tokens - cached) * prices.input + cached * cached_price
    return (total + output_tokens * prices.output) / 1_000_000


def round_usage(
    *,
    where: tuple[str, str, str | None],
    user_id: str,
    provider: str,
    model: str,
    reported: tuple[int | None, int | None, int | None] | None,
    estimate: tuple[int, int],
    prices: Prices | None,
    now: float,
) -> UsageRecord:
    """One round's row. ``reported`` is the provider's (input, cached input, output) counts
    (``None``: no ``Usage`` event); a count it left out, or all of them, come from
    ``estimate`` (input, output), and the row is then ``estimated``."""
    channel, chat_id, thread_id = where
    given = reported or (None, None, None)
    estimated = given[0] is None or given[2] is None
    input_tokens = given[0] if given[0] is not None else estimate[0]
    output_tokens = given[2] if given[2] is not None else estimate[1]
    cached = given[1] or 0
    return UsageRecord(
        channel, chat_id, thread_id, user_id, provider, model, input_tokens, cached,
        output_tokens, cost_of(input_tokens, cached, output_tokens, prices), estimated, now,
    )  # fmt: skip


def day_start(now: float) -> float:
    """The start of ``now``'s UTC day, Unix seconds."""
    return now - now % 86_400


def month_start(now: float) -> float:
    """The start of ``now``'s UTC calendar month, Unix seconds."""
    t = time.gmtime(now)
    return float(calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)))


def format_cost(cost: float) -> str:
    """``$0.0123``: four decimals under a dollar, two above."""
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


def totals_line(label: str, totals: UsageTotals) -> str:
    """``today: 1,234 tokens (1,000 in, 234 out), $0.0012`` and how many rounds were
    estimated."""
    line = (
        f"{label}: {totals.tokens:,} tokens ({totals.input_tokens:,} in, "
        f"{totals.output_tokens:,} out), {format_cost(totals.cost)}"
    )
    if totals.estimated_rounds:
        line += f" — {totals.estimated_rounds} of {totals.rounds} rounds estimated"
    return line


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One line of ``relaybot usage``: a user's or a chat's sums."""

    channel: str
    key: str
    totals: UsageTotals

    def as_json(self) -> dict[str, object]:
        t = self.totals
        return {
            "channel": self.channel, "key": self.key, "input_tokens": t.input_tokens,
            "cached_tokens": t.cached_tokens, "output_tokens": t.output_tokens,
            "tokens": t.tokens, "cost": round(t.cost, 6), "rounds": t.rounds,
            "estimated_rounds": t.estimated_rounds,
        }  # fmt: skip


def group_usage(records: Iterable[UsageRecord], by: Grouping) -> list[UsageRow]:
    """Sums per (channel, user) or (channel, chat), most tokens first."""
    sums: dict[tuple[str, str], UsageTotals] = {}
    for r in records:
        key = (r.channel, r.user_id if by == "user" else r.chat_id)
        t = sums.get(key, UsageTotals())
        sums[key] = UsageTotals(
            t.input_tokens + r.input_tokens, t.cached_tokens + r.cached_tokens,
            t.output_tokens + r.output_tokens, t.cost + r.cost,
            t.estimated_rounds + int(r.estimated), t.rounds + 1,
        )  # fmt: skip
    rows = [UsageRow(channel, key, totals) for (channel, key), totals in sums.items()]
    return sorted(rows, key=lambda row: (-row.totals.tokens, row.channel, row.key))


def usage_report(rows: list[UsageRow], by: Grouping) -> str:
    """The rows as an aligned text table with a total line."""
    head = ("channel", by, "input", "cached", "output", "cost", "rounds", "estimated")
    lines: list[tuple[str, ...]] = [head]
    for row in rows:
        t = row.totals
        lines.append(
            (row.channel, row.key, f"{t.input_tokens:,}", f"{t.cached_tokens:,}",
             f"{t.output_tokens:,}", format_cost(t.cost), str(t.rounds), str(t.estimated_rounds))
        )  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
            for line in lines]  # fmt: skip
    if not rows:
        text.append("(no usage recorded)")
    return "\n".join(text)
