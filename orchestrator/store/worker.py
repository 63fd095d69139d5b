"""One worker thread that runs a blocking store's calls in order, in groups (architecture §7).

``anyio.to_thread.run_sync`` with a capacity-1 limiter runs one call at a time, but hands each
call back through the event loop before the next may start: the limiter is released by the
finished call's task and then wakes the next waiting task, two turns of the loop per call. With
a thousand turns starting at once on a busy loop, the calls queue behind those turns (a turn's
first call, its history, waited seconds). :class:`StoreWorker` keeps the order and the one call
at a time, but its thread takes the next calls from a queue as soon as it is free.

Theory of operation
-------------------
The thread takes every call waiting in the queue at once (at most :data:`MAX_GROUP`), in order,
and hands the whole group to ``run_group`` (a :data:`GroupRunner`), which runs them in order
and returns one :data:`Outcome` per call. The SQLite store's runner
(:meth:`~orchestrator.store.sqlite.Store.run_group`) runs a group in one transaction, so a
thousand answers streaming at once pay one commit per group instead of one per call. Only once
``run_group`` returned — every write of the group committed — are the outcomes handed back to
the event loop, in order, with one ``call_soon_threadsafe`` per group (one self-pipe write to
wake the loop, not one per call). The default runner, :func:`run_each`, runs the calls one by
one as they are.

A call whose caller is cancelled still runs (its result is dropped): writes are never lost and
never reordered. Needs an asyncio event loop (uvloop included).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["MAX_GROUP", "GroupRunner", "Outcome", "StoreWorker", "run_each"]

_T = TypeVar("_T")

MAX_GROUP = 256
"""The most calls the thread takes from the queue at once: a group's first caller waits for the
whole group (a call is some tens of µs, so a full group is a few milliseconds)."""

Outcome = tuple[Any, BaseException | None]
"""A call's result and ``None``, or ``None`` and what it raised."""

GroupRunner = Callable[[Sequence[Callable[[], Any]]], list[Outcome]]
"""Runs calls in order; one :data:`Outcome` per call, in the same order. Must not raise."""

_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]
_Settlement = tuple["asyncio.Future[Any]", Any, BaseException | None]


def run_each(calls: Sequence[Callable[[], Any]]) -> list[Outcome]:
    """Run ``calls`` one by one, each on its own; what each returned or raised."""
    outcomes: list[Outcome] = []
    for call in calls:
        try:
            outcomes.append((call(), None))
        except BaseException as exc:  # handed to the caller as it is
            outcomes.append((None, exc))
    return outcomes


def _settle(settlements: list[_Settlement]) -> None:
    for future, result, error in settlements:
        if future.cancelled():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


class StoreWorker:
    """Runs blocking calls on one daemon thread, in the order they were submitted, the calls
    waiting together as one group through ``run_group`` (default :func:`run_each`)."""

    def __init__(self, name: str = "relaybot-store", run_group: GroupRunner = run_each) -> None:
        self._name = name
        self._run_group = run_group
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    async def run(self, call: Callable[[], _T]) -> _T:
        """``call()`` on the worker thread; its result, or what it raised. Returns once the
        group it ran in has ended (with the SQLite store: committed).

        Raises:
            RuntimeError: after :meth:`stop`.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._start()
        self._jobs.put((call, loop, future))
        return await future

    def stop(self) -> None:
        """Let the thread end once the calls already submitted have run."""
        with self._lock:
            if self._thread is not None:
                self._jobs.put(None)
                self._thread = None

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()

    def _take(self) -> tuple[list[_Job], bool]:
        """The next group of jobs (waits for the first); True when stop was asked after it."""
        first = self._jobs.get()
        if first is None:
            return [], True
        jobs = [first]
        while len(jobs) < MAX_GROUP:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            jobs.append(job)
        return jobs, False

    def _work(self) -> None:
        stopping = False
        while not stopping:
            jobs, stopping = self._take()
            if not jobs:
                break
            try:
                outcomes = self._run_group([call for call, _, _ in jobs])
            except BaseException as exc:  # a runner that broke its word: tell every caller
                outcomes = [(None, exc)] * len(jobs)
            by_loop: dict[asyncio.AbstractEventLoop, list[_Settlement]] = {}
            for (_, loop, future), (result, error) in zip(jobs, outcomes, strict=True):
                by_loop.setdefault(loop, []).append((future, result, error))
            for loop, settlements in by_loop.items():
                try:
                    loop.call_soon_threadsafe(_settle, settlements)
                except RuntimeError:  # the loop is closed: nobody awaits the results
                    pass
