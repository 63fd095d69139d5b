"""SQLite store: conversation history per (channel, chat) and one row per round (DESIGN §7).

Writes are small and local, so the store is synchronous; each call is one short transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from providers.base import ChatMessage
from providers.events import ToolCall

__all__ = ["RoundRecord", "Store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    name TEXT,
    provider_items TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_chat ON messages (channel, chat_id, id);
CREATE TABLE IF NOT EXISTS rounds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    provider TEXT,
    attempts INTEGER NOT NULL,
    ttft_ms REAL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cached_tokens INTEGER,
    writes_sent INTEGER NOT NULL,
    finish_reason TEXT,
    outcome TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One model round. ``ttft_ms`` is ``None`` for rounds without text and blocking rounds;
    ``outcome`` is ``ok``, ``tool_calls``, ``interrupted`` or ``refused``."""

    channel: str
    chat_id: str
    provider: str | None
    attempts: int
    ttft_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    writes_sent: int
    finish_reason: str | None
    outcome: str


class Store:
    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def history(self, channel: str, chat_id: str, *, limit: int = 200) -> list[ChatMessage]:
        """The last ``limit`` messages of the conversation, oldest first.

        The cut never starts on a tool result (its call would be missing).
        """
        rows = self._db.execute(
            "SELECT role, content, tool_calls, tool_call_id, name, provider_items FROM messages"
            " WHERE channel = ? AND chat_id = ? ORDER BY id DESC LIMIT ?",
            (channel, chat_id, limit),
        ).fetchall()
        messages = [_row_to_message(row) for row in reversed(rows)]
        while messages and messages[0].role == "tool":
            messages.pop(0)
        return messages

    def append(self, channel: str, chat_id: str, messages: list[ChatMessage]) -> None:
        now = time.time()
        with self._db:
            self._db.executemany(
                "INSERT INTO messages (channel, chat_id, role, content, tool_calls, tool_call_id,"
                " name, provider_items, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        channel,
                        chat_id,
                        m.role,
                        m.content,
                        json.dumps([[c.id, c.name, c.arguments] for c in m.tool_calls])
                        if m.tool_calls
                        else None,
                        m.tool_call_id,
                        m.name,
                        json.dumps(list(m.provider_items)) if m.provider_items else None,
                        now,
                    )
                    for m in messages
                ],
            )

    def reset(self, channel: str, chat_id: str) -> None:
        self._db.execute(
            "DELETE FROM messages WHERE channel = ? AND chat_id = ?", (channel, chat_id)
        )

    def record_round(self, record: RoundRecord) -> None:
        self._db.execute(
            "INSERT INTO rounds (channel, chat_id, provider, attempts, ttft_ms, input_tokens,"
            " output_tokens, cached_tokens, writes_sent, finish_reason, outcome, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.channel,
                record.chat_id,
                record.provider,
                record.attempts,
                record.ttft_ms,
                record.input_tokens,
                record.output_tokens,
                record.cached_tokens,
                record.writes_sent,
                record.finish_reason,
                record.outcome,
                time.time(),
            ),
        )

    def rounds(self, channel: str | None = None) -> list[RoundRecord]:
        query = (
            "SELECT channel, chat_id, provider, attempts, ttft_ms, input_tokens, output_tokens,"
            " cached_tokens, writes_sent, finish_reason, outcome FROM rounds"
        )
        args: tuple[Any, ...] = ()
        if channel is not None:
            query += " WHERE channel = ?"
            args = (channel,)
        return [RoundRecord(*row) for row in self._db.execute(query + " ORDER BY id", args)]


def _row_to_message(row: tuple[Any, ...]) -> ChatMessage:
    role, content, tool_calls, tool_call_id, name, provider_items = row
    calls = tuple(ToolCall(*c) for c in json.loads(tool_calls)) if tool_calls else ()
    items = tuple(json.loads(provider_items)) if provider_items else ()
    return ChatMessage(
        role=role,
        content=content,
        tool_calls=calls,
        tool_call_id=tool_call_id,
        name=name,
        provider_items=items,
    )
