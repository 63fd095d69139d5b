"""Scale: N concurrent conversations streaming at 50 deltas/s through the whole pipeline.

For each N (default 100, 200, 300, 400, 500, 1000) a fresh client process (pinned to one core with
``taskset``) starts N conversations at once against the loopback server (:mod:`bench.server`, on
the other core; its collector set as ``relaybot run`` sets it, :mod:`orchestrator.ops.process`):
``openai_chat`` provider with its default pool (1000 connections; ``max_connections: N`` above 1000
conversations, as an operator serving that many at once sets it, so that every stream is open at
once and none waits for a connection), the real round runner, turn loop, outbound policy, store
(SQLite in a temporary directory) and delivery driver, into one
:class:`bench.channels.RecordingChannel` (``partial`` mode, one write per second per chat as
Telegram's default). Each answer is about 2 KB: ``deltas`` deltas of 11 characters, each carrying
its send time, one per 20 ms.

Figures per N: conversations completed (``ok``), TTFT p99 (start of the turn to the chat's first
write, ms), edit lag p50/p99 (how late a write came against when it was due: the draft interval
after the previous write, or when the server sent the delta that released its new text, whichever
is later; see :mod:`bench.channels`; ms), peak RSS of the process and peak RSS per conversation
above the process's RSS before the conversations started (KB), CPU per delta (process CPU time /
deltas delivered, µs; and in ``turns``, a delta's CPU in turns of a fixed pure-Python loop timed in
the same process before and after the run, :func:`reference_ms`: the figure to compare between runs
of different minutes, as the host's speed moves), and the cyclic garbage collector's pauses over
the run (the heap frozen before it, as the daemon freezes its own once started:
:func:`orchestrator.ops.process.refreeze`; ``gc ms``: their total; ``gc max``: the longest, during
which the loop did nothing: a write due then is that much late;
:class:`bench.collector.CollectorPauses`). The deltas per second one core sustains is the largest
offered load (N × 50) whose edit lag p99 stayed under 100 ms, as did every smaller N's;
``capacity`` is 1e6 / CPU per delta.

Rows marked ``spread`` start their conversations evenly over :data:`SPREAD_MS` instead of at once
(``--spread N …``): the N streams open over one second rather than in one millisecond, and the
chats' once-a-second writes are not in step.

Rows marked ``steady`` are a load that goes on (``--steady RATE …``, offered deltas per second):
conversations begin one after another, evenly over :data:`STEADY_SECS`, as many as carry RATE
deltas a second (RATE × STEADY_SECS / deltas; at 60,000 deltas/s, 3,226 conversations, about 1,200
streaming at any moment). Streams open while others end, the connections of ended streams are used
again, and no write of one chat is in step with another's: the loop gets no batch of a thousand
alike reads or writes to take in one pass, as a burst gives it. The deltas per second one core
sustains *steadily* is the largest RATE whose edit lag p99 stayed under 100 ms, as did every
smaller RATE's (per loop); its CPU per delta includes the ramps (the first and last answer's length
of the run, with fewer conversations open). A row's TTFT counts from when its conversation was due
to begin (in every row): an overloaded loop shows as streams waiting to open (TTFT p99 of seconds)
as much as in the lag.

Usage: ``python -m bench.scale [--n 100 200 300 400 500 1000] [--deltas 186] [--uvloop N …]
[--spread N …] [--repeat N …] [--steady RATE …] [--steady-repeats K]`` (``--steady`` without
``--n``: the steady rows alone; ``--steady-repeats``: runs of each rate, medians). Each N is 1
to :data:`MAX_CONVERSATIONS`, and so is a steady rate's count of conversations; ``--deltas`` is 1
to :data:`MAX_DELTAS`, ``--steady-repeats`` 1 to :data:`MAX_REPEATS`. A row is printed as its run
ends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.args import decimal
from bench.collector import CollectorPauses
from orchestrator.ops import process

__all__ = ["main", "run"]

ROOT = Path(__file__).resolve().parents[1]
RATE = 50  # deltas per second per conversation
SPREAD_MS = 1000
"""The ``spread`` rows start their N conversations evenly over this long (one draft interval)
instead of all at once, so the chats' writes and their streams' starts and ends are not in step,
as replies that did not all begin in the same millisecond."""
REPEATS = 3
"""Runs of each N given with ``--repeat`` (asyncio and uvloop alternating): their figures are the
medians. One run's lag p99 near the bound moves by half or more with the host's speed between
minutes, so the sustained figure is judged on the median of three."""
STEADY_SECS = 10
"""The ``steady`` rows begin their conversations evenly over this long (seconds)."""
MAX_CONVERSATIONS = 20_000
"""The most conversations one client process runs (each holds ~40-100 KB at its peak)."""
MAX_DELTAS = 100_000
"""The most deltas an answer has (33 minutes of streaming at 50 a second)."""
MAX_REPEATS = 10
"""The most runs of each steady rate (``--steady-repeats``)."""

REFERENCE_TURNS = 300_000
"""Turns of :func:`reference_ms`'s loop."""


