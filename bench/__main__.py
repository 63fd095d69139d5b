"""``python -m bench``: every benchmark, then one summary table (figures and targets).

Sections, in this order: parse (:mod:`bench.parse`), pipeline (:mod:`bench.pipeline`),
redaction (``bench/redaction.py``, called, at 4 KB / 64 KB / 1 MB with deltas of 3–6
characters, and on prose and URL-dense text), e2e (:mod:`bench.e2e`: ``relaybot run`` end to
end), scale (:mod:`bench.scale`), and every other ``bench/*.py`` script that exposes ``main()``
(``delivery``, ``decoders``, ``false_positives``... when present), run as they are. Redaction,
timed in this process, runs before e2e and scale keep both cores busy for minutes: right after
them the same code reads about 5–10 % slower for a while.

``--smoke`` runs tiny sizes (a few seconds; the SDK clients only when installed), for the test
suite. ``--only parse,scale`` picks sections. About 10 minutes in full on 2 shared cores.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench import e2e, parse, pipeline, scale

if TYPE_CHECKING:
    from orchestrator.policy import Redactor

BENCH = Path(__file__).resolve().parent
OWN = {"__init__", "__main__", "channels", "e2e", "parse", "pipeline", "scale", "server", "streams"}
SECTIONS = ("parse", "pipeline", "redaction", "e2e", "scale", "extra")

Row = tuple[str, str, str, str]  # figure, value, target, met


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _fmt(value: float, unit: str = "") -> str:
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    return f"{value:,.2f}{unit}" if abs(value) < 100 else f"{value:,.0f}{unit}"


def _met(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "NO")


def _parse(smoke: bool) -> list[Row]:
    sdks = _have("openai") and _have("anthropic")
    if smoke:
        with parse.running_server() as url:
            figures = {
                c: v[0] for c, v in parse.measure(url, ("ours_openai_chat",), 200, 1).items()
            }
        print("parse (smoke): " + ", ".join(f"{c} {v:.1f} µs/event" for c, v in figures.items()))
        return [(f"parse {c} µs/event", _fmt(v), "", "-") for c, v in figures.items()]
    if not sdks:
        raise SystemExit("the parse section needs the SDKs: pip install -e '.[bench]'")
    s = parse.run()
    rows: list[Row] = [
        ("parse ours openai_chat µs/event", _fmt(s["ours_openai_chat"]), "", "-"),
        ("parse openai SDK µs/event", _fmt(s["sdk_openai"]), "", "-"),
        ("openai_ratio (SDK / ours)", _fmt(s["openai_ratio"]), ">= 5",
         _met(s["openai_ratio"] >= 5)),
        ("parse ours anthropic µs/event", _fmt(s["ours_anthropic"]), "", "-"),
        ("parse anthropic SDK µs/event", _fmt(s["sdk_anthropic"]), "", "-"),
        ("anthropic_ratio (SDK / ours)", _fmt(s["anthropic_ratio"]), ">= 1.5",
         _met(s["anthropic_ratio"] >= 1.5)),
        ("parse floor openai_chat (aiohttp + orjson) µs/event", _fmt(s["floor_openai_chat"]), "",
         "-"),
        ("openai_chat ours / floor", _fmt(s["openai_floor_ratio"]), "<= 1",
         _met(s["openai_floor_ratio"] <= 1)),
        ("parse floor anthropic (aiohttp + orjson) µs/event", _fmt(s["floor_anthropic"]), "", "-"),
        ("anthropic ours / floor", _fmt(s["anthropic_floor_ratio"]), "<= 1",
         _met(s["anthropic_floor_ratio"] <= 1)),
        ("parse ours responses µs/event", _fmt(s["ours_openai_responses"]), "", "-"),
        ("parse ours ollama µs/event", _fmt(s["ours_ollama"]), "", "-"),
        ("trickled ours openai_chat µs/event", _fmt(s["trickle_ours_openai_chat"]), "", "-"),
        ("trickled ours openai_chat on uvloop",
         _fmt(s["trickle_ours_openai_chat_uvloop"]), "", "-"),
        ("trickled openai_ratio", _fmt(s["trickle_openai_ratio"]), "", "-"),
        ("trickled ours anthropic µs/event", _fmt(s["trickle_ours_anthropic"]), "", "-"),
        ("trickled anthropic_ratio", _fmt(s["trickle_anthropic_ratio"]), "", "-"),
    ]  # fmt: skip
    for key in ("openai_chat", "anthropic"):
        names = [n for n in ("json", "orjson", "msgspec", "json_fast") if f"decode_{n}_{key}" in s]
        rows.append(
            (f"JSON parse {key} {'/'.join(names)} µs",
             " / ".join(f"{s[f'decode_{n}_{key}']:.2f}" for n in names), "", "-")
        )  # fmt: skip
    return rows


def _pipeline(smoke: bool) -> list[Row]:
    sizes = (4,) if smoke else pipeline.SIZES_KB
    s = pipeline.run(sizes, 1 if smoke else 3)
    rows: list[Row] = []
    for kb in sizes:
        total = s[f"{kb}_total"]
        rows.append((f"pipeline {kb} KB answer: µs/delta (first / last tenth)",
                     f"{_fmt(total)} ({_fmt(s[f'{kb}_first'])} / {_fmt(s[f'{kb}_last'])})",
                     "< 25", _met(total < 25)))  # fmt: skip
        rows.append((f"pipeline {kb} KB: policy / guard / rest µs per delta",
                     f"{_fmt(s[f'{kb}_policy'])} / {_fmt(s[f'{kb}_guard'])} / "
                     f"{_fmt(s[f'{kb}_rest'])}", "", "-"))  # fmt: skip
        feed = f"{_fmt(s[f'{kb}_feed'])} ({_fmt(s[f'{kb}_feed_last'])})"
        rows.append((f"policy alone {kb} KB: µs per feed (last tenth)", feed, "", "-"))
    if len(sizes) > 1:
        rows.append((f"pipeline µs/delta {sizes[-1]} KB / {sizes[0]} KB", _fmt(s["flatness"]),
                     "<= 1.3", _met(s["flatness"] <= 1.3)))  # fmt: skip
        rows.append((f"policy µs/feed {sizes[-1]} KB / {sizes[0]} KB", _fmt(s["feed_flatness"]),
                     "<= 1.3", _met(s["feed_flatness"] <= 1.3)))  # fmt: skip
    return rows


def _e2e(smoke: bool) -> list[Row]:
    sizes = (200, 1_000, 4_000) if smoke else e2e.SIZES
    s = e2e.run(sizes, 1 if smoke else 5, sdk=not smoke, repeats=1 if smoke else e2e.REPEATS)
    span = f"{sizes[0]:,} -> {sizes[-1]:,} deltas"
    rows: list[Row] = [
        (f"e2e relaybot run µs/event ({span})", _fmt(s["relaybot_slope"]), "", "-"),
    ]
    if "floor_openai_chat_slope" in s:
        rows.append(("e2e floor (aiohttp + orjson) µs/event", _fmt(s["floor_openai_chat_slope"]),
                     "", "-"))  # fmt: skip
    if "sdk_openai_slope" in s:
        rows.append(("e2e openai SDK µs/event", _fmt(s["sdk_openai_slope"]), "", "-"))
    if "ratio" in s:
        rows.append(("e2e relaybot / floor", _fmt(s["ratio"]), "<= 1.5", _met(s["ratio"] <= 1.5)))
    flat = s["relaybot_flat"]
    rows.append((f"e2e relaybot flat (µs/event at {sizes[-1]:,} / at {sizes[1]:,})",
                 _fmt(flat), "<= 1.3", _met(flat <= 1.3)))  # fmt: skip
    for client, label in (("floor_openai_chat", "floor"), ("sdk_openai", "openai SDK")):
        if f"{client}_flat" in s:
            rows.append((f"e2e {label} flat", _fmt(s[f"{client}_flat"]), "", "-"))
    return rows


def _median_of(s: dict[str, float], prefix: str) -> str:
    """`` (median of N)`` for the figures of an N that ran N > 1 times, else ``""``."""
    runs = int(s[f"{prefix}_runs"])
    return f" (median of {runs})" if runs > 1 else ""


STEADY_RATES = (40_000, 50_000, 60_000)
"""Offered loads (deltas/s) of the scale section's ``steady`` rows (:mod:`bench.scale`)."""


