"""Group commit for the SQLite store (architecture §7): the calls the store's worker thread
found waiting together run in one transaction, and a call that needs its own transaction gets a
savepoint inside it.

Theory of operation
-------------------
Autocommit makes every statement its own transaction: a WAL append and a commit each, some
30–40 µs of the store thread's CPU, paid by every in-flight record a streaming reply rewrites.
:func:`run_group` runs a group of calls (:class:`~orchestrator.store.worker.StoreWorker` takes
every call waiting in its queue) between one ``BEGIN IMMEDIATE`` and one ``COMMIT``; the worker
hands the outcomes back only after :func:`run_group` returned, so a caller's await returns with
its call's writes committed, as before.

What a caller can observe is kept:

- *Order.* The calls run in the order given, on one connection: a call reads what the calls
  before it in the group wrote.
- *A call that raises* hands its own exception to its own caller, and the other calls' writes
  are committed. No savepoint per call is needed for that, and none is paid: a statement that
  fails (a constraint, a bad statement) undoes only itself in SQLite and leaves the transaction
  open, and a call that needs several statements to stand or fall together (``append``,
  ``reset``, ``compact``, ``mark_seen``, ``move_conversation``, ``prune``, ``load``) runs them
  in :func:`transaction`, a savepoint inside the group. So a call keeps exactly the writes it
  kept under autocommit — a single-statement call's statement, a multi-statement call's all or
  none.
- *An error SQLite answers by rolling the whole transaction back* (disk full, I/O error,
  corruption, interrupt), or a ``COMMIT`` that fails: the group's writes so far are gone and no
  outcome has been handed back, so :func:`run_group` runs the whole group again one by one
  (:func:`~orchestrator.store.worker.run_each`), each call on its own as under autocommit. A
  call is run twice only when its first run was rolled back: the store's calls act on the
  database only. Running the group again rather than paying a savepoint per call keeps the
  common case (nothing fails) at one ``BEGIN`` and one ``COMMIT`` per group.
- *A call that ends the transaction itself* without raising (:meth:`Store.close
  <orchestrator.store.sqlite.Store.close>` commits what the group wrote, then closes): the
  group's later calls run one by one, as under autocommit.

``BEGIN IMMEDIATE`` takes the write lock at once (waiting on the connection's busy timeout):
a deferred transaction that read first would be refused its write (``SQLITE_BUSY``, no retry)
when another connection, ``relaybot doctor`` say, wrote to the file in between.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from orchestrator.store.worker import Outcome, run_each

__all__ = ["in_transaction", "run_group", "transaction"]


def in_transaction(db: sqlite3.Connection) -> bool:
    """True when ``db`` has a transaction open (False once it is closed)."""
    try:
        return db.in_transaction
    except sqlite3.ProgrammingError:  # closed
        return False


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """The block's statements as one: a transaction of their own (``BEGIN IMMEDIATE`` …
    ``COMMIT``), or a savepoint when a group's transaction is open. When the block raises,
    its statements are undone (to the savepoint: the group's other writes stay) and the
    exception propagates."""
    if in_transaction(db):
        begin, end, undo = "SAVEPOINT store_call", "RELEASE store_call", "ROLLBACK TO store_call"
    else:
        begin, end, undo = "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"
    db.execute(begin)
    try:
        yield
        db.execute(end)
    except BaseException:
        if in_transaction(db):  # not when SQLite rolled it all back already
            db.execute(undo)
            if undo != "ROLLBACK":
                db.execute(end)
        raise


def _abandon(db: sqlite3.Connection) -> None:
    if in_transaction(db):
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def run_group(db: sqlite3.Connection, calls: Sequence[Callable[[], Any]]) -> list[Outcome]:
    """Run ``calls`` in order in one transaction of ``db`` and commit it; what each call
    returned or raised, in order (see the module docstring). The caller holds the lock that
    serialises ``db``. Never raises."""
    if len(calls) < 2:
        return run_each(calls)
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        return run_each(calls)
    outcomes: list[Outcome] = []
    for index, call in enumerate(calls):
        try:
            outcomes.append((call(), None))
        except BaseException as exc:  # handed to its own caller
            if isinstance(exc, sqlite3.Error) and not in_transaction(db):
                return run_each(calls)  # SQLite rolled the group back: run it again
            outcomes.append((None, exc))
        if not in_transaction(db):  # the call committed (and closed) the connection itself
            return outcomes + run_each(calls[index + 1 :])
    try:
        db.execute("COMMIT")
    except sqlite3.Error:
        _abandon(db)
        return run_each(calls)
    return outcomes
