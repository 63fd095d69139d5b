"""Pipeline cost: CPU per delta from a provider event to the channel call, beyond the provider.

An in-process provider yields ``n`` text deltas of 3–6 characters (no I/O; it awaits
``asyncio.sleep(0)`` before each one, as a network read yields to the loop) into the real
round runner, turn loop, outbound policy and delivery driver, writing to a no-op channel in
``partial`` mode (:class:`bench.channels.NoopChannel`). The provider stamps the thread's CPU
clock (``time.thread_time_ns``) before each yield; the difference between consecutive stamps is
what one delta cost everything downstream (the consumer's work and whatever the loop ran
meanwhile: the delivery task). The same provider drained by a bare ``async for`` gives the
baseline, subtracted: the figure is the cost *beyond the provider*.

The parts: **policy** (``ReplyPolicy.feed`` and ``redact_piece``: redaction window and piece
guard, as delivery calls it, through :func:`orchestrator.delivery.hooks.guard_piece`; no hook is
configured), **delivery** (``DeliveryDriver.feed`` and the driver task's turns of the loop: engine,
layout, channel call), **rest** (round runner, turn loop, ``<think>`` filter: the remainder).
Median and p99 per delta; a burst (the whole answer as fast as it can be consumed) at two
answer lengths.

Usage: ``python -m bench.pipeline [--deltas 1000 8000]``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from bench.channels import NoopChannel
from bench.streams import deltas
from channels.base import InboundMessage
from config.models import AgentConfig, PolicyConfig, ProviderConfig
from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.policy import OutboundPolicy
from orchestrator.store import Store
from orchestrator.tools.registry import ToolRegistry
from orchestrator.turn.rounds import ChainEntry, RoundRunner
from orchestrator.turn.runner import TurnRunner
from providers.base import ChatRequest, CompletionResponse, ModelProvider
from providers.events import Final, StreamChunk, StreamEvent, TextDelta

__all__ = ["main", "measure", "run"]

_clock = time.thread_time_ns


class ScriptedProvider(ModelProvider):
    """Yields the given deltas then ``Final``, stamping the CPU clock before each yield."""

    def __init__(self, texts: list[str]) -> None:
        self.name = "scripted"
        self.texts = texts
        self.stamps: list[int] = []
        self.loop_ns: list[int] = []

    def supports_streaming(self) -> bool:
        return True

    def supports_streaming_tool_events(self) -> bool:
        return True

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        stamps, loop_ns = self.stamps, self.loop_ns
        for text in self.texts:
            before = _clock()
            await asyncio.sleep(0)
            now = _clock()
            loop_ns.append(now - before)
            stamps.append(now)
            yield TextDelta(StreamChunk(delta=text))
        stamps.append(_clock())
        yield Final("stop")

    async def complete(self, request: ChatRequest) -> CompletionResponse:
        raise NotImplementedError


class _Timed:
    """Accumulates the CPU time of calls to one function (ns)."""

    def __init__(self) -> None:
        self.ns = 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = _clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ns += _clock() - start

        return timed


class _TimedPolicies:
    """An :class:`OutboundPolicy` whose replies' ``feed``/``redact_piece`` (the piece guard
    delivery runs) are timed."""

    def __init__(self, feed: _Timed, guard: _Timed) -> None:
        self._policy = OutboundPolicy.from_config(PolicyConfig())
        self._feed, self._guard = feed, guard

    def new_reply(self, channel: str, chat_id: str, render: Any = None) -> Any:
        reply = self._policy.new_reply(channel, chat_id, render)
        reply.feed = self._feed.wrap(reply.feed)  # type: ignore[method-assign]
        reply.redact_piece = self._guard.wrap(reply.redact_piece)  # type: ignore[method-assign]
        return reply


def _gaps(stamps: list[int]) -> list[float]:
    return [(b - a) / 1000 for a, b in itertools.pairwise(stamps)]


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


async def _baseline(texts: list[str]) -> list[float]:
    provider = ScriptedProvider(texts)
    async for _ in provider.stream(ChatRequest(messages=())):
        pass
    return _gaps(provider.stamps)


async def _pipeline(texts: list[str], store_dir: Path) -> dict[str, float]:
    provider = ScriptedProvider(texts)
    config = ProviderConfig(kind="ollama", model="scripted", max_retries=0)
    policy_timer, guard_timer, feed_timer = _Timed(), _Timed(), _Timed()
    original_feed = DeliveryDriver.feed
    DeliveryDriver.feed = feed_timer.wrap(original_feed)  # type: ignore[method-assign]
    store = Store(store_dir / "bench.db")
    try:
        turns = TurnRunner(
            agent=AgentConfig(providers=["scripted"], tools=[]),
            rounds=RoundRunner([ChainEntry(provider, config)]),
            tools=ToolRegistry({}),
            store=store,
            policies=_TimedPolicies(policy_timer, guard_timer),
        )
        channel = NoopChannel()
        inbound = InboundMessage("bench", "c1", "u1", "user", "hi", "m1")
        outcome = await turns.run(channel, inbound)
    finally:
        DeliveryDriver.feed = original_feed  # type: ignore[method-assign]
        store.close()
    if channel.writes == 0:
        raise RuntimeError("the channel got no write: its primitives no longer match Channel's")
    if outcome.outcome != "ok":
        raise RuntimeError(f"pipeline run ended {outcome.outcome}: {outcome.cause}")
    gaps = _gaps(provider.stamps)
    loop_us = [ns / 1000 for ns in provider.loop_ns]
    return {
        "gaps": gaps,  # type: ignore[dict-item]
        "loop_us": statistics.fmean(loop_us),
        "policy_us": (policy_timer.ns + guard_timer.ns) / 1000 / len(texts),
        "guard_us": guard_timer.ns / 1000 / len(texts),
        "feed_us": feed_timer.ns / 1000 / len(texts),
        "writes": channel.writes,
    }


def measure(n: int, repeats: int = 5) -> dict[str, float]:
    """Per-delta figures (µs) for an ``n``-delta burst; of ``repeats`` runs, the median one
    (by mean cost) is kept."""
    texts = deltas(n)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            base = statistics.median(asyncio.run(_baseline(texts)))
            full = asyncio.run(_pipeline(texts, Path(tmp) / str(i)))
            gaps: list[float] = full.pop("gaps")  # type: ignore[assignment]
            # The bare provider's gap is nearly all its own loop turn: the delivery task runs
            # inside the pipeline's loop turns, so what those cost beyond it, plus
            # DeliveryDriver.feed, is delivery (redact_piece, which runs there, is policy).
            delivery = max(0.0, full["loop_us"] - base - full["guard_us"]) + full["feed_us"]
            mean = statistics.fmean(gaps) - base
            runs.append(
                {
                    "median": statistics.median(gaps) - base,
                    "p99": _p99(gaps) - base,
                    "mean": mean,
                    "policy": full["policy_us"],
                    "delivery": delivery,
                    "rest": mean - full["policy_us"] - delivery,
                    "writes": full["writes"],
                }
            )
    runs.sort(key=lambda r: r["mean"])
    return runs[len(runs) // 2]


def run(lengths: tuple[int, ...] = (1000, 8000), repeats: int = 5) -> dict[str, float]:
    """The pipeline section; returns the summary figures (µs per delta)."""
    summary: dict[str, float] = {}
    print("pipeline: µs CPU per delta beyond the provider (burst, no-op channel, partial mode)")
    print(f"  {'deltas':>7} {'median':>7} {'p99':>7} {'mean':>7} {'policy':>7} "
          f"{'delivery':>8} {'rest':>7} {'writes':>6}")  # fmt: skip
    for n in lengths:
        r = measure(n, repeats)
        print(
            f"  {n:7d} {r['median']:7.1f} {r['p99']:7.1f} {r['mean']:7.1f} {r['policy']:7.1f} "
            f"{r['delivery']:8.1f} {r['rest']:7.1f} {int(r['writes']):6d}"
        )
        for key in ("median", "p99", "mean", "policy", "delivery", "rest"):
            summary[f"{n}_{key}"] = r[key]
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deltas", type=int, nargs="+", default=[1000, 8000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    run(tuple(args.deltas), args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
