"""The chat controls' rows in either store (architecture §5 "Chat controls", §7): per-chat
settings, one usage row per model round, and the per-minute message counters.

Theory of operation
-------------------
Every call is one SQL statement, so each is atomic in SQLite and in PostgreSQL alike, and the
text of each statement is shared by both engines (``%s`` placeholders; the SQLite store runs
them with ``?``). Budgets read the sums of ``usage`` rows: each round writes its row once,
whichever instance served it, so one budget is counted once across instances. A message is
counted against ``messages_per_minute`` by :meth:`ControlRows.take_message`, an upsert that
raises the minute's counter only while it is below the limit and returns nothing otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.store.records import thread_key

__all__ = ["ControlRows", "UsageRecord", "UsageTotals"]

Rows = Callable[[str, Sequence[Any]], Awaitable[list[tuple[Any, ...]]]]
"""Runs one statement with ``%s`` placeholders and returns its rows."""
Execute = Callable[[str, Sequence[Any]], Awaitable[int]]
"""Runs one statement with ``%s`` placeholders and returns the rows it changed."""

_USAGE_COLUMNS = (
    "channel, chat_id, thread_id, user_id, provider, model, input_tokens, cached_tokens,"
    " output_tokens, cost, estimated, created_at"
)
_SUMS = (
    "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(cached_tokens), 0),"
    " COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost), 0), COALESCE(SUM(estimated), 0),"
    " COUNT(*) FROM usage WHERE created_at >= %s"
)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """What one model round spent: tokens (``cached_tokens`` are part of ``input_tokens``),
    ``cost`` in the provider's price unit, ``estimated`` when the provider reported no usage
    and the counts are our estimate; ``created_at`` Unix seconds."""

    channel: str
    chat_id: str
    thread_id: str | None
    user_id: str
    provider: str
    model: str
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost: float
    estimated: bool
    created_at: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Sums of usage rows: tokens, cost, how many rounds and how many of them estimated."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    estimated_rounds: int = 0
    rounds: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ControlRows:
    """The controls' rows of one store (its ``controls`` attribute)."""

    def __init__(self, rows: Rows, execute: Execute) -> None:
        self._rows = rows
        self._execute = execute

    # -- per-chat settings ----------------------------------------------------------------

    async def chat_settings(
        self, channel: str, chat_id: str, thread_id: str | None
    ) -> dict[str, str]:
        """The settings of the conversation: the chat's (``''`` thread), overridden by the
        thread's own."""
        rows = await self._rows(
            "SELECT thread_id, key, value FROM chat_settings WHERE channel = %s AND chat_id = %s"
            " AND thread_id IN ('', %s) ORDER BY thread_id",
            (channel, chat_id, thread_key(thread_id)),
        )
        return {str(key): str(value) for _, key, value in rows}

    async def set_chat_setting(
        self, channel: str, chat_id: str, thread_id: str | None, key: str, value: str | None
    ) -> None:
        """Set ``key`` of the conversation (its thread when ``thread_id``); ``None`` removes
        it (the config's value applies again)."""
        where = (channel, chat_id, thread_key(thread_id), key)
        if value is None:
            await self._execute(
                "DELETE FROM chat_settings WHERE channel = %s AND chat_id = %s"
                " AND thread_id = %s AND key = %s",
                where,
            )
            return
        await self._execute(
            "INSERT INTO chat_settings (channel, chat_id, thread_id, key, value)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (channel, chat_id, thread_id, key)"
            " DO UPDATE SET value = excluded.value",
            (*where, value),
        )

    # -- usage ------------------------------------------------------------------------------

    async def record_usage(self, record: UsageRecord) -> None:
        r = record
        await self._execute(
            f"INSERT INTO usage ({_USAGE_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                r.channel, r.chat_id, thread_key(r.thread_id), r.user_id, r.provider, r.model,
                r.input_tokens, r.cached_tokens, r.output_tokens, r.cost, int(r.estimated),
                r.created_at or time.time(),
            ),
        )  # fmt: skip

    async def usage_totals(
        self,
        since: float,
        *,
        channel: str | None = None,
        user_id: str | None = None,
        chat_id: str | None = None,
    ) -> UsageTotals:
        """Sums of the rows recorded at or after ``since`` (Unix seconds), of one channel's
        user or chat when given."""
        query, args = _SUMS, list[Any]([since])
        for column, value in (("channel", channel), ("user_id", user_id), ("chat_id", chat_id)):
            if value is not None:
                query += f" AND {column} = %s"
                args.append(value)
        row = (await self._rows(query, args))[0]
        return UsageTotals(
            int(row[0]), int(row[1]), int(row[2]), float(row[3]), int(row[4]), int(row[5])
        )

    async def usage_rows(self, since: float) -> list[UsageRecord]:
        """Every row recorded at or after ``since`` (Unix seconds), oldest first."""
        rows = await self._rows(
            f"SELECT {_USAGE_COLUMNS} FROM usage WHERE created_at >= %s ORDER BY id", (since,)
        )
        return [
            UsageRecord(
                row[0], row[1], row[2] or None, row[3], row[4], row[5], int(row[6]),
                int(row[7]), int(row[8]), float(row[9]), bool(row[10]), float(row[11]),
            )
            for row in rows
        ]  # fmt: skip

    # -- rate counters ----------------------------------------------------------------------

    async def take_message(self, scope: str, window_start: int, limit: int) -> bool:
        """Count one message of ``scope`` in the window starting at ``window_start``; False
        (nothing counted) when the window already holds ``limit``. Earlier windows are
        forgotten."""
        await self._execute(
            "DELETE FROM rate_counters WHERE scope = %s AND window_start < %s",
            (scope, window_start),
        )
        rows = await self._rows(
            "INSERT INTO rate_counters (scope, window_start, count) VALUES (%s, %s, 1)"
            " ON CONFLICT (scope, window_start) DO UPDATE"
            " SET count = rate_counters.count + 1 WHERE rate_counters.count < %s"
            " RETURNING count",
            (scope, window_start, limit),
        )
        return bool(rows)

    # -- regenerate --------------------------------------------------------------------------

    async def drop_last_turn(self, channel: str, chat_id: str, thread_id: str | None) -> str | None:
        """Delete the conversation's last user message and everything after it; returns that
        message's text (``None``: the history has no user message)."""
        key = (channel, chat_id, thread_key(thread_id))
        rows = await self._rows(
            "DELETE FROM messages WHERE channel = %s AND chat_id = %s AND thread_id = %s"
            " AND id >= (SELECT MAX(id) FROM messages WHERE channel = %s AND chat_id = %s"
            " AND thread_id = %s AND role = 'user') RETURNING id, role, content",
            (*key, *key),
        )
        users = sorted((row for row in rows if row[1] == "user"), key=lambda row: int(row[0]))
        return str(users[0][2]) if users else None
