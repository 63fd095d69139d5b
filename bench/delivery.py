"""Delivery engine cost per delta for answers of 2 KB, 22 KB and 259 KB (architecture §3).

The engine keeps its layout incrementally (an append costs its own length; frozen messages are
never laid out again), so the cost per delta must stay flat with the answer's length: within
1.5× across the three sizes. Each answer (prose, lists and code in paragraphs) is fed in deltas
of 2–12 characters, 20 ms apart on a fake clock, to a :class:`DeliveryEngine` with Telegram's
settings (4096 UTF-16 units, one write a second); every write it asks for lands at once. The
figure is the engine's CPU time (``receive`` + ``poll`` + the write outcomes) over the stream,
divided by the deltas (CPU time, ``time.process_time``; best of several runs, at least 30 000
deltas in all per size; the cyclic garbage collector is paused while a run is timed, since its
cost depends on the whole heap of this process, not on delivery). The end of the answer (the
final layout, rendered with the Telegram renderer) is timed apart, per answer.

Usage: ``python bench/delivery.py`` (or ``main()`` from a runner). Prints one table.
``python bench/delivery.py --once MODE KB RUNS`` feeds one answer of ``KB`` KB (2, 22 or 259)
through the engine once, then ``RUNS`` more times, and prints the deltas per answer: under
``valgrind --tool=callgrind``, the difference of the instruction totals of ``RUNS=1`` and
``RUNS=0`` divided by the deltas is the engine's instructions per delta, whatever the machine's
load (bench/README.md).
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from channels.base import ChannelLimits, Rendering
from channels.telegram.format import markdown_to_telegram, to_html
from orchestrator.delivery.engine import DeliveryEngine
from orchestrator.delivery.events import (
    Action,
    AnswerEnded,
    DeleteMessage,
    EditMessage,
    GuardPiece,
    PieceGuarded,
    SendMessage,
    TextEmitted,
    WriteSucceeded,
)
from orchestrator.delivery.settings import DeliverySettings

__all__ = ["SIZES", "main", "measure", "once"]

SIZES = (("2 KB", 2 * 1024), ("22 KB", 22 * 1024), ("259 KB", 259 * 1024))
DELTA_GAP_SECS = 0.02
PARAGRAPHS = (
    "The deployment finished without errors, and the service answered its health check "
    "within the expected time. Next, we compare the **latency** figures of both regions.\n\n",
    "- first point about the rollout\n- second point, with a link "
    "[to the docs](https://example.com/docs?page=2)\n- a third, in `code`\n\n",
    "```python\nfor item in items:\n    total += item.price * item.quantity\n```\n\n",
    "東京リージョンの応答時間は平均で十二ミリ秒でした。大阪リージョンはやや遅いです。\n\n",
)


def answer(size: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        part = rng.choice(PARAGRAPHS)
        parts.append(part)
        length += len(part.encode())
    return "".join(parts).encode()[:size].decode(errors="ignore")


def deltas(text: str, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out, pos = [], 0
    while pos < len(text):
        step = rng.randint(2, 12)
        out.append(text[pos : pos + step])
        pos += step
    return out


def telegram_render(text: str) -> Rendering:
    rendered = markdown_to_telegram(text)
    return Rendering(
        to_html(rendered) if rendered.entities else rendered.text, rendered.utf16_length
    )


def _settings(mode: str, render: Callable[[str], Rendering] | None) -> DeliverySettings:
    return DeliverySettings(
        mode=mode,  # type: ignore[arg-type]
        draft_update_interval_ms=1000,
        limits=ChannelLimits(4096, "utf16"),
        multi_message_unit="turn",
        render=render,
    )


class _Run:
    """Executes an engine's actions at once: every write lands, every verdict keeps the text."""

    def __init__(self, engine: DeliveryEngine) -> None:
        self.engine = engine
        self.ids = 0
        self.writes = 0

    def execute(self, actions: list[Action], now: float) -> None:
        while actions:
            action = actions.pop(0)
            match action:
                case SendMessage():
                    self.ids += 1
                    self.writes += 1
                    actions.extend(self.engine.handle(WriteSucceeded(str(self.ids)), now))
                case EditMessage() | DeleteMessage():
                    self.writes += 1
                    actions.extend(self.engine.handle(WriteSucceeded(), now))
                case GuardPiece(piece_id=piece_id, text=text):
                    actions.extend(self.engine.handle(PieceGuarded(piece_id, text), now))
                case _:
                    pass


def measure(mode: str, text: str, *, repeats: int | None = None) -> tuple[float, float, int]:
    """Best of ``repeats``: (µs per delta while streaming, ms for the end, writes)."""
    events = [TextEmitted(piece) for piece in deltas(text)]
    runs = repeats or max(3, 30_000 // len(events))
    best_stream, best_end, writes = float("inf"), float("inf"), 0
    for _ in range(runs):
        engine = DeliveryEngine(_settings(mode, telegram_render))
        run = _Run(engine)
        now = 0.0
        gc.collect()
        gc.disable()
        try:
            started = time.process_time()
            for event in events:
                engine.receive(event, now)
                run.execute(engine.poll(now), now)
                now += DELTA_GAP_SECS
            streamed = time.process_time() - started
            started = time.process_time()
            engine.receive(AnswerEnded(), now)
            while not engine.finished:
                run.execute(engine.poll(now), now)
                now += 1.0
            ended = time.process_time() - started
        finally:
            gc.enable()
        best_stream = min(best_stream, streamed / len(events) * 1e6)
        best_end = min(best_end, ended * 1e3)
        writes = run.writes
    return best_stream, best_end, writes


def once(mode: str, size_kb: int, runs: int) -> int:
    """Deliver one answer (the warm-up), then ``runs`` more, all in; returns its deltas."""
    events = [TextEmitted(piece) for piece in deltas(answer(size_kb * 1024))]
    for _ in range(runs + 1):
        engine = DeliveryEngine(_settings(mode, telegram_render))
        run = _Run(engine)
        now = 0.0
        for event in events:
            engine.receive(event, now)
            run.execute(engine.poll(now), now)
            now += DELTA_GAP_SECS
        engine.receive(AnswerEnded(), now)
        while not engine.finished:
            run.execute(engine.poll(now), now)
            now += 1.0
    return len(events)


def main() -> None:
    print("delivery engine, Telegram settings, deltas of 2–12 characters every 20 ms")
    print("µs/delta: while streaming; all-in: streaming and the end (final layout, rendering)")
    head = f"{'mode':<14}{'answer':>8}{'deltas':>8}{'µs/delta':>10}{'end ms':>9}{'all-in':>8}"
    print(head + f"{'writes':>8}")
    for mode in ("partial", "multi_message", "off"):
        streaming, all_in = [], []
        for name, size in SIZES:
            text = answer(size)
            per_delta, end_ms, writes = measure(mode, text)
            count = len(deltas(text))
            total = per_delta + end_ms * 1000 / count
            streaming.append(per_delta)
            all_in.append(total)
            row = f"{mode:<14}{name:>8}{count:>8}{per_delta:>10.2f}{end_ms:>9.1f}{total:>8.2f}"
            print(row + f"{writes:>8}")
        spreads = max(streaming) / min(streaming), max(all_in) / min(all_in)
        verdict = "flat" if spreads[1] <= 1.5 else "NOT FLAT"
        print(f"{mode:<14}{'max/min':>16}{spreads[0]:>10.2f}{'':>9}{spreads[1]:>8.2f}  {verdict}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--once"]:
        print(once(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    else:
        main()
