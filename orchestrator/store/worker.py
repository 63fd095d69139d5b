"""One worker thread that runs a blocking store's calls in order (architecture §7).

``anyio.to_thread.run_sync`` with a capacity-1 limiter runs one call at a time, but hands each
call back through the event loop before the next may start: the limiter is released by the
finished call's task and then wakes the next waiting task, two turns of the loop per call. With
a thousand turns starting at once on a busy loop, the calls queue behind those turns (a turn's
first call, its history, waited seconds). :class:`StoreWorker` keeps the order and the one call
at a time, but its thread takes the next call from a queue as soon as one is done, and hands the
results back to the loop as they are ready.

A call whose caller is cancelled still runs (its result is dropped): writes are never lost and
never reordered. Needs an asyncio event loop (uvloop included).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["StoreWorker"]

_T = TypeVar("_T")

_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class StoreWorker:
    """Runs blocking calls on one daemon thread, in the order they were submitted."""

    def __init__(self, name: str = "relaybot-store") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    async def run(self, call: Callable[[], _T]) -> _T:
        """``call()`` on the worker thread; its result, or what it raised.

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

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            call, loop, future = job
            result: Any = None
            error: BaseException | None = None
            try:
                result = call()
            except BaseException as exc:  # handed to the caller as it is
                error = exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop is closed: nobody awaits the result
                pass
