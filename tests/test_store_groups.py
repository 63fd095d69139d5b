"""Group commit in the SQLite store (architecture §7, :mod:`orchestrator.store.sqlite_groups`):
the calls the worker thread finds waiting run in one transaction, and a caller still sees its
own call as if it ran alone — order kept, its own error only, its writes committed (visible to
another connection, surviving SIGKILL) once its await returned."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.store import Draft, Store
from orchestrator.store.worker import Outcome, StoreWorker, run_each
from providers.base import ChatMessage


def _draft(chat: str, text: str) -> Draft:
    return Draft("tg", chat, None, "m1", text, False, ("m1",))


def _rows(path: Path, statement: str) -> list[tuple[Any, ...]]:
    """What a new connection to the file reads (only committed writes)."""
    db = sqlite3.connect(path)
    try:
        return db.execute(statement).fetchall()
    finally:
        db.close()


def _failing_load(store: Store) -> Callable[[], None]:
    """A call of several statements whose second fails (a duplicate key): none of its rows
    may stay."""
    rows = [("tg", "k", "first"), ("tg", "k", "second")]
    return lambda: store.load("channel_state", rows)


def test_a_failing_call_in_a_group_raises_to_itself_only_and_the_others_are_committed(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "s.db")
    outcomes = store.run_group(
        [
            lambda: store.set_draft(_draft("1", "before")),
            _failing_load(store),
            lambda: store.execute("INSERT INTO no_such_table VALUES (1)"),
            lambda: store.set_draft(_draft("2", "after")),
            lambda: store.draft("tg", "1", None),
        ]
    )
    assert [error is None for _, error in outcomes] == [True, False, False, True, True]
    assert isinstance(outcomes[1][1], sqlite3.IntegrityError)
    assert isinstance(outcomes[2][1], sqlite3.OperationalError)
    assert outcomes[4][0] == _draft("1", "before")
    committed = _rows(tmp_path / "s.db", "SELECT chat_id, text FROM drafts ORDER BY chat_id")
    assert committed == [("1", "before"), ("2", "after")]
    assert _rows(tmp_path / "s.db", "SELECT * FROM channel_state") == []
    store.close()


def test_a_group_sqlite_rolled_back_runs_again_one_by_one_and_writes_once(
    tmp_path: Path,
) -> None:
    """An error SQLite answers by rolling the whole transaction back (disk full, I/O error)
    loses the group's writes so far: they are written again, once each."""
    store = Store(tmp_path / "s.db")

    def rolled_back() -> None:
        store.execute("ROLLBACK")  # as SQLite does on SQLITE_FULL or SQLITE_IOERR
        store.execute("SELECT * FROM no_such_table")

    outcomes = store.run_group(
        [
            lambda: store.append("tg", "1", [ChatMessage("user", "a")]),
            rolled_back,
            lambda: store.append("tg", "1", [ChatMessage("user", "b")]),
        ]
    )
    assert [error is None for _, error in outcomes] == [True, False, True]
    assert _rows(tmp_path / "s.db", "SELECT content FROM messages ORDER BY id") == [
        ("a",),
        ("b",),
    ]
    store.close()


def test_close_inside_a_group_keeps_what_ran_before_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    outcomes = store.run_group(
        [
            lambda: store.set_draft(_draft("1", "kept")),
            store.close,
            lambda: store.set_draft(_draft("2", "too late")),
        ]
    )
    assert [error is None for _, error in outcomes] == [True, True, False]
    assert isinstance(outcomes[2][1], sqlite3.ProgrammingError)
    assert _rows(tmp_path / "s.db", "SELECT chat_id FROM drafts") == [("1",)]


# -- grouped is the same as one by one (hypothesis) --------------------------------------------

_CHATS = st.sampled_from(["1", "2"])
_OPS = st.one_of(
    st.tuples(st.just("append"), _CHATS, st.text(max_size=3)),
    st.tuples(st.just("history"), _CHATS, st.just("")),
    st.tuples(st.just("set_draft"), _CHATS, st.text(max_size=3)),
    st.tuples(st.just("clear_draft"), _CHATS, st.just("")),
    st.tuples(st.just("draft"), _CHATS, st.just("")),
    st.tuples(st.just("set_state"), _CHATS, st.text(max_size=3)),
    st.tuples(st.just("failing_load"), _CHATS, st.just("")),
    st.tuples(st.just("bad_statement"), _CHATS, st.just("")),
)


def _call(store: Store, op: tuple[str, str, str]) -> Callable[[], Any]:
    kind, chat, text = op
    calls: dict[str, Callable[[], Any]] = {
        "append": lambda: store.append("tg", chat, [ChatMessage("user", text)]),
        "history": lambda: [m.content for m in store.history("tg", chat)],
        "set_draft": lambda: store.set_draft(_draft(chat, text)),
        "clear_draft": lambda: store.clear_draft("tg", chat, None),
        "draft": lambda: store.draft("tg", chat, None),
        "set_state": lambda: store.set_state("tg", chat, text),
        "failing_load": _failing_load(store),
        "bad_statement": lambda: store.execute("UPDATE no_such_table SET x = 1"),
    }
    return calls[kind]


