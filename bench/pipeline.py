"""Pipeline cost: CPU per delta from a provider event to the channel call, at growing answers.

An in-process provider yields an answer of a given size (12 KB, 256 KB, 1 MB by default) in text
deltas of 3–6 characters (no I/O; it awaits ``asyncio.sleep(0)`` before each one, as a network
read yields to the loop) into the real round runner, turn loop, outbound policy, store and
delivery driver, writing to a no-op channel (:class:`bench.channels.NoopChannel`) in ``partial``
mode with a draft interval of 0 ms: the driver takes the held text through the policy and writes
before every pass of its loop, so nearly every delta reaches the redaction window and a draft
edit on its own (the worst case per delta; the daemon's 1 s interval batches a second of deltas
per pass).

Figures, each the process CPU (``time.process_time_ns``: the store's worker thread included) over
the whole turn — its start, every delta, the final flush, the final piece guard and write —
divided by the deltas, minus the same provider drained by a bare ``async for``:

- **µs/delta**: the whole pipeline; flat means the 1 MB answer's within 1.3× of the 12 KB one's;
- **first / last tenth**: the thread's CPU between consecutive deltas, mean over the answer's first
  and last tenth (a cost that grows with the text so far shows as last > first);
- **policy** (``ReplyPolicy.feed`` and the window), **guard** (``redact_piece``: the piece guard
  delivery runs, :func:`orchestrator.delivery.hooks.guard_piece`, here once, on the final text;
  the run fails if it was never called, so the figure cannot read 0 from a dead path), and
  **rest** (everything else: round runner, turn loop, delivery driver and engine, store, the
  event loop), each per delta; **feeds** and **writes** count the policy's feeds and the
  channel's writes.

Also **policy alone**: ``ReplyPolicy.feed`` called once per delta (as when a write could start
after every delta: a slow model), µs per call over the whole answer and its last tenth.

Of ``repeats`` runs the median (by µs/delta) is kept.

Usage: ``python -m bench.pipeline [--kb 12 256 1024] [--repeats 3]``
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

from bench.args import decimal
from bench.channels import BenchChannelConfig, NoopChannel
from bench.streams import deltas
from channels.base import InboundMessage
from config.models import AgentConfig, PolicyConfig, ProviderConfig
from orchestrator.policy import OutboundPolicy
from orchestrator.store import Store
from orchestrator.tools.registry import ToolRegistry
from orchestrator.turn.rounds import ChainEntry, RoundRunner
from orchestrator.turn.runner import TurnRunner
from providers.base import ChatRequest, CompletionResponse, ModelProvider
from providers.events import Final, StreamChunk, StreamEvent, TextDelta

__all__ = ["answer_deltas", "main", "measure", "run"]

SIZES_KB = (12, 256, 1024)
_clock = time.thread_time_ns
_cpu = time.process_time_ns


def answer_deltas(kb: int) -> list[str]:
    """Deltas of 3–6 characters (:func:`bench.streams.deltas`) making an answer of ``kb`` KB."""
    texts = deltas(kb * 1024 // 4 + 16)
    out, size = [], 0
    for text in texts:
        if size >= kb * 1024:
            break
        out.append(text)
        size += len(text)
    return out


class ScriptedProvider(ModelProvider):
    """Yields the given deltas then ``Final``, stamping the CPU clock before each yield."""

    def __init__(self, texts: list[str]) -> None:
        self.name = "scripted"
        self.texts = texts
        self.stamps: list[int] = []

    def supports_streaming(self) -> bool:
        return True

    def supports_streaming_tool_events(self) -> bool:
        return True

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        stamps = self.stamps
        for text in self.texts:
            await asyncio.sleep(0)
            stamps.append(_clock())
            yield TextDelta(StreamChunk(delta=text))
        stamps.append(_clock())
        yield Final("stop")

    async def complete(self, request: ChatRequest) -> CompletionResponse:
        raise NotImplementedError


class _Timed:
    """Accumulates the CPU time (ns) and the calls of one function."""

    def __init__(self) -> None:
        self.ns = 0
        self.calls = 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = _clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ns += _clock() - start
                self.calls += 1

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


def _tenths(stamps: list[int]) -> tuple[float, float]:
    """Mean µs between consecutive stamps over the first and the last tenth."""
    gaps = [(b - a) / 1000 for a, b in itertools.pairwise(stamps[:-1])]
    tenth = max(1, len(gaps) // 10)
    return statistics.fmean(gaps[:tenth]), statistics.fmean(gaps[-tenth:])


async def _baseline(texts: list[str]) -> dict[str, float]:
    provider = ScriptedProvider(texts)
    start = _cpu()
    async for _ in provider.stream(ChatRequest(messages=())):
        pass
    total = (_cpu() - start) / 1000 / len(texts)
    first, last = _tenths(provider.stamps)
    return {"total": total, "first": first, "last": last}


async def _pipeline(texts: list[str], store_dir: Path, interval_ms: int) -> dict[str, float]:
    provider = ScriptedProvider(texts)
    config = ProviderConfig(kind="ollama", model="scripted", max_retries=0)
    policy_timer, guard_timer = _Timed(), _Timed()
    store = Store(store_dir / "bench.db")
    try:
        turns = TurnRunner(
            agent=AgentConfig(providers=["scripted"], tools=[]),
            rounds=RoundRunner([ChainEntry(provider, config)]),
            tools=ToolRegistry({}),
            store=store,
            policies=_TimedPolicies(policy_timer, guard_timer),
        )
        channel = NoopChannel(BenchChannelConfig(draft_update_interval_ms=interval_ms))
        inbound = InboundMessage("bench", "c1", "u1", "user", "hi", "m1")
        start = _cpu()
        outcome = await turns.run(channel, inbound)
        total = _cpu() - start
    finally:
        store.close()
    if channel.writes == 0:
        raise RuntimeError("the channel got no write: its primitives no longer match Channel's")
    if outcome.outcome != "ok":
        raise RuntimeError(f"pipeline run ended {outcome.outcome}: {outcome.cause}")
    if guard_timer.calls == 0 or policy_timer.calls == 0:
        raise RuntimeError("the policy's feed or piece guard was never called: a dead path")
    n = len(texts)
    first, last = _tenths(provider.stamps)
    return {
        "total": total / 1000 / n,
        "first": first,
        "last": last,
        "policy": policy_timer.ns / 1000 / n,
        "feeds": policy_timer.calls,
        "guard": guard_timer.ns / 1000 / n,
        "guard_ms": guard_timer.ns / 1e6,
        "writes": channel.writes,
    }


def measure(kb: int, repeats: int = 3, interval_ms: int = 0) -> dict[str, float]:
    """Per-delta figures (µs) for an answer of ``kb`` KB; the median of ``repeats`` runs (by
    µs/delta) is kept."""
    texts = answer_deltas(kb)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            base = asyncio.run(_baseline(texts))
            full = asyncio.run(_pipeline(texts, Path(tmp) / str(i), interval_ms))
            for key in ("total", "first", "last"):
                full[key] -= base[key]
            full["rest"] = full["total"] - full["policy"] - full["guard"]
            full["deltas"] = len(texts)
            runs.append(full)
    runs.sort(key=lambda r: r["total"])
    return runs[len(runs) // 2]


def policy_per_delta(kb: int, repeats: int = 3) -> tuple[float, float, float]:
    """µs of CPU per ``ReplyPolicy.feed`` called once per delta (a write could start after every
    delta: a slow model), the whole answer and its first and last tenth; best of ``repeats``."""
    texts = answer_deltas(kb)
    tenth = max(1, len(texts) // 10)
    best = (float("inf"), float("inf"), float("inf"))
    policy = OutboundPolicy.from_config(PolicyConfig())
    for _ in range(repeats):
        reply = policy.new_reply("bench", "c1")
        feed = reply.feed
        start = _clock()
        for text in texts[:tenth]:
            feed(text)
        first = _clock()
        for text in texts[tenth:-tenth]:
            feed(text)
        last = _clock()
        for text in texts[-tenth:]:
            feed(text)
        end = _clock()
        reply.finish()
        run_ = ((end - start) / len(texts), (first - start) / tenth, (end - last) / tenth)
        best = min(best, tuple(ns / 1000 for ns in run_))  # type: ignore[assignment]
    return best


def run(
    sizes_kb: tuple[int, ...] = SIZES_KB, repeats: int = 3, interval_ms: int = 0
) -> dict[str, float]:
    """The pipeline section; returns the summary figures (µs per delta), keyed ``{kb}_...``,
    and ``flatness`` (the largest answer's µs/delta over the smallest's)."""
    summary: dict[str, float] = {}
    print(
        "pipeline: µs CPU per delta beyond the provider, whole turn (partial mode, draft "
        f"interval {interval_ms} ms, no-op channel; median of {repeats})"
    )
    print(f"  {'answer':>7} {'deltas':>7} {'µs/delta':>8} {'first':>6} {'last':>6} "
          f"{'policy':>6} {'guard':>6} {'rest':>6} {'feeds':>6} {'writes':>6}")  # fmt: skip
    measure(4, 1, interval_ms)  # warm-up: imports, compiled patterns, the renderer's first use
    for kb in sizes_kb:
        r = measure(kb, repeats, interval_ms)
        print(
            f"  {kb:5d}KB {int(r['deltas']):7d} {r['total']:8.2f} {r['first']:6.2f} "
            f"{r['last']:6.2f} {r['policy']:6.2f} {r['guard']:6.2f} {r['rest']:6.2f} "
            f"{int(r['feeds']):6d} {int(r['writes']):6d}"
        )
        for key in ("total", "first", "last", "policy", "guard", "rest"):
            summary[f"{kb}_{key}"] = r[key]
    summary["flatness"] = summary[f"{sizes_kb[-1]}_total"] / summary[f"{sizes_kb[0]}_total"]
    print(f"  largest / smallest answer, µs per delta: {summary['flatness']:.2f}x")
    print("policy alone: µs CPU per ReplyPolicy.feed, one call per delta (best of 3)")
    print(f"  {'answer':>7} {'µs/delta':>8} {'first':>6} {'last':>6}")
    for kb in sizes_kb:
        whole, first, last = policy_per_delta(kb)
        print(f"  {kb:5d}KB {whole:8.2f} {first:6.2f} {last:6.2f}")
        summary[f"{kb}_feed"], summary[f"{kb}_feed_last"] = whole, last
    summary["feed_flatness"] = summary[f"{sizes_kb[-1]}_feed"] / summary[f"{sizes_kb[0]}_feed"]
    print(f"  largest / smallest answer, µs per feed: {summary['feed_flatness']:.2f}x")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", type=decimal, nargs="+", default=list(SIZES_KB))
    parser.add_argument("--repeats", type=decimal, default=3)
    parser.add_argument("--interval-ms", type=decimal, default=0)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    run(tuple(args.kb), args.repeats, args.interval_ms)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
