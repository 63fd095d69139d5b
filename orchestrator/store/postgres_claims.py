"""The PostgreSQL store's conversation claims and ``/stop`` notices (architecture §9): the
connections that live beside the pool.

* **One turn at a time per conversation**: :meth:`Claims.try_claim` takes a session-level
  advisory lock (``pg_try_advisory_lock``, the key from
  :func:`~orchestrator.store.records.lock_key`) on the instance's own lock connection, kept open
  for the instance's life, and holds it until :meth:`Claims.release`. When the process dies its
  connection closes and the server releases every lock it held
  (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS). Advisory locks
  are re-entrant within a session, so the instance also keeps its own set of claimed
  conversations; a lost lock connection forgets them (logged) and is opened again.
* **``/stop`` reaches the instance answering**: a ``NOTIFY`` on :data:`STOP_CHANNEL`; every
  instance ``LISTEN``s on a connection of its own (:func:`stop_requests`)
  (https://www.postgresql.org/docs/current/sql-notify.html).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import psycopg

from orchestrator.store.records import ConversationRef, lock_key

__all__ = ["STOP_CHANNEL", "Claims", "stop_requests"]

log = logging.getLogger("orchestrator.store.postgres")

STOP_CHANNEL = "relaybot_stop"
"""The NOTIFY channel of ``/stop`` requests (JSON ``[channel, chat_id, thread_id]``)."""

_Conn = psycopg.AsyncConnection[tuple[Any, ...]]


class Claims:
    """The conversations this instance answers, held as advisory locks on one connection of
    its own (``conninfo``); :meth:`open` before use."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._conn: _Conn | None = None
        self._guard = anyio.Lock()
        self._claimed: set[ConversationRef] = set()

    async def open(self) -> _Conn:
        """Connect the lock connection; returned so the schema can be migrated on it. Raises
        ``psycopg.Error``."""
        self._conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        return self._conn

    async def aclose(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    async def try_claim(self, key: ConversationRef) -> bool:
        """Claim ``key`` for this instance: False when it, or another instance, holds it."""
        async with self._guard:
            if key in self._claimed:
                return False
            row = None
            for attempt in range(2):
                conn = await self._connection()
                try:
                    cursor = await conn.execute(
                        b"SELECT pg_try_advisory_lock(%s)", (lock_key(*key),)
                    )
                    row = await cursor.fetchone()
                    break
                except psycopg.OperationalError:
                    await conn.close()  # the session ended: reconnect once
                    if attempt:
                        raise
            if row is None or not row[0]:
                return False
            self._claimed.add(key)
            return True

    async def release(self, key: ConversationRef) -> None:
        """Let ``key`` go (shielded: a cancelled turn still releases); a lost connection is
        logged (its locks are gone with it)."""
        with anyio.CancelScope(shield=True):
            async with self._guard:
                if key not in self._claimed:
                    return
                self._claimed.discard(key)
                assert self._conn is not None, "open() the store first"
                try:
                    await self._conn.execute(b"SELECT pg_advisory_unlock(%s)", (lock_key(*key),))
                except psycopg.OperationalError as exc:
                    log.warning("store: releasing a conversation failed: %s", exc)

    async def _connection(self) -> _Conn:
        """The lock connection, reconnected when it was lost (its locks are gone then: the
        claims this instance held are forgotten, and logged)."""
        assert self._conn is not None, "open() the store first"
        if not self._conn.closed and not self._conn.broken:
            return self._conn
        if self._claimed:
            log.error(
                "store: the lock connection was lost; %d conversation claim(s) released",
                len(self._claimed),
            )
            self._claimed.clear()
        self._conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        return self._conn


async def stop_requests(conninfo: str) -> AsyncIterator[ConversationRef]:
    """Every ``/stop`` request any instance makes, for as long as it is iterated: ``LISTEN`` on
    a connection of its own, opened again (after 5 s) when it is lost."""
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        except psycopg.OperationalError as exc:
            log.warning("store: cannot listen for /stop requests: %s", exc)
            await anyio.sleep(5.0)
            continue
        try:
            await conn.execute(f"LISTEN {STOP_CHANNEL}".encode())
            async for note in conn.notifies():
                try:
                    channel, chat_id, thread_id = json.loads(note.payload)
                except ValueError:
                    continue
                yield (str(channel), str(chat_id), None if thread_id is None else str(thread_id))
        except psycopg.OperationalError as exc:
            log.warning("store: listening for /stop requests stopped: %s", exc)
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()