def _scale(smoke: bool) -> list[Row]:
    ns = (3,) if smoke else (100, 300, 400, 500, 700, 1000, 1200)
    repeat = () if smoke else (500, 700, 1000, 1200)
    spread = () if smoke else (500,)
    uvloop = () if smoke or not _have("uvloop") else (300, 500, 700, 1000, 1200)
    steady = () if smoke else STEADY_RATES
    s = scale.run(
        ns,
        10 if smoke else 186,
        uvloop,
        spread,
        repeat,
        steady=steady,
        steady_uvloop=bool(uvloop),
        steady_repeats=scale.REPEATS,
    )
    rows: list[Row] = []
    for n in ns:
        p = f"asyncio_{n}"
        of = _median_of(s, p)
        done = int(s[f"{p}_completed"])
        rows.append((f"scale N={n}: completed", f"{done}/{n}", "all" if n == 1000 else "",
                     _met(done == n) if n == 1000 else "-"))  # fmt: skip
        lag = s[f"{p}_lag_p99_ms"]
        rows.append((f"scale N={n}: TTFT p99 / lag p50 / p99 ms{of}",
                     f"{_fmt(s[f'{p}_ttft_p99_ms'])} / {_fmt(s[f'{p}_lag_p50_ms'])} / "
                     f"{_fmt(lag)}", "p99 < 100" if n == 1000 else "",
                     _met(lag < 100) if n == 1000 else "-"))  # fmt: skip
        rows.append((f"scale N={n}: peak RSS MB / KB per conv / µs per delta / turns{of}",
                     f"{_fmt(s[f'{p}_peak_rss_mb'])} / {_fmt(s[f'{p}_rss_per_conv_kb'])} / "
                     f"{_fmt(s[f'{p}_cpu_us_per_delta'])} / {_fmt(s[f'{p}_delta_turns'])}",
                     "", "-"))  # fmt: skip
    for n in uvloop:
        p = f"uvloop_{n}"
        rows.append((f"scale N={n} on uvloop: lag p99 ms{_median_of(s, p)} / µs per delta",
                     f"{_fmt(s[f'{p}_lag_p99_ms'])} / {_fmt(s[f'{p}_cpu_us_per_delta'])}", "",
                     "-"))  # fmt: skip
    for n in spread:
        p = f"spread_{n}"
        rows.append((f"scale N={n}, starts spread over 1 s: TTFT p99 / lag p50 / p99 ms",
                     f"{_fmt(s[f'{p}_ttft_p99_ms'])} / {_fmt(s[f'{p}_lag_p50_ms'])} / "
                     f"{_fmt(s[f'{p}_lag_p99_ms'])}", "", "-"))  # fmt: skip
    per_conv = s[f"asyncio_{ns[-1]}_rss_per_conv_kb"]
    rows.append((f"RSS per conversation (N={ns[-1]}) KB", _fmt(per_conv), "< 100",
                 _met(per_conv < 100)))  # fmt: skip
    sustained = s["sustained_deltas_per_s"]
    rows.append(("deltas/s sustained, lag p99 < 100 ms (asyncio)", _fmt(sustained), ">= 60,000",
                 _met(sustained >= 60_000)))  # fmt: skip
    if uvloop:
        on_uvloop = s["sustained_uvloop_deltas_per_s"]
        rows.append(("deltas/s sustained on uvloop (relaybot run with relaybot[fast])",
                     _fmt(on_uvloop), ">= 60,000", _met(on_uvloop >= 60_000)))  # fmt: skip
    rows.append(("deltas/s per core from CPU per delta", _fmt(s["capacity_deltas_per_s"]),
                 ">= 60,000", _met(s["capacity_deltas_per_s"] >= 60_000)))  # fmt: skip
    for loop in ("asyncio", "uvloop") if steady else ():
        if f"steady_{loop}_sustained" not in s:
            continue
        for rate in steady:
            p = f"steady_{loop}_{rate}"
            rows.append((f"steady {rate:,} deltas/s on {loop} ({int(s[f'{p}_n'])} conversations "
                         f"over {scale.STEADY_SECS} s): TTFT p99 / lag p99 ms / µs per delta / "
                         f"turns{_median_of(s, p)}",
                         f"{_fmt(s[f'{p}_ttft_p99_ms'])} / {_fmt(s[f'{p}_lag_p99_ms'])} / "
                         f"{_fmt(s[f'{p}_cpu_us_per_delta'])} / {_fmt(s[f'{p}_delta_turns'])}",
                         "", "-"))  # fmt: skip
        held = s[f"steady_{loop}_sustained"]
        rows.append((f"deltas/s sustained with steady arrivals, lag p99 < 100 ms ({loop})",
                     _fmt(held), ">= 60,000", _met(held >= 60_000)))  # fmt: skip
    return rows


