"""The benchmark runner (bench/): its bodies decode to the text they were built from, with our
providers over real HTTP from the bench's own loopback server, and ``python -m bench --smoke``
runs every section end to end and prints the summary table (figures only: no timing asserts)."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from bench.args import decimal
from bench.parse import running_server
from bench.streams import FORMATS, deltas, last_stamp, read_stamps, stamp
from config.models import ProviderConfig
from providers.base import ChatMessage, ChatRequest
from providers.events import Final, TextDelta
from providers.registry import build_provider

ROOT = Path(__file__).resolve().parents[1]


def test_a_stamp_reads_back_as_its_time_to_the_microsecond() -> None:
    text = "".join(stamp(t) for t in (1.0, 12_345.678901, 987_654.000001))
    assert len(stamp(1.0)) == 11
    assert read_stamps(text) == pytest.approx([1.0, 12_345.678901, 987_654.000001], abs=1e-6)
    assert last_stamp(text) == pytest.approx(987_654.000001, abs=1e-6)
    assert last_stamp(text + "some words after it, more than twenty-four") == last_stamp(text)
    assert last_stamp("no stamp here") is None


def test_deltas_are_three_to_six_characters() -> None:
    assert {len(d) for d in deltas(500)} <= {3, 4, 5, 6}


@pytest.mark.parametrize("kind", sorted(FORMATS))
@pytest.mark.parametrize("gap_us", [0, 300])
def test_every_bench_stream_decodes_to_its_deltas(kind: str, gap_us: int) -> None:
    import asyncio

    async def read(url: str) -> tuple[str, list[object]]:
        base = url if kind == "ollama" else url + "/v1"
        config = ProviderConfig(kind=kind, base_url=base, api_key="k", model=f"bench:50:{gap_us}:0")  # type: ignore[arg-type]
        provider = build_provider("bench", config)
        text, finals = [], []
        try:
            async for event in provider.stream(ChatRequest(messages=(ChatMessage("user", "hi"),))):
                if isinstance(event, TextDelta):
                    text.append(event.chunk.delta)
                elif isinstance(event, Final):
                    finals.append(event)
        finally:
            await provider.aclose()
        return "".join(text), finals

    with running_server(core=0) as url:
        text, finals = asyncio.run(read(url))
    assert text == "".join(deltas(50))
    assert finals == [Final("stop", finals[0].raw_finish_reason)]  # type: ignore[union-attr]


def test_the_smoke_run_prints_the_summary_table() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = out.stdout.split("summary (", 1)[1]
    for figure in ("parse ours_openai_chat", "pipeline 4 KB answer", "e2e relaybot run",
                   "scale N=3: completed", "redaction 4 KB"):  # fmt: skip
        assert figure in summary
    assert "3/3" in summary  # every smoke conversation completed
    assert "n/a" not in summary  # and every figure was measured


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--n", "0"], "--n: 0 conversations"),
        (["--n", "-3"], "--n: -3 conversations"),
        (["--n", "20001"], "each N is 1 to 20,000"),
        (["--n", "2", "--spread", "0"], "--spread: 0 conversations"),
        (["--n", "2", "--repeat", "0"], "--repeat: 0 conversations"),
        (["--n", "2", "--uvloop", "0"], "--uvloop: 0 conversations"),
        (["--deltas", "0"], "--deltas must be 1 to 100,000"),
        (["--deltas", "1000000000"], "--deltas must be 1 to 100,000"),
        (["--steady", "18"], "(at least 19)"),
        (["--steady", "100000000"], "more than one client runs (20,000)"),
        (["--steady", "40000", "--steady-repeats", "0"], "--steady-repeats must be 1 to 10"),
        (["--steady", "40000", "--steady-repeats", "11"], "--steady-repeats must be 1 to 10"),
        # int() reads these as 2, 10 and 2; were they read, a later check would refuse the
        # run (another message), so no case runs a bench
        (
            ["--steady", "18", "--steady-repeats", "２"],
            "--steady-repeats: not a whole number in digits 0-9: '２'",
        ),
        (["--n", "1_0", "--deltas", "0"], "--n: not a whole number in digits 0-9: '1_0'"),
        (["--deltas", "+2", "--steady", "18"], "--deltas: not a whole number in digits 0-9: '+2'"),
    ],
)
def test_the_scale_bench_refuses_what_it_cannot_run_before_running_anything(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import scale

    with pytest.raises(SystemExit) as exited:
        scale.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_a_steady_rate_is_judged_on_the_median_of_its_runs() -> None:
    from bench.scale import _steady_summary

    def run(rate: int, lag: float, failed: int = 0) -> tuple[str, dict[str, float]]:
        figures = {"n": 10, "failed": failed, "ttft_p99_ms": 1, "lag_p50_ms": 1, "gc_ms": 1}
        return "asyncio", {**figures, "lag_p99_ms": lag, "cpu_us_per_delta": lag / 10,
                           "delta_turns": 1, "gc_max_ms": 1, "offered": rate}  # fmt: skip

    rows = [run(40_000, 20), run(50_000, 150), run(60_000, 60), run(40_000, 30),
            run(50_000, 40), run(60_000, 225), run(40_000, 25), run(50_000, 35),
            run(60_000, 140)]  # fmt: skip
    summary = _steady_summary(rows)
    assert summary["steady_asyncio_50000_lag_p99_ms"] == 40  # one slow run of three
    assert summary["steady_asyncio_60000_lag_p99_ms"] == 140
    assert summary["steady_asyncio_60000_runs"] == 3
    assert summary["steady_asyncio_sustained"] == 50_000
    rows[4] = run(50_000, 40, failed=1)  # a failed conversation in any run misses the rate
    assert _steady_summary(rows)["steady_asyncio_sustained"] == 40_000


def test_the_scale_bench_refuses_uvloop_rows_without_uvloop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import scale

    monkeypatch.setitem(sys.modules, "uvloop", None)  # as where it is not installed
    with pytest.raises(SystemExit) as exited:
        scale.main(["--n", "10", "--uvloop", "10"])
    assert exited.value.code == 2
    assert "uvloop is not installed" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["0", "7", "186", "-3", "20001"])
def test_a_bench_integer_in_ascii_digits_reads_as_int_does(text: str) -> None:
    assert decimal(text) == int(text)


@pytest.mark.parametrize("text", ["２", "٣", "1_0", "+2", " 2", "2 ", "", "-", "2.0", "0x10"])
def test_a_bench_integer_in_other_digits_or_forms_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="not a whole number in digits 0-9"):
        decimal(text)


def test_every_integer_option_of_a_bench_cli_is_read_in_ascii_digits() -> None:
    typed = [
        (path.name, node.lineno, ast.unparse(keyword.value))
        for path in sorted((ROOT / "bench").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
        for keyword in node.keywords
        if keyword.arg == "type"
    ]
    assert len(typed) >= 20  # the scripts' options are found at all
    assert [t for t in typed if t[2] != "decimal"] == []
