"""Budgets and rate limits (architecture §5 "Budgets"), pure: which cap a message would pass,
and the one line that says when it resets.

Theory of operation
-------------------
Before the model is asked, the caller reads the sums of the sender's and the chat's usage today
and this month (UTC) and counts the message against its minute (an atomic upsert in the store,
:meth:`~orchestrator.store.control_rows.ControlRows.take_message`), then asks :func:`refusal`.
Tokens are counted per UTC day, cost per UTC calendar month, messages per minute. A cap is
reached when the sum is at or above it: the answer that crosses it is finished, the next is
refused. Admins are exempt unless ``limits.admins_exempt`` is false.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass
from typing import Literal

from config.controls import LimitSet
from orchestrator.controls.usage import format_cost
from orchestrator.store.control_rows import UsageTotals

__all__ = [
    "Refusal",
    "Spent",
    "minute_window",
    "next_day",
    "next_month",
    "rate_refusal",
    "refusal",
    "resets_in",
]

Scope = Literal["user", "chat"]


@dataclass(frozen=True, slots=True)
class Spent:
    """What a user or a chat spent: today's and this month's sums."""

    today: UsageTotals
    month: UsageTotals


@dataclass(frozen=True, slots=True)
class Refusal:
    """A message a cap refuses: the one ``line`` saying so, and when the cap resets
    (``resets_at``, Unix seconds; a served API's ``Retry-After``)."""

    line: str
    resets_at: float


def minute_window(now: float) -> int:
    """The start of ``now``'s minute, Unix seconds (the ``messages_per_minute`` window)."""
    return int(now // 60 * 60)


def next_day(now: float) -> float:
    return now - now % 86_400 + 86_400


def next_month(now: float) -> float:
    t = time.gmtime(now)
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    return float(calendar.timegm((year, month, 1, 0, 0, 0)))


def resets_in(seconds: float) -> str:
    """``in 3 h 20 min``, ``in 45 s``."""
    seconds = max(1, int(seconds + 0.999))
    if seconds < 60:
        return f"in {seconds} s"
    minutes = -(-seconds // 60)
    if minutes < 60:
        return f"in {minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours < 48:
        return f"in {hours} h {rest} min" if rest else f"in {hours} h"
    return f"in {-(-hours // 24)} days"


_WHO = {"user": "Your", "chat": "This chat's"}


def refusal(scope: Scope, limits: LimitSet, spent: Spent, now: float) -> Refusal | None:
    """The refusal of a message when ``spent`` reached a cap of ``limits``; ``None`` when
    every cap still has room. The message-rate cap is the store's (:func:`rate_refusal`)."""
    who = _WHO[scope]
    if limits.tokens_per_day is not None and spent.today.tokens >= limits.tokens_per_day:
        reset = next_day(now)
        when = time.strftime("%H:%M UTC", time.gmtime(reset))
        return Refusal(
            f"⛔ {who} daily token limit ({limits.tokens_per_day:,}) is used up: it resets "
            f"{resets_in(reset - now)} (at {when}).",
            reset,
        )
    if limits.cost_per_month is not None and spent.month.cost >= limits.cost_per_month:
        reset = next_month(now)
        day = time.strftime("%Y-%m-%d", time.gmtime(reset))
        return Refusal(
            f"⛔ {who} monthly budget ({format_cost(limits.cost_per_month)}) is used up: it "
            f"resets {resets_in(reset - now)} (on {day}).",
            reset,
        )
    return None


def rate_refusal(scope: Scope, limit: int, now: float) -> Refusal:
    """The refusal of a message over ``messages_per_minute`` (it resets with the minute)."""
    who = {"user": "You are", "chat": "This chat is"}[scope]
    reset = minute_window(now) + 60
    messages = "message" if limit == 1 else "messages"
    return Refusal(
        f"⛔ {who} sending more than {limit} {messages} a minute: try again "
        f"{resets_in(reset - now)}.",
        reset,
    )
