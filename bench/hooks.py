"""The ``on_message_sending`` hook's cost per piece: out of process vs. the old in-thread call
(architecture §4 "The hook").

The hook is the shipped example (``mask_email_addresses``) on a paragraph of 600 characters
with one address, the size of a ``multi_message`` piece. Three ways of calling it, each awaited
from an asyncio loop, one piece at a time, alternated in rounds within one run:

- ``process``: :meth:`HookWorkers.call` — one length-prefixed JSON frame each way over pipes to
  a worker process (today's path);
- ``thread``: the previous path, a daemon thread per piece whose result comes back through
  ``call_soon_threadsafe`` (kept here only to compare);
- ``direct``: the function called on the loop (a floor: what neither path can beat).

The figure is wall time per piece (µs, median of the rounds), since the cost is the round trip.
Usage: ``python bench/hooks.py [PIECES_PER_ROUND] [ROUNDS]`` (or ``main()`` from a runner).
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.policy.example_hooks import mask_email_addresses
from orchestrator.policy.hook import call_hook
from orchestrator.policy.hook_pool import HookWorkers

HOOK = "orchestrator.policy.example_hooks:mask_email_addresses"
PIECE = ("Here is what the report says about the rollout. " * 12)[:560] + " ann@example.org."


async def _in_thread(text: str) -> str | None:
    """The old path: the hook in a daemon thread of its own, the loop told by a callback."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def work() -> None:
        result = call_hook(mask_email_addresses, "bench", "1", text)
        loop.call_soon_threadsafe(functools.partial(future.set_result, result))

    threading.Thread(target=work, daemon=True).start()
    return await future


async def _direct(text: str) -> str | None:
    return call_hook(mask_email_addresses, "bench", "1", text)


async def _per_piece(call: Callable[[str], Awaitable[str | None]], pieces: int) -> float:
    """µs per piece for ``pieces`` calls in a row."""
    started = time.perf_counter()
    for _ in range(pieces):
        out = await call(PIECE)
        assert out is not None and out.endswith("[email].")
    return (time.perf_counter() - started) / pieces * 1e6


async def measure(pieces: int = 2000, rounds: int = 5) -> dict[str, float]:
    """Median µs per piece of each way (see the module docstring), and worker start-up in ms."""
    started = time.perf_counter()
    hooks = HookWorkers(HOOK, workers=1)
    await hooks.start()
    start_ms = (time.perf_counter() - started) * 1000
    ways: dict[str, Callable[[str], Awaitable[str | None]]] = {
        "process": functools.partial(hooks.call, "bench", "1"),
        "thread": _in_thread,
        "direct": _direct,
    }
    figures: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for call in ways.values():  # warm-up
            await _per_piece(call, 50)
        for _ in range(rounds):
            for name, call in ways.items():
                figures[name].append(await _per_piece(call, pieces))
    finally:
        await hooks.aclose()
    summary = {name: statistics.median(values) for name, values in figures.items()}
    summary["worker_start_ms"] = start_ms
    return summary


def main() -> None:
    pieces = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    s = asyncio.run(measure(pieces, rounds))
    print(f"on_message_sending per piece of {len(PIECE)} characters ({pieces} pieces x {rounds})")
    print(f"{'way':<10}{'µs/piece':>10}")
    for name in ("process", "thread", "direct"):
        print(f"{name:<10}{s[name]:>10.1f}")
    print(f"process / thread: {s['process'] / s['thread']:.2f}")
    print(f"worker start (interpreter + hook import): {s['worker_start_ms']:.0f} ms")


if __name__ == "__main__":
    main()
