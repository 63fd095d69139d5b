"""The SQLite store (architecture §7): conversation history per (channel, chat, thread), the
messages waiting behind a running answer, the update ids already seen (dedupe), and one row per
model round.

Theory of operation
-------------------
:class:`Store` is the blocking core: one SQLite connection, each call one short transaction,
serialised by a lock (any thread may call it). The event loop never calls it directly: it uses
:class:`AsyncStore`, which runs every call on a worker thread through a capacity-1
``anyio.CapacityLimiter`` — one store call at a time, in order of arrival, and a slow disk never
stalls the chats. A turn makes a few calls (history, a record per round, the new messages).

The file is private: a missing directory is created with mode 0700 (each missing component) and
the database file with mode 0600 (an existing file is narrowed to 0600). SQLite gives its WAL and
shared-memory files the database file's mode.

A waiting message is JSON of its :class:`InboundMessage` fields; its attachments' bytes are base64
text there (RFC 4648), so a queued photo survives a restart. History keeps a user message's text
and, for its images, only a note of how many there were (``[2 images]``): the bytes are sent in
the turn they arrived with, not again.

Seen update ids (:meth:`Store.mark_seen`) are kept per channel, the newest
:data:`SEEN_UPDATES_KEPT` of each: a webhook retry or an update offered again by getUpdates after
a restart is recognised and answered once.

A conversation's ``thread_id`` is ``None`` outside threads; the tables hold ``''`` for it.
Databases written before threads and waiting messages existed gain the new columns and tables
on open.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio

from channels.base import Attachment, InboundMessage
from providers.base import ChatMessage
from providers.events import ToolCall

__all__ = [
    "SEEN_UPDATES_KEPT",
    "AsyncStore",
    "ChannelStateRows",
    "RoundRecord",
    "Store",
    "WaitingMessage",
    "decode_inbound",
    "encode_inbound",
]

_T = TypeVar("_T")

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
SEEN_UPDATES_KEPT = 10_000
"""Update ids kept per channel for dedupe (the newest; older ones are pruned)."""

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
    created_at REAL NOT NULL,
    thread_id TEXT NOT NULL DEFAULT ''
);
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
    created_at REAL NOT NULL,
    thread_id TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS channel_state (
    channel TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (channel, key)
);
CREATE TABLE IF NOT EXISTS waiting (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL,
    received_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS seen_updates (
    channel TEXT NOT NULL,
    update_id INTEGER NOT NULL,
    seen_at REAL NOT NULL,
    PRIMARY KEY (channel, update_id)
);
"""
_INDEXES = """
CREATE INDEX IF NOT EXISTS messages_by_thread ON messages (channel, chat_id, thread_id, id);
"""


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One model round. ``ttft_ms`` (milliseconds) is ``None`` for rounds without text and
    blocking rounds; ``outcome`` is ``ok``, ``tool_calls``, ``interrupted``, ``refused``,
    ``stopped`` (``/stop``) or ``undelivered`` (the reply's chat or thread was gone);
    ``writes_sent`` counts sends, edits and deletes during the round."""

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
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class WaitingMessage:
    """A message kept until its turn starts: ``id`` is its row, ``received_at`` Unix seconds."""

    id: int
    message: InboundMessage
    received_at: float


def _private_directory(directory: Path) -> None:
    """Create ``directory`` and its missing parents with mode 0700 (the umask cannot widen
    it); an existing directory is left as it is."""
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=DIRECTORY_MODE)
        except FileExistsError:
            continue
        os.chmod(path, DIRECTORY_MODE)


def _private_file(path: Path) -> None:
    """Create ``path`` with mode 0600, or narrow an existing one to it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def _key(thread_id: str | None) -> str:
    return thread_id or ""


def encode_inbound(message: InboundMessage) -> str:
    """``message`` as JSON of its fields; attachment bytes as base64 text."""
    fields = asdict(message)
    fields["attachments"] = [
        {"mime_type": a.mime_type, "data": base64.b64encode(a.data).decode("ascii"), "size": a.size}
        for a in message.attachments
    ]
    return json.dumps(fields)


def decode_inbound(text: str) -> InboundMessage:
    """The inverse of :func:`encode_inbound` (also reads rows written before attachments and
    update ids existed). Raises ``ValueError`` on a malformed row."""
    fields = json.loads(text)
    fields["attachments"] = tuple(
        Attachment(a["mime_type"], base64.b64decode(a["data"]), a.get("size"))
        for a in fields.get("attachments", ())
    )
    fields["update_ids"] = tuple(fields.get("update_ids", ()))
    return InboundMessage(**fields)


def _stored_content(message: ChatMessage) -> str:
    """What history keeps of a message: its text, and a note of its images' count."""
    count = len(message.images)
    if not count:
        return message.content
    note = "[1 image]" if count == 1 else f"[{count} images]"
    return f"{note}\n{message.content}" if message.content else note


class Store:
    """The blocking store; see the module docstring. ``path`` may be ``":memory:"``.

    Raises ``sqlite3.Error`` (and ``OSError`` when the file cannot be created)."""

    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            path = Path(path)
            _private_directory(path.parent)
            _private_file(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._migrate()
        self._db.executescript(_INDEXES)

    def _migrate(self) -> None:
        for table in ("messages", "rounds"):
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if "thread_id" not in columns:
                self._db.execute(
                    f"ALTER TABLE {table} ADD COLUMN thread_id TEXT NOT NULL DEFAULT ''"
                )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- history ------------------------------------------------------------------------

    def history(
        self, channel: str, chat_id: str, thread_id: str | None = None, *, limit: int = 200
    ) -> list[ChatMessage]:
        """The last ``limit`` messages of the conversation, oldest first.

        The cut never starts on a tool result (its call would be missing).
        """
        with self._lock:
            rows = self._db.execute(
                "SELECT role, content, tool_calls, tool_call_id, name, provider_items"
                " FROM messages WHERE channel = ? AND chat_id = ? AND thread_id = ?"
                " ORDER BY id DESC LIMIT ?",
                (channel, chat_id, _key(thread_id), limit),
            ).fetchall()
        messages = [_row_to_message(row) for row in reversed(rows)]
        while messages and messages[0].role == "tool":
            messages.pop(0)
        return messages

    def append(
        self,
        channel: str,
        chat_id: str,
        messages: list[ChatMessage],
        thread_id: str | None = None,
    ) -> None:
        now = time.time()
        rows = [
            (
                channel,
                chat_id,
                _key(thread_id),
                m.role,
                _stored_content(m),
                json.dumps([[c.id, c.name, c.arguments] for c in m.tool_calls])
                if m.tool_calls
                else None,
                m.tool_call_id,
                m.name,
                json.dumps(list(m.provider_items)) if m.provider_items else None,
                now,
            )
            for m in messages
        ]
        with self._lock, self._db:
            self._db.executemany(
                "INSERT INTO messages (channel, chat_id, thread_id, role, content, tool_calls,"
                " tool_call_id, name, provider_items, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def reset(self, channel: str, chat_id: str, thread_id: str | None = None) -> None:
        with self._lock:
            self._db.execute(
                "DELETE FROM messages WHERE channel = ? AND chat_id = ? AND thread_id = ?",
                (channel, chat_id, _key(thread_id)),
            )

    # -- rounds -------------------------------------------------------------------------

    def record_round(self, record: RoundRecord) -> int:
        """Store ``record``; returns its row id (for :meth:`set_round_outcome`)."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO rounds (channel, chat_id, thread_id, provider, attempts, ttft_ms,"
                " input_tokens, output_tokens, cached_tokens, writes_sent, finish_reason,"
                " outcome, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.channel,
                    record.chat_id,
                    _key(record.thread_id),
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
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def set_round_outcome(self, round_id: int, outcome: str) -> None:
        """Change a stored round's outcome (e.g. ``undelivered``: its reply's chat or thread
        was gone)."""
        with self._lock:
            self._db.execute("UPDATE rounds SET outcome = ? WHERE id = ?", (outcome, round_id))

    def move_conversation(self, channel: str, old_chat_id: str, new_chat_id: str) -> None:
        """A chat got a new id (a Telegram group became a supergroup): its history, in every
        thread, and its waiting messages belong to ``new_chat_id`` from now on."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE messages SET chat_id = ? WHERE channel = ? AND chat_id = ?",
                (new_chat_id, channel, old_chat_id),
            )
            rows = self._db.execute(
                "SELECT id, message FROM waiting WHERE channel = ? AND chat_id = ?",
                (channel, old_chat_id),
            ).fetchall()
            for row_id, text in rows:
                # The message id is the old chat's: nothing to reply to in the new one.
                moved = replace(decode_inbound(text), chat_id=new_chat_id, message_id=None)
                self._db.execute(
                    "UPDATE waiting SET chat_id = ?, message = ? WHERE id = ?",
                    (new_chat_id, encode_inbound(moved), row_id),
                )

    def rounds(self, channel: str | None = None) -> list[RoundRecord]:
        query = (
            "SELECT channel, chat_id, provider, attempts, ttft_ms, input_tokens, output_tokens,"
            " cached_tokens, writes_sent, finish_reason, outcome, thread_id FROM rounds"
        )
        args: tuple[Any, ...] = ()
        if channel is not None:
            query += " WHERE channel = ?"
            args = (channel,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id", args).fetchall()
        return [_row_to_record(row) for row in rows]

    def recent_rounds(
        self, limit: int = 20, chat_id: str | None = None
    ) -> list[tuple[float, RoundRecord]]:
        """The latest ``limit`` rounds (of chat ``chat_id`` when given), newest first, each with
        the Unix seconds it was recorded at (``relaybot runs``)."""
        query = (
            "SELECT channel, chat_id, provider, attempts, ttft_ms, input_tokens, output_tokens,"
            " cached_tokens, writes_sent, finish_reason, outcome, thread_id, created_at"
            " FROM rounds"
        )
        args: tuple[Any, ...] = ()
        if chat_id is not None:
            query += " WHERE chat_id = ?"
            args = (chat_id,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        return [(float(row[-1]), _row_to_record(row[:-1])) for row in rows]

    # -- waiting messages (architecture §5) -----------------------------------------------------

    def add_waiting(self, message: InboundMessage, received_at: float | None = None) -> int:
        """Keep ``message`` until its turn starts; returns its row id. ``received_at``: Unix
        seconds (default now). The message is stored as :func:`encode_inbound` JSON."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO waiting (channel, chat_id, thread_id, message, received_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    message.channel,
                    message.chat_id,
                    _key(message.thread_id),
                    encode_inbound(message),
                    time.time() if received_at is None else received_at,
                ),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def remove_waiting(self, waiting_id: int) -> None:
        with self._lock:
            self._db.execute("DELETE FROM waiting WHERE id = ?", (waiting_id,))

    def waiting(self) -> list[WaitingMessage]:
        """Every kept message, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, message, received_at FROM waiting ORDER BY id"
            ).fetchall()
        return [WaitingMessage(row[0], decode_inbound(row[1]), row[2]) for row in rows]

    # -- seen updates (dedupe, architecture §7) -------------------------------------------------

    def mark_seen(self, channel: str, update_ids: tuple[int, ...]) -> bool:
        """Record ``update_ids`` as seen on ``channel``; False when one of them was seen
        before (the message was already taken: drop it). Keeps the newest
        :data:`SEEN_UPDATES_KEPT` ids per channel."""
        if not update_ids:
            return True
        now = time.time()
        marks = "?, " * (len(update_ids) - 1) + "?"
        with self._lock, self._db:
            seen = self._db.execute(
                f"SELECT 1 FROM seen_updates WHERE channel = ? AND update_id IN ({marks})",
                (channel, *update_ids),
            ).fetchone()
            if seen is not None:
                return False
            self._db.executemany(
                "INSERT INTO seen_updates (channel, update_id, seen_at) VALUES (?, ?, ?)",
                [(channel, update_id, now) for update_id in update_ids],
            )
            self._db.execute(
                "DELETE FROM seen_updates WHERE channel = ? AND update_id <= ("
                " SELECT update_id FROM seen_updates WHERE channel = ?"
                " ORDER BY update_id DESC LIMIT 1 OFFSET ?)",
                (channel, channel, SEEN_UPDATES_KEPT),
            )
        return True

    def seen_count(self, channel: str) -> int:
        """How many update ids of ``channel`` are kept."""
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*) FROM seen_updates WHERE channel = ?", (channel,)
            ).fetchone()
        return int(row[0])

    # -- channel state (e.g. the Matrix sync token) ---------------------------------------

    def get_state(self, channel: str, key: str) -> str | None:
        """The value a channel kept under ``key``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT value FROM channel_state WHERE channel = ? AND key = ?", (channel, key)
            ).fetchone()
        return None if row is None else str(row[0])

    def set_state(self, channel: str, key: str, value: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO channel_state (channel, key, value) VALUES (?, ?, ?)"
                " ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value",
                (channel, key, value),
            )


class ChannelStateRows:
    """One channel's rows of the store's channel state: :class:`channels.base.ChannelState`."""

    def __init__(self, store: AsyncStore, channel: str) -> None:
        self._store = store
        self._channel = channel

    async def get(self, key: str) -> str | None:
        return await self._store._run(partial(self._store.sync.get_state, self._channel, key))

    async def set(self, key: str, value: str) -> None:
        await self._store._run(partial(self._store.sync.set_state, self._channel, key, value))


class AsyncStore:
    """:class:`Store` for the event loop: the same calls as coroutines, each run on a worker
    thread, one at a time (capacity-1 limiter), so the loop never waits on the disk.

    ``sync`` is the wrapped store (for start-up, shutdown and tests)."""

    def __init__(self, store: Store) -> None:
        self.sync = store
        self._limiter = anyio.CapacityLimiter(1)

    async def _run(self, call: Callable[[], _T]) -> _T:
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def history(
        self, channel: str, chat_id: str, thread_id: str | None = None
    ) -> list[ChatMessage]:
        return await self._run(partial(self.sync.history, channel, chat_id, thread_id))

    async def append(
        self,
        channel: str,
        chat_id: str,
        messages: list[ChatMessage],
        thread_id: str | None = None,
    ) -> None:
        await self._run(partial(self.sync.append, channel, chat_id, messages, thread_id))

    async def reset(self, channel: str, chat_id: str, thread_id: str | None = None) -> None:
        await self._run(partial(self.sync.reset, channel, chat_id, thread_id))

    async def record_round(self, record: RoundRecord) -> int:
        return await self._run(partial(self.sync.record_round, record))

    async def set_round_outcome(self, round_id: int, outcome: str) -> None:
        await self._run(partial(self.sync.set_round_outcome, round_id, outcome))

    async def move_conversation(self, channel: str, old_chat_id: str, new_chat_id: str) -> None:
        await self._run(partial(self.sync.move_conversation, channel, old_chat_id, new_chat_id))

    async def add_waiting(self, message: InboundMessage) -> int:
        return await self._run(partial(self.sync.add_waiting, message))

    async def remove_waiting(self, waiting_id: int) -> None:
        await self._run(partial(self.sync.remove_waiting, waiting_id))

    async def waiting(self) -> list[WaitingMessage]:
        return await self._run(self.sync.waiting)

    async def mark_seen(self, channel: str, update_ids: tuple[int, ...]) -> bool:
        return await self._run(partial(self.sync.mark_seen, channel, update_ids))

    def channel_state(self, channel: str) -> ChannelStateRows:
        """The state rows of ``channel`` (what the adapter keeps across restarts)."""
        return ChannelStateRows(self, channel)


def _row_to_record(row: tuple[Any, ...]) -> RoundRecord:
    (channel, chat_id, provider, attempts, ttft_ms, input_tokens, output_tokens, cached,
     writes, finish_reason, outcome, thread_id) = row  # fmt: skip
    return RoundRecord(
        channel,
        chat_id,
        provider,
        attempts,
        ttft_ms,
        input_tokens,
        output_tokens,
        cached,
        writes,
        finish_reason,
        outcome,
        thread_id=thread_id or None,
    )


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
