"""End to end: ``relaybot run`` answering a piped console question, CPU per stream event.

Each measurement is a fresh process pinned with ``taskset`` to the other core than the loopback
server (:mod:`bench.server`, started by :func:`bench.parse.running_server`):

- **relaybot**: ``python -m orchestrator.cli run --config FILE`` with a config file written to a
  temp dir: one ``openai_chat`` provider whose ``base_url`` is the server and whose model,
  ``bench:<n>:0:0``, makes the server answer ``n`` deltas of 3–6 characters at once (one event
  per HTTP chunk), one ``kind: console`` channel with its defaults, a SQLite store in the temp
  dir, no ops server. The question is piped on stdin (one line, then end of input), so stdout is
  no terminal: the console channel runs in its default stream mode, ``partial``
  (``stream_drafts: true``, a draft every 100 ms), keeping each draft's text without drawing it,
  and prints the final answer once, whole — what ``echo question | relaybot run`` does. The
  process exits after that answer; the run fails unless stdout holds the exact text the server
  sent (so a dead path cannot read fast).
- **floor**: :mod:`bench.parse`'s 20-line aiohttp + orjson reader (``floor_openai_chat``), which
  checks it read the exact text;
- **sdk**: the ``openai`` SDK's ``chat.completions.create(stream=True)`` (``sdk_openai``; left
  out when the SDK is not installed).

The CPU of a process is its user + system time from ``wait4`` (``resource.getrusage(
RUSAGE_CHILDREN)`` around the waited child: the server, another child, is reaped only at the
end). The figure is the **slope**: (CPU at the largest answer − CPU at the smallest) / (events
sent at the largest − at the smallest), in µs per event, so start-up, imports, the warm-up and
the final answer's fixed costs cancel out; **flat** is the cost per event at the largest
answer over the cost per event at the middle one, each a slope from the smallest answer, taken
from the median CPU of each size (≈ 1 MB over ≈ 270 KB answers by default; target ≤ 1.3: the
cost of an event does not grow with the answer). Anchored at the smallest answer, both slopes
span tens of thousands of events, so a start-up that varies by a tenth of a second between runs
moves the figure little (a slope between the middle and the largest answer over one between the
smallest and the middle, per round, moved by ±0.3 between runs). Targets: relaybot's slope
≤ 1.5× the floor's, flat ≤ 1.3. Every (client, size) is run once per round, the order rotating
every round — relaybot's and the floor's :data:`REPEATS` times, back to back — and the slopes are
medians over the rounds of each round's slope. The repeats are for flat: relaybot's start-up is
~1.1 s of CPU and moves by a few hundredths between runs, while 2,000 → 60,000 deltas add only
~0.15 s, so with one run per size and round the middle's median moved flat by ±0.2 between two
runs of the same tree (1.07 in an alternating run, 1.43 in a sitting, on 2fe5e0a).

Usage: ``python -m bench.e2e [--sizes 2000 60000 240000] [--rounds 5] [--repeats 3]
[--tree NAME=DIR]``
(``--tree``: relaybot from another checkout too, ``relaybot@NAME``, in the same rounds: a
before and after on the same host in the same minutes).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.args import decimal
from bench.parse import ROOT, _pin, running_server
from bench.streams import deltas

__all__ = ["REPEATS", "SIZES", "main", "run"]

SIZES = (2_000, 60_000, 240_000)
REPEATS = 3
"""Runs of relaybot and the floor per size and round (the SDK's: one; see the module
docstring)."""
_FRAMING_EVENTS = 4  # openai_chat: the role chunk, the finish chunk, the usage chunk, [DONE]
_CONFIG = """\
providers:
  bench: {{kind: openai_chat, base_url: "{url}/v1", api_key: sk-bench, model: "{model}"}}
agent:
  providers: [bench]
channels:
  term: {{kind: console}}
storage:
  path: {store}
server:
  listen: null
"""


def _child_cpu(
    argv: list[str], stdin: str, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> tuple[float, str]:
    """Run ``argv`` to its end; its CPU seconds (user + system, as ``wait4`` reports) and
    stdout. Raises RuntimeError when it exits non-zero."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        argv, input=stdin, cwd=cwd, capture_output=True, text=True, check=False, timeout=600,
        env=env,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"{argv[-3:]} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, out.stdout


def _relaybot(url: str, n: int, core: int, workdir: Path, root: Path = ROOT) -> float:
    """CPU seconds of one ``relaybot run`` (the code of the tree ``root``) answering ``n``
    deltas; checks the printed answer."""
    run_dir = Path(tempfile.mkdtemp(dir=workdir))
    config = run_dir / "bench.yaml"
    config.write_text(_CONFIG.format(url=url, model=f"bench:{n}:0:0", store=run_dir / "bot.db"))
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "HOME": str(run_dir),
        "XDG_DATA_HOME": str(run_dir / "data"),
        "STATE_DIRECTORY": str(run_dir),
    }
    argv = [*_pin(core), sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config)]
    cpu, out = _child_cpu(argv, "tell me a long story\n", env, root)
    expected = "".join(deltas(n)).strip()
    if out.strip() != expected:
        raise RuntimeError(
            f"relaybot printed {len(out.strip())} characters, not the {len(expected)} sent"
        )
    return cpu


