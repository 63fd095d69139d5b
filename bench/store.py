"""The SQLite store's cost per call through :class:`AsyncStore`: grouped vs. one by one
(architecture §7 "Store", group commit).

N conversations at once, each making the calls a turn of ``bench/scale.py`` makes (its history,
its chat settings, a usage row, a round record, the reply's in-flight record at each of 5
writes, the new messages, the record cleared), each call awaited on an asyncio loop, into a
file in a temporary directory (WAL, ``synchronous=NORMAL``). Two ways, alternated in rounds:

- ``grouped``: today's store — the calls waiting together run in one transaction
  (:meth:`Store.run_group`);
- ``one_by_one``: the same store whose worker runs each call on its own (autocommit, one
  commit per call: the path before).

Figures per way (median of the rounds): CPU of the store's thread per call and CPU of the whole
process per call (µs; the thread's from ``/proc/self/task``, Linux), and wall time per call.
Usage: ``python bench/store.py [CONVERSATIONS] [ROUNDS]`` (or ``main()`` from a runner).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.store import Draft, RoundRecord, Store
from orchestrator.store.control_rows import UsageRecord
from orchestrator.store.sqlite_async import AsyncStore
from orchestrator.store.worker import Outcome, run_each
from providers.base import ChatMessage

WRITES = 5
CALLS_PER_TURN = 6 + WRITES
ANSWER = "x" * 2000


class _OneByOne(Store):
    """The store with the path before group commit: every call on its own."""

    def run_group(self, calls: Sequence[Callable[[], Any]]) -> list[Outcome]:
        return run_each(calls)


def _thread_cpu(name: str) -> float:
    """CPU seconds of this process's thread ``name`` (nan where /proc has no tasks)."""
    tick = os.sysconf("SC_CLK_TCK")
    for thread in threading.enumerate():
        if thread.name == name and thread.native_id is not None:
            try:
                with open(f"/proc/self/task/{thread.native_id}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                return float("nan")
            return (int(fields[11]) + int(fields[12])) / tick
    return float("nan")


async def _turn(store: AsyncStore, chat: str) -> None:
    await store.history("bench", chat)
    await store.controls.chat_settings("bench", chat, None)
    text = ""
    for _ in range(WRITES):
        text += ANSWER[: len(ANSWER) // WRITES]
        await store.set_draft(Draft("bench", chat, None, "m1", text, False, ("m1",), "u1"))
    await store.controls.record_usage(
        UsageRecord("bench", chat, None, "u1", "bench", "m", 10, 0, 400, 0.0, False, time.time())
    )
    await store.record_round(
        RoundRecord("bench", chat, "bench", 1, 12.0, 10, 400, 0, 5, "stop", "ok")
    )
    await store.append(
        "bench", chat, [ChatMessage("user", "tell me"), ChatMessage("assistant", text)]
    )
    await store.clear_draft("bench", chat, None)


async def _one_run(store_class: type[Store], conversations: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = AsyncStore(store_class(Path(tmp) / "bench.db"))
        await store.history("bench", "warm")  # the worker thread started
        thread0, cpu0, wall0 = _thread_cpu("relaybot-store"), time.process_time(), time.monotonic()
        await asyncio.gather(*(_turn(store, f"c{i}") for i in range(conversations)))
        calls = conversations * CALLS_PER_TURN
        thread = (_thread_cpu("relaybot-store") - thread0) / calls * 1e6
        process = (time.process_time() - cpu0) / calls * 1e6
        wall = (time.monotonic() - wall0) / calls * 1e6
        await store.aclose()
    return thread, process, wall


def run(conversations: int = 1000, rounds: int = 3) -> dict[str, tuple[float, float, float]]:
    """Per way: (store thread µs CPU per call, process µs CPU per call, wall µs per call)."""
    ways: dict[str, type[Store]] = {"grouped": Store, "one_by_one": _OneByOne}
    samples: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, store_class in ways.items():
            samples[way].append(asyncio.run(_one_run(store_class, conversations)))
    figures: dict[str, tuple[float, float, float]] = {}
    for way, runs in samples.items():
        thread, process, wall = (statistics.median(run[i] for run in runs) for i in range(3))
        figures[way] = (thread, process, wall)
    return figures


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    conversations = int(args[0]) if args else 1000
    rounds = int(args[1]) if len(args) > 1 else 3
    figures = run(conversations, rounds)
    print(f"store: {conversations} conversations, {CALLS_PER_TURN} calls each, {rounds} rounds")
    for way, (thread, process, wall) in figures.items():
        print(
            f"  {way:10}: store thread {thread:6.1f} µs CPU/call, process {process:6.1f} µs"
            f" CPU/call, wall {wall:6.1f} µs/call"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