def _redaction(smoke: bool) -> list[Row]:
    """``bench/redaction.py``'s window timing at three sizes, fed deltas of 3–6 characters."""
    module = importlib.import_module("bench.redaction")
    answer: Callable[[int], str] | None = getattr(module, "answer", None)
    time_window = getattr(module, "time_window", None)
    if answer is None or time_window is None:
        return _run_main("redaction", module.main)
    from orchestrator.policy import Redactor

    redactor = Redactor()
    sizes = (("4 KB", 4096),) if smoke else (("4 KB", 4096), ("64 KB", 65536), ("1 MB", 2**20))
    rows: list[Row] = []
    print("redaction window, deltas of 3-6 characters: ns/byte")
    for label, size in sizes:
        text = answer(size)
        rng = random.Random(3)
        pieces, pos = [], 0
        while pos < len(text):
            step = rng.randint(3, 6)
            pieces.append(text[pos : pos + step])
            pos += step
        repeats = 1 if smoke else max(3, (4 * 2**20) // size // 8)
        seconds = time_window(redactor, pieces, repeats)
        ns_per_byte = seconds / len(text.encode()) * 1e9
        print(f"  {label:>6}: {ns_per_byte:7.1f} ns/byte ({len(pieces)} deltas)")
        rows.append((f"redaction {label} ns/byte", _fmt(ns_per_byte), "", "-"))
    for label, make in (("ordinary prose", module.prose), ("URL-dense text", module.url_dense)):
        text = make(4096 if smoke else 256 * 1024)
        seconds = time_window(redactor, module.deltas(text), 1 if smoke else 5)
        ns_per_byte = seconds / len(text.encode()) * 1e9
        per_scan = _chars_per_scan(redactor, module.deltas(text))
        print(f"  {label}: {ns_per_byte:7.1f} ns/byte, {per_scan} characters a scan")
        rows.append((f"redaction {label} ns/byte", _fmt(ns_per_byte), "<= 400",
                     _met(ns_per_byte <= 400)))  # fmt: skip
        rows.append((f"redaction {label} characters a scan", per_scan, "", "-"))
        # As the round's sink feeds it: the text held for a write at once (~1 s of a model's
        # text), so a scan's fixed cost is spread over a write, not a few deltas.
        writes = [text[at : at + WRITE_CHARS] for at in range(0, len(text), WRITE_CHARS)]
        seconds = time_window(redactor, writes, 1 if smoke else 5)
        ns_per_byte = seconds / len(text.encode()) * 1e9
        print(f"  {label}, fed {WRITE_CHARS} characters a feed: {ns_per_byte:7.1f} ns/byte")
        rows.append((f"redaction {label} per write ns/byte", _fmt(ns_per_byte), "", "-"))
    return rows


WRITE_CHARS = 250
"""What the redaction rows feed at once for "per write": about a second of a model's text (50
deltas of 5 characters), what the round's sink holds for one write of a chat edited once a
second (orchestrator/turn/round_sink.py)."""


def _chars_per_scan(redactor: Redactor, pieces: list[str]) -> str:
    """How many characters the window was fed per look that scanned (``RedactionWindow.scans``;
    "-" for a window that does not count them): what a scan's fixed cost is spread over."""
    from orchestrator.policy.window import RedactionWindow

    window = RedactionWindow(redactor)
    for piece in pieces:
        window.feed(piece)
    scans = getattr(window, "scans", 0)
    return f"{sum(map(len, pieces)) / scans:.0f}" if scans else "-"


def _run_main(name: str, fn: Callable[[], object]) -> list[Row]:
    """Run another script's ``main()`` as it is; its output is shown, its exit code noted."""
    start = time.process_time()
    saved = sys.argv
    sys.argv = [f"bench/{name}.py"]
    try:
        code = fn()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = saved
    cpu = time.process_time() - start
    return [(f"{name}.py main()", f"exit {code or 0}, {cpu:.1f} s CPU", "exit 0",
             _met(not code))]  # fmt: skip


def _extra(smoke: bool) -> list[Row]:
    rows: list[Row] = []
    for path in sorted(BENCH.glob("*.py")):
        name = path.stem
        if name in OWN or name == "redaction":
            continue
        module = importlib.import_module(f"bench.{name}")
        if callable(getattr(module, "main", None)):
            print(f"{name}:")
            rows += _run_main(name, module.main)
    return rows


RUNNERS: dict[str, Callable[[bool], list[Row]]] = {
    "parse": _parse,
    "pipeline": _pipeline,
    "e2e": _e2e,
    "scale": _scale,
    "redaction": _redaction,
    "extra": _extra,
}


def table(rows: list[Row]) -> str:
    """The summary table as text."""
    head: Row = ("figure", "value", "target", "met")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (a few seconds)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if args.smoke and "extra" in chosen:
        chosen.remove("extra")  # other scripts have no tiny sizes
    started = time.monotonic()
    rows: list[Row] = []
    for section in chosen:
        print(f"== {section}", flush=True)
        rows += RUNNERS[section](args.smoke)
    print()
    if args.smoke:  # tiny sizes say nothing about the targets
        rows = [(figure, value, "", "-") for figure, value, _, _ in rows]
    print(f"summary ({time.monotonic() - started:.0f} s wall)")
    print(table(rows))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