def _reader(client: str, url: str, n: int, core: int) -> float:
    """CPU seconds of one :mod:`bench.parse` client process reading ``n`` deltas (after its
    200-delta warm-up; the floor checks the text it read)."""
    argv = [*_pin(core), sys.executable, "-m", "bench.parse", "--client", client, "--url", url,
            "--events", str(n)]  # fmt: skip
    cpu, _ = _child_cpu(argv, "")
    return cpu


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def clients(sdk: bool = True) -> tuple[str, ...]:
    """The clients measured: relaybot, the floor when orjson is installed (the ``bench`` and
    ``fast`` extras; the test extra alone has no orjson), and (``sdk``) the openai SDK when
    installed."""
    floor = importlib.util.find_spec("orjson") is not None
    sdk = sdk and importlib.util.find_spec("openai") is not None
    return (
        "relaybot",
        *(("floor_openai_chat",) if floor else ()),
        *(("sdk_openai",) if sdk else ()),
    )


def run(
    sizes: tuple[int, ...] = SIZES,
    rounds: int = 5,
    *,
    sdk: bool = True,
    trees: dict[str, Path] | None = None,
    repeats: int = REPEATS,
) -> dict[str, float]:
    """The e2e section: per client, ``slope`` (µs per event, smallest → largest answer) and
    ``flat`` (cost per event at the largest answer over at the middle one, both from the
    smallest; see the module docstring); ``ratio`` relaybot / floor, and
    ``sdk_ratio`` SDK / relaybot. Medians over ``rounds`` rounds of ``repeats`` runs of
    relaybot and the floor (one of the SDK) per size. ``sdk``: False leaves the
    SDK out (the smoke run). ``trees``: more relaybot clients, ``relaybot@<name>``, each running
    the code of another checkout (a before and after in the same rounds)."""
    others = trees or {}
    chosen = (*clients(sdk), *(f"relaybot@{name}" for name in others))
    jobs = [(c, n) for c in chosen for n in sizes]
    cpu: dict[tuple[str, int], list[float]] = {job: [] for job in jobs}
    with tempfile.TemporaryDirectory(prefix="relaybot-e2e-") as tmp, running_server(0) as url:
        for r in range(rounds):
            shift = r * len(sizes) % len(jobs) + r % len(sizes)
            for client, n in jobs[shift:] + jobs[:shift]:
                for _ in range(1 if client.startswith("sdk") else repeats):
                    if client.startswith("relaybot"):
                        root = others[client[9:]] if "@" in client else ROOT
                        seconds = _relaybot(url, n, 1, Path(tmp), root)
                    else:
                        seconds = _reader(client, url, n, 1)
                    cpu[(client, n)].append(seconds)
    small, mid, large = sizes[0], sizes[len(sizes) // 2], sizes[-1]

    def slope(client: str, a: int, b: int, r: int) -> float:
        per_round = len(cpu[(client, a)]) // rounds
        at_a = statistics.median(cpu[(client, a)][r * per_round : (r + 1) * per_round])
        at_b = statistics.median(cpu[(client, b)][r * per_round : (r + 1) * per_round])
        return (at_b - at_a) / (b - a) * 1e6

    summary: dict[str, float] = {}
    print(
        f"e2e: CPU slope per event, {small:,} → {large:,} deltas, median of {rounds} rounds "
        f"({repeats} runs of relaybot and the floor per size and round)"
    )
    for client in chosen:
        slopes = [slope(client, small, large, r) for r in range(rounds)]
        median = {n: statistics.median(cpu[(client, n)]) for n in (small, mid, large)}
        at_large = (median[large] - median[small]) / (large - small)
        at_mid = (median[mid] - median[small]) / (mid - small)
        summary[f"{client}_slope"] = statistics.median(slopes)
        summary[f"{client}_flat"] = _ratio(at_large, at_mid)
        per_size = "  ".join(f"{n:,}: {statistics.median(cpu[(client, n)]):.2f} s" for n in sizes)
        print(
            f"  {client:18} {summary[f'{client}_slope']:7.2f} µs/event  "
            f"flat {summary[f'{client}_flat']:.2f}  (CPU {per_size}; slopes "
            + " ".join(f"{s:.1f}" for s in slopes)
            + ")"
        )
    if "sdk_openai_slope" in summary:
        summary["sdk_ratio"] = summary["sdk_openai_slope"] / summary["relaybot_slope"]
    print(f"relaybot flat {summary['relaybot_flat']:.2f} (target <= 1.3)")
    floor = summary.get("floor_openai_chat_slope")
    if floor is None:
        print("no floor: orjson is not installed (pip install -e '.[bench]')")
        return summary
    summary["ratio"] = summary["relaybot_slope"] / floor
    for name in others:
        print(f"relaybot@{name} / floor {summary[f'relaybot@{name}_slope'] / floor:.2f}")
    print(f"relaybot / floor {summary['ratio']:.2f} (target <= 1.5)")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=decimal, nargs=3, default=list(SIZES))
    parser.add_argument("--rounds", type=decimal, default=5)
    parser.add_argument("--repeats", type=decimal, default=REPEATS)
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="also run relaybot from the checkout DIR (relaybot@NAME), in the same rounds",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    trees = {name: Path(d).resolve() for name, _, d in (t.partition("=") for t in args.tree)}
    run(tuple(args.sizes), args.rounds, trees=trees, repeats=args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