def _observed(outcomes: Sequence[Outcome]) -> list[tuple[Any, str | None]]:
    return [(result, None if error is None else type(error).__name__) for result, error in outcomes]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_OPS, max_size=30),
    sizes=st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=10),
)
def test_grouped_calls_observe_and_leave_what_one_by_one_calls_do(
    ops: list[tuple[str, str, str]], sizes: list[int]
) -> None:
    alone, grouped = Store(":memory:"), Store(":memory:")
    expected = _observed(run_each([_call(alone, op) for op in ops]))
    observed: list[tuple[Any, str | None]] = []
    start, turn = 0, 0
    while start < len(ops):
        size = sizes[turn % len(sizes)]
        group = [_call(grouped, op) for op in ops[start : start + size]]
        observed += _observed(grouped.run_group(group))
        start, turn = start + size, turn + 1
    assert observed == expected
    for table in ("messages", "channel_state"):
        assert _contents(grouped, table) == _contents(alone, table)
    assert grouped.drafts() == alone.drafts()
    alone.close()
    grouped.close()


def _contents(store: Store, table: str) -> list[tuple[Any, ...]]:
    return [row[:-1] if table == "messages" else row for row in store.dump(table)]  # no time


# -- through the worker thread ------------------------------------------------------------------


async def _queued_behind_a_gate(
    store: Store,
    calls: Sequence[Callable[[], Any]],
    on_return: Callable[[int], None] = lambda index: None,
) -> tuple[list[asyncio.Future[Any]], list[int]]:
    """Submit ``calls`` while the worker is held on a first call, so that they wait together
    and run as one group; the futures of their awaits, and the sizes of the groups run.
    ``on_return(index)`` runs on the loop as call ``index``'s await returns."""
    sizes: list[int] = []

    def recording(group: Sequence[Callable[[], Any]]) -> list[Outcome]:
        sizes.append(len(group))
        return store.run_group(group)

    worker = StoreWorker(run_group=recording)
    taken, gate = threading.Event(), threading.Event()
    held = asyncio.ensure_future(worker.run(lambda: (taken.set(), gate.wait())))
    await asyncio.to_thread(taken.wait)  # the thread took the gate's call alone
    futures = [asyncio.ensure_future(worker.run(call)) for call in calls]
    for index, future in enumerate(futures):
        future.add_done_callback(lambda _, index=index: on_return(index))
    await asyncio.sleep(0)  # every call is in the queue
    gate.set()
    await held
    await asyncio.wait(futures)
    worker.stop()
    return futures, sizes


async def test_each_await_returns_with_its_write_committed_and_the_order_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    store = Store(path)
    calls: list[Callable[[], Any]] = []
    for i in range(40):
        calls.append(lambda i=i: store.append("tg", "1", [ChatMessage("user", str(i))]))
        calls.append(lambda: [m.content for m in store.history("tg", "1")])
    seen_at_return: dict[int, list[tuple[Any, ...]]] = {}

    def look(index: int) -> None:
        seen_at_return[index] = _rows(path, "SELECT content FROM messages ORDER BY id")

    futures, sizes = await _queued_behind_a_gate(store, calls, look)
    assert sizes == [1, 80]  # the gate, then every call as one group
    for i in range(40):
        assert (str(i),) in seen_at_return[2 * i]  # committed when its await returned
        assert futures[2 * i + 1].result() == [str(j) for j in range(i + 1)]  # in order
    store.close()


async def test_a_failing_call_raises_to_its_own_caller_through_the_worker(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    futures, sizes = await _queued_behind_a_gate(
        store,
        [
            lambda: store.set_draft(_draft("1", "a")),
            _failing_load(store),
            lambda: store.set_draft(_draft("2", "b")),
        ],
    )
    assert sizes == [1, 3]
    assert futures[0].result() is None and futures[2].result() is None
    assert isinstance(futures[1].exception(), sqlite3.IntegrityError)
    assert _rows(tmp_path / "s.db", "SELECT chat_id FROM drafts ORDER BY chat_id") == [
        ("1",),
        ("2",),
    ]
    store.close()


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from orchestrator.store import Store
    from orchestrator.store.sqlite_async import AsyncStore
    from providers.base import ChatMessage

    async def main() -> None:
        store = AsyncStore(Store(sys.argv[1]))
        n = 0
        async def one(i: int) -> None:
            await store.append("tg", str(i % 7), [ChatMessage("user", str(i))])
            print(i, flush=True)
        while True:
            await asyncio.gather(*(one(n + k) for k in range(50)))
            n += 50

    asyncio.run(main())
    """
)


def test_sigkill_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """Every write whose await returned (the child then printed its number) is in the file
    after the child is killed with SIGKILL in the middle of its groups."""
    path = tmp_path / "s.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    acknowledged: set[str] = set()
    try:
        while len(acknowledged) < 3000:
            line = child.stdout.readline()
            assert line, "the writer ended early"
            acknowledged.add(line.strip())
        child.send_signal(signal.SIGKILL)
        acknowledged.update(line.strip() for line in child.stdout if line.strip())
    finally:
        child.kill()
        child.wait()
    stored = {row[0] for row in _rows(path, "SELECT content FROM messages")}
    assert acknowledged <= stored


async def test_a_group_runner_that_raises_fails_every_call_of_its_group() -> None:
    """No caller waits forever: the runner's error is each of its calls' error."""

    def broken(group: Sequence[Callable[[], Any]]) -> list[Outcome]:
        raise RuntimeError("runner broke")

    worker = StoreWorker(run_group=broken)
    results = await asyncio.gather(
        worker.run(lambda: 1), worker.run(lambda: 2), return_exceptions=True
    )
    worker.stop()
    assert [str(r) for r in results] == ["runner broke", "runner broke"]
