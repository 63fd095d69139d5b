"""The PostgreSQL store (architecture §9): the tables of the SQLite store, shared by several
instances of one bot.

Theory of operation
-------------------
Every call borrows a connection of a ``psycopg_pool.AsyncConnectionPool`` (autocommit; the
calls that write several rows run in one transaction) and runs on the event loop without
blocking it (psycopg 3's async connections). The schema is brought up to date at
:meth:`PostgresStore.connect` (:mod:`orchestrator.store.postgres_schema`).

What several instances rely on:

* **An update is taken once**: ``seen_updates`` has the unique key (channel, update id); the
  insert that conflicts tells :meth:`mark_seen`'s caller the update was taken elsewhere. The
  newest :data:`SEEN_UPDATES_KEPT` ids per channel are kept (pruned every
  ``_PRUNE_SEEN_EVERY`` calls).
* **One turn at a time per conversation**: :meth:`try_claim` takes a session-level advisory lock
  (``pg_try_advisory_lock``, the key from :func:`~orchestrator.store.records.lock_key`) on the
  instance's own lock connection, kept open for the instance's life, and holds it until
  :meth:`release`. When the process dies its connection closes and the server releases every
  lock it held (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS).
  Advisory locks are re-entrant within a session, so the instance also keeps its own set of
  claimed conversations.
* **Messages queue in the store**: ``waiting`` rows, ordered by their first update id; the
  holder of a conversation takes them one by one (:meth:`take_waiting` tells whether this call
  removed the row).
* **``/stop`` reaches the instance answering**: :meth:`request_stop` is a ``NOTIFY`` on
  :data:`STOP_CHANNEL`; every instance ``LISTEN``s on a connection of its own
  (:meth:`stop_requests`) and stops the turn if it runs there
  (https://www.postgresql.org/docs/current/sql-notify.html).
* **A cut answer can be found**: ``drafts`` records each reply in flight from before its first
  write — its message ids, the last one's text — until it ends.

The password comes from the environment (libpq's ``PGPASSWORD``), never from the URL.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import anyio
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from channels.base import InboundMessage
from orchestrator.store.control_rows import ControlRows
from orchestrator.store.interface import COPY_TABLES, ChannelStateRows
from orchestrator.store.postgres_claims import STOP_CHANNEL, Claims, stop_requests
from orchestrator.store.postgres_schema import migrate
from orchestrator.store.records import (
    SEEN_UPDATES_KEPT,
    ConversationRef,
    Draft,
    RoundRecord,
    WaitingMessage,
    decode_inbound,
    draft_row,
    encode_inbound,
    lock_key,
    message_row,
    row_to_draft,
    row_to_message,
    row_to_record,
    sort_key,
    thread_key,
)
from providers.base import ChatMessage

__all__ = ["PostgresStore"]

log = logging.getLogger(__name__)

_PRUNE_SEEN_EVERY = 64
_HISTORY_LIMIT = 200
_DRAFT_COLUMNS = "channel, chat_id, thread_id, message_id, text, formatted, message_ids, reply_to"
_Conn = psycopg.AsyncConnection[tuple[Any, ...]]


class PostgresStore:
    """A :class:`~orchestrator.store.interface.ConversationStore` on PostgreSQL; open it with
    :meth:`connect`."""

    def __init__(self, conninfo: str, *, pool_size: int = 10) -> None:
        self._conninfo = conninfo
        self._pool_size = max(1, pool_size)
        self._pool_or_none: AsyncConnectionPool[_Conn] | None = None
        self._claims = Claims(conninfo)
        self._marks = 0
        self.controls = ControlRows(self._rows, self._exec)
        """The chat controls' rows (settings, usage, rate counters)."""

    @classmethod
    async def connect(cls, conninfo: str, *, pool_size: int = 10) -> PostgresStore:
        """A store on ``conninfo``, opened (:meth:`open`)."""
        store = cls(conninfo, pool_size=pool_size)
        await store.open()
        return store

    async def open(self) -> None:
        """Connect (``pool_size`` pooled connections at most, plus one for locks) and apply
        the schema migrations. Raises ``psycopg.Error`` (e.g. ``OperationalError`` when the
        server cannot be reached) and
        :class:`~orchestrator.store.postgres_schema.SchemaTooNew`."""
        locks = await self._claims.open()
        try:
            await migrate(locks)
            pool: AsyncConnectionPool[_Conn] = AsyncConnectionPool(
                self._conninfo,
                min_size=1,
                max_size=self._pool_size,
                kwargs={"autocommit": True},
                open=False,
            )
            await pool.open(wait=True, timeout=30.0)
        except BaseException:
            await self._claims.aclose()
            raise
        self._pool_or_none = pool

    @property
    def _pool(self) -> AsyncConnectionPool[_Conn]:
        assert self._pool_or_none is not None, "open() the store first"
        return self._pool_or_none

    @property
    def shared(self) -> bool:
        return True

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._pool_or_none is not None:
                await self._pool_or_none.close()
            await self._claims.aclose()

    async def _rows(self, query: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query.encode(), args)
            return await cursor.fetchall()

    async def _exec(self, query: str, args: Sequence[Any] = ()) -> int:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query.encode(), args)
            return cursor.rowcount

    # -- history ----------------------------------------------------------------------------

    async def history(
        self, channel: str, chat_id: str, thread_id: str | None = None
    ) -> list[ChatMessage]:
        rows = await self._rows(
            "SELECT role, content, tool_calls, tool_call_id, name, provider_items FROM messages"
            " WHERE channel = %s AND chat_id = %s AND thread_id = %s ORDER BY id DESC LIMIT %s",
            (channel, chat_id, thread_key(thread_id), _HISTORY_LIMIT),
        )
        messages = [row_to_message(row) for row in reversed(rows)]
        while messages and messages[0].role == "tool":
            messages.pop(0)
        return messages

    async def append(
        self,
        channel: str,
        chat_id: str,
        messages: list[ChatMessage],
        thread_id: str | None = None,
    ) -> None:
        if not messages:
            return
        now = time.time()
        rows = [(channel, chat_id, thread_key(thread_id), *message_row(m), now) for m in messages]
        async with self._pool.connection() as conn, conn.transaction():
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    b"INSERT INTO messages (channel, chat_id, thread_id, role, content,"
                    b" tool_calls, tool_call_id, name, provider_items, created_at)"
                    b" VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )

    async def reset(self, channel: str, chat_id: str, thread_id: str | None = None) -> None:
        key = (channel, chat_id, thread_key(thread_id))
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                b"DELETE FROM messages WHERE channel = %s AND chat_id = %s AND thread_id = %s",
                key,
            )
            await conn.execute(
                b"DELETE FROM summaries WHERE channel = %s AND chat_id = %s AND thread_id = %s",
                key,
            )

    async def summary(self, channel: str, chat_id: str, thread_id: str | None = None) -> str | None:
        rows = await self._rows(
            "SELECT summary FROM summaries WHERE channel = %s AND chat_id = %s AND thread_id = %s",
            (channel, chat_id, thread_key(thread_id)),
        )
        return str(rows[0][0]) if rows else None

    async def compact(
        self, channel: str, chat_id: str, thread_id: str | None, keep: int, summary: str
    ) -> None:
        key = (channel, chat_id, thread_key(thread_id))
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                b"DELETE FROM messages WHERE channel = %s AND chat_id = %s AND thread_id = %s"
                b" AND id NOT IN (SELECT id FROM messages WHERE channel = %s AND chat_id = %s"
                b" AND thread_id = %s ORDER BY id DESC LIMIT %s)",
                (*key, *key, keep),
            )
            await conn.execute(
                b"INSERT INTO summaries (channel, chat_id, thread_id, summary, updated_at)"
                b" VALUES (%s, %s, %s, %s, %s) ON CONFLICT (channel, chat_id, thread_id)"
                b" DO UPDATE SET summary = EXCLUDED.summary, updated_at = EXCLUDED.updated_at",
                (*key, summary, time.time()),
            )

    # -- rounds -----------------------------------------------------------------------------

    async def record_round(self, record: RoundRecord) -> int:
        r = record
        rows = await self._rows(
            "INSERT INTO rounds (channel, chat_id, thread_id, provider, attempts, ttft_ms,"
            " input_tokens, output_tokens, cached_tokens, writes_sent, finish_reason, outcome,"
            " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " RETURNING id",
            (
                r.channel, r.chat_id, thread_key(r.thread_id), r.provider, r.attempts,
                r.ttft_ms, r.input_tokens, r.output_tokens, r.cached_tokens, r.writes_sent,
                r.finish_reason, r.outcome, time.time(),
            ),
        )  # fmt: skip
        return int(rows[0][0])

    async def set_round_outcome(self, round_id: int, outcome: str) -> None:
        await self._exec("UPDATE rounds SET outcome = %s WHERE id = %s", (outcome, round_id))

    async def rounds(self, channel: str | None = None) -> list[RoundRecord]:
        query = (
            "SELECT channel, chat_id, provider, attempts, ttft_ms, input_tokens, output_tokens,"
            " cached_tokens, writes_sent, finish_reason, outcome, thread_id FROM rounds"
        )
        args: tuple[Any, ...] = ()
        if channel is not None:
            query += " WHERE channel = %s"
            args = (channel,)
        return [row_to_record(row) for row in await self._rows(query + " ORDER BY id", args)]

    async def recent_rounds(
        self, limit: int = 20, chat_id: str | None = None
    ) -> list[tuple[float, RoundRecord]]:
        query = (
            "SELECT channel, chat_id, provider, attempts, ttft_ms, input_tokens, output_tokens,"
            " cached_tokens, writes_sent, finish_reason, outcome, thread_id, created_at"
            " FROM rounds"
        )
        args: tuple[Any, ...] = ()
        if chat_id is not None:
            query += " WHERE chat_id = %s"
            args = (chat_id,)
        rows = await self._rows(query + " ORDER BY id DESC LIMIT %s", (*args, limit))
        return [(float(row[-1]), row_to_record(row[:-1])) for row in rows]

    async def move_conversation(self, channel: str, old_chat_id: str, new_chat_id: str) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                b"UPDATE messages SET chat_id = %s WHERE channel = %s AND chat_id = %s",
                (new_chat_id, channel, old_chat_id),
            )
            await conn.execute(
                b"UPDATE summaries SET chat_id = %s WHERE channel = %s AND chat_id = %s",
                (new_chat_id, channel, old_chat_id),
            )
            cursor = await conn.execute(
                b"SELECT id, message FROM waiting WHERE channel = %s AND chat_id = %s FOR UPDATE",
                (channel, old_chat_id),
            )
            for row_id, text in await cursor.fetchall():
                # The message id is the old chat's: nothing to reply to in the new one.
                moved = replace(decode_inbound(text), chat_id=new_chat_id, message_id=None)
                await conn.execute(
                    b"UPDATE waiting SET chat_id = %s, message = %s WHERE id = %s",
                    (new_chat_id, encode_inbound(moved), row_id),
                )

    # -- waiting messages -------------------------------------------------------------------

    async def add_waiting(self, message: InboundMessage) -> int:
        rows = await self._rows(
            "INSERT INTO waiting (channel, chat_id, thread_id, message, received_at, sort_key)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (
                message.channel,
                message.chat_id,
                thread_key(message.thread_id),
                encode_inbound(message),
                time.time(),
                sort_key(message),
            ),
        )
        return int(rows[0][0])

    async def remove_waiting(self, waiting_id: int) -> None:
        await self.take_waiting(waiting_id)

    async def take_waiting(self, waiting_id: int) -> bool:
        return await self._exec("DELETE FROM waiting WHERE id = %s", (waiting_id,)) > 0

    async def waiting(self) -> list[WaitingMessage]:
        rows = await self._rows("SELECT id, message, received_at FROM waiting ORDER BY id")
        return [WaitingMessage(row[0], decode_inbound(row[1]), row[2]) for row in rows]

    async def next_waiting(
        self, channel: str, chat_id: str, thread_id: str | None
    ) -> WaitingMessage | None:
        rows = await self._rows(
            "SELECT id, message, received_at FROM waiting"
            " WHERE channel = %s AND chat_id = %s AND thread_id = %s"
            " ORDER BY sort_key NULLS LAST, id LIMIT 1",
            (channel, chat_id, thread_key(thread_id)),
        )
        if not rows:
            return None
        row = rows[0]
        return WaitingMessage(row[0], decode_inbound(row[1]), row[2])

    async def pending_conversations(self) -> list[ConversationRef]:
        rows = await self._rows(
            "SELECT channel, chat_id, thread_id FROM waiting"
            " UNION SELECT channel, chat_id, thread_id FROM drafts"
        )
        return [(row[0], row[1], row[2] or None) for row in rows]

    # -- seen updates -------------------------------------------------------------------------

    async def mark_seen(self, channel: str, update_ids: tuple[int, ...]) -> bool:
        if not update_ids:
            return True
        ids = sorted(set(update_ids))
        taken = True
        async with self._pool.connection() as conn:
            async with conn.transaction():
                cursor = await conn.execute(
                    b"INSERT INTO seen_updates (channel, update_id, seen_at)"
                    b" SELECT %s, u, %s FROM unnest(%s::bigint[]) AS u ON CONFLICT DO NOTHING",
                    (channel, time.time(), ids),
                )
                if cursor.rowcount < len(ids):
                    taken = False
                    raise psycopg.Rollback()
            self._marks += 1
            if taken and self._marks % _PRUNE_SEEN_EVERY == 0:
                await conn.execute(
                    b"DELETE FROM seen_updates WHERE channel = %s AND update_id <= ("
                    b" SELECT update_id FROM seen_updates WHERE channel = %s"
                    b" ORDER BY update_id DESC LIMIT 1 OFFSET %s)",
                    (channel, channel, SEEN_UPDATES_KEPT),
                )
        return taken

    async def seen_count(self, channel: str) -> int:
        """How many update ids of ``channel`` are kept."""
        rows = await self._rows("SELECT COUNT(*) FROM seen_updates WHERE channel = %s", (channel,))
        return int(rows[0][0])

    # -- channel state --------------------------------------------------------------------------

    async def get_state(self, channel: str, key: str) -> str | None:
        rows = await self._rows(
            "SELECT value FROM channel_state WHERE channel = %s AND key = %s", (channel, key)
        )
        return None if not rows else str(rows[0][0])

    async def set_state(self, channel: str, key: str, value: str) -> None:
        await self._exec(
            "INSERT INTO channel_state (channel, key, value) VALUES (%s, %s, %s)"
            " ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value",
            (channel, key, value),
        )

    def channel_state(self, channel: str) -> ChannelStateRows:
        return ChannelStateRows(self, channel)

    # -- replies in flight -------------------------------------------------------------------

    async def set_draft(self, draft: Draft) -> None:
        await self._exec(
            f"INSERT INTO drafts ({_DRAFT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (channel, chat_id, thread_id)"
            " DO UPDATE SET message_id = excluded.message_id, text = excluded.text,"
            " formatted = excluded.formatted, message_ids = excluded.message_ids,"
            " reply_to = excluded.reply_to",
            draft_row(draft),
        )

    async def clear_draft(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        await self._exec(
            "DELETE FROM drafts WHERE channel = %s AND chat_id = %s AND thread_id = %s",
            (channel, chat_id, thread_key(thread_id)),
        )

    async def draft(self, channel: str, chat_id: str, thread_id: str | None) -> Draft | None:
        rows = await self._rows(
            f"SELECT {_DRAFT_COLUMNS} FROM drafts"
            " WHERE channel = %s AND chat_id = %s AND thread_id = %s",
            (channel, chat_id, thread_key(thread_id)),
        )
        return row_to_draft(rows[0]) if rows else None

    async def drafts(self) -> list[Draft]:
        rows = await self._rows(
            f"SELECT {_DRAFT_COLUMNS} FROM drafts ORDER BY channel, chat_id, thread_id"
        )
        return [row_to_draft(row) for row in rows]

    # -- claims and /stop across instances (orchestrator.store.postgres_claims) ----------------

    async def try_claim(self, channel: str, chat_id: str, thread_id: str | None) -> bool:
        return await self._claims.try_claim((channel, chat_id, thread_id))

    async def release(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        await self._claims.release((channel, chat_id, thread_id))

    async def claimed(self, channel: str, chat_id: str, thread_id: str | None) -> bool:
        # A bigint advisory lock shows in pg_locks as classid (high 32 bits), objid (low 32
        # bits) and objsubid 1 (https://www.postgresql.org/docs/current/view-pg-locks.html).
        key = lock_key(channel, chat_id, thread_id) & 0xFFFFFFFFFFFFFFFF
        rows = await self._rows(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1)",
            (key >> 32, key & 0xFFFFFFFF),
        )
        return bool(rows[0][0])

    async def request_stop(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        payload = json.dumps([channel, chat_id, thread_id])
        await self._exec("SELECT pg_notify(%s, %s)", (STOP_CHANNEL, payload))

    def stop_requests(self) -> AsyncIterator[ConversationRef]:
        return stop_requests(self._conninfo)

    # -- retention and copying ----------------------------------------------------------------

    async def prune(self, older_than: float) -> int:
        async with self._pool.connection() as conn, conn.transaction():
            first = await conn.execute(b"DELETE FROM messages WHERE created_at < %s", (older_than,))
            second = await conn.execute(b"DELETE FROM rounds WHERE created_at < %s", (older_than,))
            return max(first.rowcount, 0) + max(second.rowcount, 0)

    async def dump(self, table: str) -> list[tuple[Any, ...]]:
        columns = COPY_TABLES[table]
        order = sql.SQL("id") if "id" in _IDENTITY_TABLES.get(table, ()) else sql.SQL("1")
        query = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
            sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(table), order
        )
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query)
            return await cursor.fetchall()

    async def load(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        columns = COPY_TABLES[table]
        query = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        async with self._pool.connection() as conn, conn.transaction():
            async with conn.cursor() as cursor, cursor.copy(query) as copy:
                for row in rows:
                    await copy.write_row(row)


_IDENTITY_TABLES: dict[str, tuple[str, ...]] = {
    "messages": ("id",),
    "rounds": ("id",),
    "waiting": ("id",),
    "usage": ("id",),
}