def reference_ms() -> float:
    """CPU milliseconds of a fixed pure-Python loop (:data:`REFERENCE_TURNS` turns of dict
    stores and lookups and ``str``), the best of three: the host's speed at this minute, which
    on a shared machine moves by a third between minutes. A client times it before and after
    its run, outside the measured window; CPU per delta over it (``delta_turns``: a delta's
    CPU in turns of this loop) compares runs of different minutes, where µs do not."""
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        table: dict[int, str] = {}
        total = 0
        for i in range(REFERENCE_TURNS):
            table[i & 1023] = str(i)
            total += len(table.get((i * 7) & 1023, ""))
        best = min(best, time.process_time() - start)
    return best * 1000


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def _peak_rss_kb() -> int:
    """This process's peak RSS since its program started (``VmHWM``, per address space). Not
    ``ru_maxrss``: Linux carries that across ``execve``, so a run started by a parent that had
    grown (``python -m bench`` after its pipeline section) would read the parent's."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:  # statistics.quantiles needs two
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100)[q - 1]


async def _client(url: str, n: int, deltas: int, spread_ms: int = 0) -> dict[str, float]:
    import anyio
    from pydantic import SecretStr

    from bench.channels import RecordingChannel, StampingPolicies
    from channels.base import InboundMessage
    from config.models import AgentConfig, PolicyConfig, ProviderConfig
    from orchestrator.policy import OutboundPolicy
    from orchestrator.store import Store
    from orchestrator.tools.registry import ToolRegistry
    from orchestrator.turn.rounds import ChainEntry, RoundRunner
    from orchestrator.turn.runner import TurnRunner
    from providers.registry import build_provider
    from providers.transport import DEFAULT_MAX_CONNECTIONS

    gap_us = 1_000_000 // RATE
    config = ProviderConfig(
        kind="openai_chat",
        base_url=url + "/v1",
        api_key=SecretStr("sk-bench"),
        model=f"bench:{deltas}:{gap_us}:1",
        max_connections=max(n, DEFAULT_MAX_CONNECTIONS),
    )
    provider = build_provider("bench", config)
    outcomes: list[str] = []
    starts: dict[str, float] = {}
    channel = RecordingChannel()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        turns = TurnRunner(
            agent=AgentConfig(providers=["bench"], tools=[]),
            rounds=RoundRunner([ChainEntry(provider, config)]),
            tools=ToolRegistry({}),
            store=store,
            policies=StampingPolicies(OutboundPolicy.from_config(PolicyConfig()), channel),
        )

        async def conversation(i: int) -> None:
            chat = f"c{i}"
            starts[chat] = begun + spread_ms / 1000 * i / n  # when its question comes
            if spread_ms:
                await anyio.sleep(max(0.0, starts[chat] - time.monotonic()))
            inbound = InboundMessage("bench", chat, "u1", "user", "tell me", f"m{i}")
            outcomes.append((await turns.run(channel, inbound)).outcome)

        getattr(process, "refreeze", lambda: 0)()  # as the daemon freezes its heap once started
        reference = reference_ms()
        base_rss = _rss_kb()
        cpu0, wall0 = time.process_time(), time.monotonic()
        begun = wall0
        with CollectorPauses() as pauses:
            async with anyio.create_task_group() as group:
                for i in range(n):
                    group.start_soon(conversation, i)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        peak_kb = _peak_rss_kb()
        await provider.aclose()
        store.close()
    reference = (reference + reference_ms()) / 2
    if outcomes and not channel.first_write:
        raise RuntimeError("the channel got no write: its primitives no longer match Channel's")
    ttft = [
        (channel.first_write[c] - s) * 1000 for c, s in starts.items() if c in channel.first_write
    ]
    lags = [lag * 1000 for lag in channel.lags]
    completed = outcomes.count("ok")
    return {
        "n": n,
        "completed": completed,
        "failed": n - completed,
        "ttft_p99_ms": _pct(ttft, 99),
        "lag_p50_ms": _pct(lags, 50),
        "lag_p99_ms": _pct(lags, 99),
        "peak_rss_mb": peak_kb / 1024,
        "rss_per_conv_kb": (peak_kb - base_rss) / n,
        "cpu_us_per_delta": cpu / max(1, completed * deltas) * 1e6,
        "reference_ms": reference,
        "delta_turns": cpu / max(1, completed * deltas) / (reference / 1000 / REFERENCE_TURNS),
        "wall_s": wall,
        "gc_ms": pauses.total * 1000,
        "gc_max_ms": pauses.longest * 1000,
        "gc_full": pauses.full,
        "writes": channel.writes,
    }


def client_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", action="store_true")
    parser.add_argument("--url", required=True)
    parser.add_argument("--n", type=decimal, required=True)
    parser.add_argument("--deltas", type=decimal, default=186)
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("--spread-ms", type=decimal, default=0)
    args = parser.parse_args(argv)
    from orchestrator.ops.process import tune_collector

    tune_collector()  # as `relaybot run` does
    coro = _client(args.url, args.n, args.deltas, args.spread_ms)
    if args.uvloop:
        import uvloop

        result = uvloop.run(coro)
    else:
        result = asyncio.run(coro)
    print(json.dumps(result))
    return 0


def measure(
    url: str, n: int, deltas: int, *, uvloop: bool = False, spread_ms: int = 0, core: int = 1
) -> dict[str, float]:
    from bench.parse import _pin

    cmd = [*_pin(core), sys.executable, "-m", "bench.scale", "--client", "--url", url,
           "--n", str(n), "--deltas", str(deltas), "--spread-ms", str(spread_ms)]  # fmt: skip
    cmd += ["--uvloop"] if uvloop else []
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"scale N={n} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run(
    ns: tuple[int, ...] = (100, 200, 300, 400, 500, 1000),
    deltas: int = 186,
    uvloop_n: tuple[int, ...] = (),
    spread_n: tuple[int, ...] = (),
    repeat_n: tuple[int, ...] = (),
    repeats: int = REPEATS,
    steady: tuple[int, ...] = (),
    steady_uvloop: bool = False,
    steady_repeats: int = 1,
) -> dict[str, float]:
    """The scale section; returns the summary figures (medians over the runs of an N).
    ``steady``: offered loads (deltas/s, each at least one conversation's worth:
    :func:`steady_conversations`) run as ``steady`` rows on asyncio, and on uvloop too with
    ``steady_uvloop`` (see the module docstring), each ``steady_repeats`` times (the loops
    alternating, the order flipping every run; figures are the medians).

    Raises:
        ValueError: a steady rate too small to carry one conversation over :data:`STEADY_SECS`.
    """
    steady_n = {rate: steady_conversations(rate, deltas) for rate in steady}  # before the rows
    from bench.parse import running_server

    print(f"scale: N conversations at {RATE} deltas/s each, {deltas} deltas of 11 characters each "
          f"(begun at once; a steady row's N in all, begun over {STEADY_SECS} s)")  # fmt: skip
    print(f"  {'loop':24} {'N':>5} {'done':>5} {'ttft p99':>9} {'lag p50':>8} {'lag p99':>8} "
          f"{'peak RSS':>9} {'KB/conv':>8} {'µs/delta':>9} {'turns':>6} {'wall s':>7} {'gc ms':>6} "
          f"{'gc max':>7}")  # fmt: skip
    rows = _Rows()
    with running_server() as url:
        for n in ns:
            if n not in repeat_n:
                rows.append(("asyncio", measure(url, n, deltas)))
        for i in range(repeats if repeat_n else 0):
            for n in repeat_n:  # the loops alternate, the order flipping every run
                loops = [("asyncio", False)] + ([("uvloop", True)] if n in uvloop_n else [])
                for loop, on_uvloop in loops[:: -1 if i % 2 else 1]:
                    rows.append((loop, measure(url, n, deltas, uvloop=on_uvloop)))
        for n in uvloop_n:
            if n not in repeat_n:
                rows.append(("uvloop", measure(url, n, deltas, uvloop=True)))
        for n in spread_n:
            rows.append(("spread", measure(url, n, deltas, spread_ms=SPREAD_MS)))
        loops = [("asyncio", False)] + ([("uvloop", True)] if steady_uvloop else [])
        for i in range(steady_repeats):
            for rate, n in steady_n.items():
                for loop, on_uvloop in loops[:: -1 if i % 2 else 1]:
                    r = measure(url, n, deltas, uvloop=on_uvloop, spread_ms=STEADY_SECS * 1000)
                    rows.append((f"steady-{loop}", {**r, "offered": rate}))
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for loop, r in rows:
        runs.setdefault((loop, int(r["n"])), []).append(r)
    summary: dict[str, float] = {}
    sustained = {"asyncio": 0, "uvloop": 0}  # the spread rows are figures, not a sustained load
    missed: set[str] = set()  # loops with an N that missed: no larger N counts for them
    for (loop, n), results in sorted(runs.items()):
        if loop.startswith("steady-"):
            continue  # their figures: _steady_summary
        median = _medians(summary, f"{loop}_{n}", results, f"{loop:8} {n:5d}",
                          ("completed", "peak_rss_mb", "rss_per_conv_kb"))  # fmt: skip
        if loop not in sustained or loop in missed:
            continue
        if median < 100 and all(r["failed"] == 0 for r in results):
            sustained[loop] = n * RATE
        else:
            missed.add(loop)
    if uvloop_n:
        summary["sustained_uvloop_deltas_per_s"] = sustained["uvloop"]
        print(f"  sustained on uvloop: {sustained['uvloop']:,} deltas/s")
    burst = [r["cpu_us_per_delta"] for loop, r in rows if loop == "asyncio"]
    if burst:
        summary["sustained_deltas_per_s"] = sustained["asyncio"]
        summary["capacity_deltas_per_s"] = 1e6 / min(burst)
        print(
            f"  sustained with edit lag p99 < 100 ms: {sustained['asyncio']:,} deltas/s; capacity "
            f"from CPU per delta (the rows begun at once): {1e6 / min(burst):,.0f} deltas/s a core"
        )
    for rate, n in steady_n.items():  # whole conversations carry the rate asked for only nearly
        print(f"  steady {rate:,}/s: {n:,} conversation{'s' * (n != 1)} of {deltas} deltas "
              f"begun evenly over {STEADY_SECS} s carry {n * deltas / STEADY_SECS:,.0f} "
              "deltas/s")  # fmt: skip
    summary.update(_steady_summary([(loop[7:], r) for loop, r in rows if loop[:7] == "steady-"]))
    return summary


class _Rows(list[tuple[str, dict[str, float]]]):
    """The rows of a run: each printed as it is added (a run that fails later keeps them)."""

    def append(self, row: tuple[str, dict[str, float]]) -> None:
        super().append(row)
        loop, r = row
        label = f"{loop} {r['offered']:,.0f}/s" if "offered" in r else loop
        print(
            f"  {label:24} {r['n']:5d} {r['completed']:5d} {r['ttft_p99_ms']:7.0f}ms "
            f"{r['lag_p50_ms']:6.0f}ms {r['lag_p99_ms']:6.0f}ms {r['peak_rss_mb']:7.0f}MB "
            f"{r['rss_per_conv_kb']:8.0f} {r['cpu_us_per_delta']:9.1f} {r['delta_turns']:6.0f} "
            f"{r['wall_s']:7.1f} {r['gc_ms']:6.0f} {r['gc_max_ms']:5.0f}ms",
            flush=True,
        )


def steady_conversations(rate: int, deltas: int) -> int:
    """How many conversations of ``deltas`` deltas, begun evenly over :data:`STEADY_SECS`,
    carry ``rate`` deltas a second.

    Raises:
        ValueError: ``deltas`` < 1, ``rate`` below one conversation's worth (``deltas /
            STEADY_SECS``, rounded up), or so high that it needs more than
            :data:`MAX_CONVERSATIONS`.
    """
    least = -(-max(1, deltas) // STEADY_SECS)
    if deltas < 1 or rate < least:
        raise ValueError(
            f"a steady rate of {rate:,} deltas/s carries no conversation of {deltas:,} deltas "
            f"over {STEADY_SECS} s (at least {least:,})"
        )
    n = (2 * rate * STEADY_SECS + deltas) // (2 * deltas)  # rounded, in integers: any rate
    if n > MAX_CONVERSATIONS:
        raise ValueError(
            f"a steady rate of {rate:,} deltas/s needs {n:,} conversations of {deltas:,} "
            f"deltas, more than one client runs ({MAX_CONVERSATIONS:,})"
        )
    return n


def _medians(
    summary: dict[str, float],
    prefix: str,
    runs: list[dict[str, float]],
    label: str,
    extra: tuple[str, ...],
) -> float:
    """Put the medians of ``runs``' figures (those of every row, and ``extra``) into
    ``summary`` as ``<prefix>_<figure>``, and ``<prefix>_runs``; print the lag p99's spread
    when there was more than one run. Returns the median lag p99 (ms)."""
    for key in (*extra, "failed", "ttft_p99_ms", "lag_p50_ms", "lag_p99_ms",
                "cpu_us_per_delta", "delta_turns", "gc_ms", "gc_max_ms"):  # fmt: skip
        summary[f"{prefix}_{key}"] = statistics.median(r[key] for r in runs)
    summary[f"{prefix}_runs"] = len(runs)
    median = summary[f"{prefix}_lag_p99_ms"]
    if len(runs) > 1:
        lags = [r["lag_p99_ms"] for r in runs]
        print(f"  {label} median of {len(runs)} runs: lag p99 {median:.0f} ms "
              f"({min(lags):.0f}-{max(lags):.0f})")  # fmt: skip
    return median


def _steady_summary(rows: list[tuple[str, dict[str, float]]]) -> dict[str, float]:
    """The ``steady`` rows' figures (``steady_<loop>_<rate>_<figure>``, medians over the runs
    of a rate; ``_runs``: how many) and, per loop, the largest offered rate sustained
    (``steady_<loop>_sustained``: median lag p99 < 100 ms and nothing failed in any run, at it
    and at every smaller rate; 0 when the smallest missed)."""
    summary: dict[str, float] = {}
    for loop in dict.fromkeys(loop for loop, _ in rows):
        sustained, missed = 0, False
        for rate in sorted({r["offered"] for lp, r in rows if lp == loop}):
            runs = [r for lp, r in rows if lp == loop and r["offered"] == rate]
            lag = _medians(summary, f"steady_{loop}_{int(rate)}", runs,
                           f"steady {loop} {rate:,.0f}/s", ("n",))  # fmt: skip
            if not missed and lag < 100 and all(r["failed"] == 0 for r in runs):
                sustained = int(rate)
            else:
                missed = True
        summary[f"steady_{loop}_sustained"] = sustained
        print(f"  steady arrivals on {loop}: {sustained:,} deltas/s sustained")
    return summary


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--client" in argv:
        return client_main(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--n",
        type=decimal,
        nargs="+",
        default=None,
        help="conversations begun at once, a row each (default 100 200 300 400 500 1000; "
        "none when only --steady is given)",
    )
    parser.add_argument(
        "--deltas", type=decimal, default=186, help="deltas per answer, one per 20 ms (default 186)"
    )
    parser.add_argument(
        "--uvloop",
        type=decimal,
        nargs="*",
        default=None,
        help="N to run on uvloop (given at all: the steady rates too)",
    )
    parser.add_argument(
        "--spread", type=decimal, nargs="+", default=[], help="N to run with the starts spread"
    )
    parser.add_argument(
        "--repeat", type=decimal, nargs="+", default=[], help=f"N to run {REPEATS} times (medians)"
    )
    parser.add_argument(
        "--steady", type=decimal, nargs="+", default=[], help="offered deltas/s to run steadily"
    )
    parser.add_argument(
        "--steady-repeats",
        type=decimal,
        default=1,
        help=f"runs of each steady rate, 1 to {MAX_REPEATS} (medians; default 1)",
    )
    args = parser.parse_args(argv)
    if args.n is None:
        args.n = [] if args.steady else [100, 200, 300, 400, 500, 1000]
    if not 1 <= args.deltas <= MAX_DELTAS:
        parser.error(f"--deltas must be 1 to {MAX_DELTAS:,}")
    for flag in ("n", "uvloop", "spread", "repeat"):
        for n in getattr(args, flag) or ():
            if not 1 <= n <= MAX_CONVERSATIONS:
                parser.error(f"--{flag}: {n:,} conversations: each N is 1 to {MAX_CONVERSATIONS:,}")
    if args.uvloop is not None:
        try:
            import uvloop  # noqa: F401
        except ImportError:
            parser.error("--uvloop: uvloop is not installed (pip install uvloop)")
    if not 1 <= args.steady_repeats <= MAX_REPEATS:
        parser.error(f"--steady-repeats must be 1 to {MAX_REPEATS}")
    for rate in args.steady:
        try:
            steady_conversations(rate, args.deltas)
        except ValueError as exc:
            parser.error(f"--steady: {exc}")
    run(
        tuple(args.n),
        args.deltas,
        tuple(args.uvloop or ()),
        tuple(args.spread),
        tuple(args.repeat),
        steady=tuple(args.steady),
        steady_uvloop=args.uvloop is not None,
        steady_repeats=args.steady_repeats,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
