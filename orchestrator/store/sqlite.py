"""The SQLite store (architecture §7): conversation history per (channel, chat, thread), the
messages waiting behind a running answer, the update ids already seen (dedupe), the replies in
flight (``drafts``: recorded before a reply's first write, cleared when it ends; what a hard kill
left there is marked interrupted at the next start), and one row per model round.

Theory of operation
-------------------
:class:`Store` is the blocking core: one SQLite connection, each call one short transaction
(a call of several statements runs them in :func:`~orchestrator.store.sqlite_groups.transaction`),
serialised by a lock (any thread may call it). The event loop never calls it directly: it uses
:class:`~orchestrator.store.sqlite_async.AsyncStore` (a
:class:`~orchestrator.store.interface.ConversationStore`), which runs
every call on one worker thread (:class:`~orchestrator.store.worker.StoreWorker`) — one store call
at a time, in order of arrival, and a slow disk never stalls the chats. A turn makes a few calls
(history, a record per round, the new messages, the reply's in-flight record at every write).
The calls the thread finds waiting run as one group in one transaction (:meth:`Store.run_group`):
one commit per group; each call's outcome is its own; an await returns once its group committed.

The journal is SQLite's WAL with ``synchronous=NORMAL``: a commit appends to the WAL without an
``fsync`` (the WAL is synced at each checkpoint). A commit survives the process being killed at
any moment; an operating-system crash or power loss may roll back the last commits, never
corrupting the file (SQLite's documented guarantee for WAL + NORMAL). ``FULL`` synced the WAL on
every commit: a reply's in-flight record is rewritten at every write it makes, and at a thousand
answers streaming at once those syncs, one at a time on the store's one thread, held every later
store call behind them (edit lag p50 1.4 s at N = 1000 in ``bench/scale.py``; 0.3 s without them).

The file is private: a missing directory is created with mode 0700 (each missing component) and
the database file with mode 0600 (an existing file is narrowed to 0600). SQLite gives its WAL and
shared-memory files the database file's mode.

Seen update ids (:meth:`Store.mark_seen`) are kept per channel, the newest
:data:`SEEN_UPDATES_KEPT` of each: a webhook retry or an update offered again by getUpdates after
a restart is recognised and answered once.

A conversation's ``thread_id`` is ``None`` outside threads; the tables hold ``''`` for it.
Databases written before threads, waiting messages and drafts existed gain the new columns and
tables on open. One process uses the file: conversation claims are the process's own.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from channels.base import InboundMessage
from orchestrator.store.interface import COPY_TABLES
from orchestrator.store.records import (
    SEEN_UPDATES_KEPT,
    ConversationRef,
    Draft,
    RoundRecord,
    WaitingMessage,
    decode_inbound,
    draft_row,
    encode_inbound,
    message_row,
    row_to_draft,
    row_to_message,
    row_to_record,
    sort_key,
    thread_key,
)
from orchestrator.store.sqlite_groups import in_transaction, run_group, transaction
from orchestrator.store.sqlite_schema import INDEXES, SCHEMA, upgrade
from orchestrator.store.worker import Outcome
from providers.base import ChatMessage

__all__ = ["Store"]

_T = TypeVar("_T")
_DRAFT_COLUMNS = "channel, chat_id, thread_id, message_id, text, formatted, message_ids, reply_to"
_SET_DRAFT = (
    f"INSERT INTO drafts ({_DRAFT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (channel, chat_id, thread_id) DO UPDATE"
    " SET message_id = excluded.message_id, text = excluded.text,"
    " formatted = excluded.formatted, message_ids = excluded.message_ids,"
    " reply_to = excluded.reply_to"
)

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


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


class Store:
    """The blocking store; see the module docstring. ``path`` may be ``":memory:"``.

    Raises ``sqlite3.Error`` (and ``OSError`` when the file cannot be created)."""

    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            path = Path(path)
            _private_directory(path.parent)
            _private_file(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        upgrade(self._db)
        self._db.executescript(INDEXES)

    def close(self) -> None:
        """Close the file; inside a group, what the calls before wrote is committed first."""
        with self._lock:
            if in_transaction(self._db):
                self._db.commit()
            self._db.close()

    def run_group(self, calls: Sequence[Callable[[], Any]]) -> list[Outcome]:
        """Run ``calls`` (of this store's methods) in order in one transaction; what each
        returned or raised (:mod:`orchestrator.store.sqlite_groups`). Never raises."""
        with self._lock:
            return run_group(self._db, calls)

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
                (channel, chat_id, thread_key(thread_id), limit),
            ).fetchall()
        messages = [row_to_message(row) for row in reversed(rows)]
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
        rows = [(channel, chat_id, thread_key(thread_id), *message_row(m), now) for m in messages]
        with self._lock, transaction(self._db):
            self._db.executemany(
                "INSERT INTO messages (channel, chat_id, thread_id, role, content, tool_calls,"
                " tool_call_id, name, provider_items, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def reset(self, channel: str, chat_id: str, thread_id: str | None = None) -> None:
        key = (channel, chat_id, thread_key(thread_id))
        with self._lock, transaction(self._db):
            self._db.execute(
                "DELETE FROM messages WHERE channel = ? AND chat_id = ? AND thread_id = ?", key
            )
            self._db.execute(
                "DELETE FROM summaries WHERE channel = ? AND chat_id = ? AND thread_id = ?", key
            )

    def summary(self, channel: str, chat_id: str, thread_id: str | None = None) -> str | None:
        """The summary of the conversation's compacted turns, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT summary FROM summaries WHERE channel = ? AND chat_id = ? AND thread_id = ?",
                (channel, chat_id, thread_key(thread_id)),
            ).fetchone()
        return str(row[0]) if row is not None else None

    def compact(
        self, channel: str, chat_id: str, thread_id: str | None, keep: int, summary: str
    ) -> None:
        """Replace every message of the conversation but the newest ``keep`` with ``summary``
        (which replaces the summary before it), in one transaction."""
        key = (channel, chat_id, thread_key(thread_id))
        with self._lock, transaction(self._db):
            self._db.execute(
                "DELETE FROM messages WHERE channel = ? AND chat_id = ? AND thread_id = ?"
                " AND id NOT IN (SELECT id FROM messages WHERE channel = ? AND chat_id = ?"
                " AND thread_id = ? ORDER BY id DESC LIMIT ?)",
                (*key, *key, keep),
            )
            self._db.execute(
                "INSERT INTO summaries (channel, chat_id, thread_id, summary, updated_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel, chat_id, thread_id)"
                " DO UPDATE SET summary = excluded.summary, updated_at = excluded.updated_at",
                (*key, summary, time.time()),
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
                    thread_key(record.thread_id),
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
        with self._lock, transaction(self._db):
            self._db.execute(
                "UPDATE messages SET chat_id = ? WHERE channel = ? AND chat_id = ?",
                (new_chat_id, channel, old_chat_id),
            )
            self._db.execute(
                "UPDATE summaries SET chat_id = ? WHERE channel = ? AND chat_id = ?",
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
        return [row_to_record(row) for row in rows]

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
        return [(float(row[-1]), row_to_record(row[:-1])) for row in rows]

    # -- waiting messages (architecture §5) -----------------------------------------------------

    def add_waiting(self, message: InboundMessage, received_at: float | None = None) -> int:
        """Keep ``message`` until its turn starts; returns its row id. ``received_at``: Unix
        seconds (default now). The message is stored as :func:`encode_inbound` JSON."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO waiting (channel, chat_id, thread_id, message, received_at, sort_key)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    message.channel,
                    message.chat_id,
                    thread_key(message.thread_id),
                    encode_inbound(message),
                    time.time() if received_at is None else received_at,
                    sort_key(message),
                ),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def remove_waiting(self, waiting_id: int) -> None:
        self.take_waiting(waiting_id)

    def take_waiting(self, waiting_id: int) -> bool:
        """Remove a waiting row; True when it was there."""
        with self._lock:
            cursor = self._db.execute("DELETE FROM waiting WHERE id = ?", (waiting_id,))
        return cursor.rowcount > 0

    def next_waiting(
        self, channel: str, chat_id: str, thread_id: str | None
    ) -> WaitingMessage | None:
        """The conversation's first waiting message (by update id, then row id), or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, message, received_at FROM waiting"
                " WHERE channel = ? AND chat_id = ? AND thread_id = ?"
                " ORDER BY sort_key IS NULL, sort_key, id LIMIT 1",
                (channel, chat_id, thread_key(thread_id)),
            ).fetchone()
        return None if row is None else WaitingMessage(row[0], decode_inbound(row[1]), row[2])

    def pending_conversations(self) -> list[ConversationRef]:
        """The conversations with waiting messages or a draft left behind."""
        with self._lock:
            rows = self._db.execute(
                "SELECT channel, chat_id, thread_id FROM waiting"
                " UNION SELECT channel, chat_id, thread_id FROM drafts"
            ).fetchall()
        return [(row[0], row[1], row[2] or None) for row in rows]

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
        with self._lock, transaction(self._db):
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

    # -- replies in flight (architecture §7, §9) ---------------------------------------------

    def set_draft(self, draft: Draft) -> None:
        """Record the reply in flight (one per conversation, replaced)."""
        with self._lock:
            self._db.execute(_SET_DRAFT, draft_row(draft))

    def clear_draft(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        with self._lock:
            self._db.execute(
                "DELETE FROM drafts WHERE channel = ? AND chat_id = ? AND thread_id = ?",
                (channel, chat_id, thread_key(thread_id)),
            )

    def draft(self, channel: str, chat_id: str, thread_id: str | None) -> Draft | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_DRAFT_COLUMNS} FROM drafts"
                " WHERE channel = ? AND chat_id = ? AND thread_id = ?",
                (channel, chat_id, thread_key(thread_id)),
            ).fetchone()
        return None if row is None else row_to_draft(row)

    def drafts(self) -> list[Draft]:
        """Every reply in flight, by conversation."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_DRAFT_COLUMNS} FROM drafts ORDER BY channel, chat_id, thread_id"
            ).fetchall()
        return [row_to_draft(row) for row in rows]

    # -- retention and copying ------------------------------------------------------------

    def prune(self, older_than: float) -> int:
        """Delete history and round records created before ``older_than`` (Unix seconds);
        returns the rows deleted."""
        with self._lock, transaction(self._db):
            deleted = self._db.execute(
                "DELETE FROM messages WHERE created_at < ?", (older_than,)
            ).rowcount
            deleted += self._db.execute(
                "DELETE FROM rounds WHERE created_at < ?", (older_than,)
            ).rowcount
        return deleted

    def dump(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of ``table`` (a ``COPY_TABLES`` key) in its columns, by id."""
        columns = COPY_TABLES[table]
        order = "rowid"
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}"
            ).fetchall()
        return [tuple(row) for row in rows]

    def load(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``rows`` (as :meth:`dump` gives them) into ``table``."""
        columns = COPY_TABLES[table]
        marks = ", ".join("?" for _ in columns)
        with self._lock, transaction(self._db):
            self._db.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows
            )

    # -- one statement (the chat controls' rows, :mod:`orchestrator.store.control_rows`) --

    def query(self, statement: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement written with ``%s`` placeholders; its rows."""
        with self._lock:
            return self._db.execute(statement.replace("%s", "?"), tuple(args)).fetchall()

    def execute(self, statement: str, args: Sequence[Any] = ()) -> int:
        """Run one statement written with ``%s`` placeholders; the rows it changed."""
        with self._lock:
            return self._db.execute(statement.replace("%s", "?"), tuple(args)).rowcount

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
