"""Throughput of the live redaction window (architecture §4) for answers of 4 KB, 64 KB and 1 MB.

Prints bytes/s and the cost per byte for each size; the per-byte cost must stay within 2x across
sizes (the window is linear: a look every 32 bytes scans only what the last look's proof did not
cover, and the front is pruned). The answer mixes English prose, Japanese, code and a secret
about every 2 KB, fed in deltas of 3-6 characters, as a streaming model sends them (a token or
two each). Also prints the one-shot ``redact`` rate of clean text (the keyword prefilter's path)
and of text with secrets.

Times are the process's CPU time (``time.process_time``), the best of several runs, so other
work on a shared machine disturbs them less than wall-clock time would.

Usage: ``python bench/redaction.py [--repeats N]``
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.args import decimal
from orchestrator.policy import Redactor
from orchestrator.policy.window import RedactionWindow

SIZES = (("4 KB", 4 * 1024), ("64 KB", 64 * 1024), ("1 MB", 1024 * 1024))
PARAGRAPHS = (
    "The deployment finished without errors, and the service answered its health check "
    "within the expected time. Next, we compare the latency figures of both regions.\n\n",
    "東京リージョンの応答時間は平均で十二ミリ秒でした。大阪リージョンはやや遅く、十八ミリ秒です。\n\n",
    "```python\nfor item in items:\n    total += item.price * item.quantity\n```\n\n",
    "Set the header to `Authorization: Bearer dGhpcyBpcyBhIHNlY3JldCB0b2tlbg==` and retry.\n\n",
    "- first point about the rollout\n- second point, with a link https://example.com/docs?page=2\n\n",
    "The key in the log was sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ; rotate it.\n\n",
)


PROSE = (
    "When you migrate the service, start with the read replicas: they take no writes, so a "
    "failed step costs nothing but a restart. Then move the primary during the quiet hours, "
    "after a fresh backup. ",
    "In short, the cache helps only when the same keys come back often; for a workload of "
    "unique queries it adds memory and a second lookup without saving any time. ",
    "Here are the options, from the cheapest to the most thorough:\n\n1. **Raise the "
    "timeout** to 30 seconds and watch the error rate for a day.\n2. Add a retry with "
    "exponential backoff (0.5 s, 1 s, 2 s).\n3. Split the job into batches of 500 rows.\n\n",
    "The function returns `None` when the list is empty, which is why the caller's loop never "
    "ran; check `len(items)` first, or return an empty tuple instead. ",
    "Your question has two parts. First, the results differ because the second run used the "
    "warm cache (about 40% faster). Second, the totals match to within 0.1%, which is rounding. ",
    "I would keep the configuration in one file per environment (development, staging, "
    "production) and load it at start-up; that way nothing depends on the order of imports.\n\n",
)
URLS = (
    "See https://docs.python.org/3/library/asyncio-task.html#asyncio.sleep for the details. ",
    "The guide is at [the migration guide](https://example.org/guide/v2/migrate?from=1.4&to=2.0) "
    "and the changelog at https://github.com/example/project/blob/main/CHANGELOG.md#200. ",
    "- https://en.wikipedia.org/wiki/Exponential_backoff\n- https://aws.amazon.com/builders-"
    "library/timeouts-retries-and-backoff-with-jitter/\n- https://www.rfc-editor.org/rfc/rfc9110"
    ".html#name-retry-after\n",
    "Download it from https://pypi.org/project/httpx/0.28.1/#files or mirror "
    "https://files.pythonhosted.org/packages/source/h/httpx/httpx-0.28.1.tar.gz. ",
    "Results: <https://grafana.example.net/d/abc123/latency?orgId=1&from=now-6h&to=now&var-"
    "region=eu-west-1> shows p99 at 180 ms. ",
)


def corpus(parts: tuple[str, ...], size: int, seed: int = 7) -> str:
    """``size`` bytes (UTF-8) of ``parts`` drawn at random (no secret in either corpus)."""
    rng = random.Random(seed)
    out: list[str] = []
    length = 0
    while length < size:
        part = rng.choice(parts)
        out.append(part)
        length += len(part.encode())
    return "".join(out).encode()[:size].decode(errors="ignore")


def prose(size: int) -> str:
    """Ordinary English prose of an assistant's answer: paragraphs, a list, inline code."""
    return corpus(PROSE, size)


def url_dense(size: int) -> str:
    """Text dense with URLs: bare links, Markdown links, autolinks, query strings."""
    return corpus(URLS, size)


def answer(size: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        part = rng.choice(PARAGRAPHS[:3]) if rng.random() < 0.85 else rng.choice(PARAGRAPHS[3:])
        parts.append(part)
        length += len(part.encode())
    return "".join(parts).encode()[:size].decode(errors="ignore")


def deltas(text: str, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out, pos = [], 0
    while pos < len(text):
        step = rng.randint(3, 6)
        out.append(text[pos : pos + step])
        pos += step
    return out


def time_window(redactor: Redactor, pieces: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        window = RedactionWindow(redactor)
        start = time.process_time()
        for piece in pieces:
            window.feed(piece)
        window.flush()
        best = min(best, time.process_time() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description="Throughput of the live redaction window.")
    parser.add_argument(
        "--repeats", type=decimal, default=3, help="runs per size (the best counts)"
    )
    args = parser.parse_args()
    redactor = Redactor()
    print("live redaction window (deltas of 3-6 characters)")
    costs = []
    for label, size in SIZES:
        text = answer(size)
        pieces = deltas(text)
        repeats = max(args.repeats, (4 * 1024 * 1024) // size // 8)
        seconds = time_window(redactor, pieces, repeats)
        nbytes = len(text.encode())
        costs.append(seconds / nbytes)
        print(
            f"  {label:>6}: {nbytes / seconds / 1e6:6.2f} MB/s  "
            f"{seconds / nbytes * 1e9:7.1f} ns/byte  ({len(pieces)} deltas)"
        )
    ratio = max(costs) / min(costs)
    print(f"  per-byte cost, largest/smallest across sizes: {ratio:.2f}x (must stay within 2x)")
    for label, make in (("ordinary prose", prose), ("URL-dense text", url_dense)):
        text = make(256 * 1024)
        seconds = time_window(redactor, deltas(text), args.repeats)
        print(f"  {label:>15} 256 KB: {seconds / len(text.encode()) * 1e9:7.1f} ns/byte")

    clean = ("The quick brown fox jumps over the lazy dog. 日本語のテキストです。\n") * 16_000
    dirty = answer(len(clean.encode()))
    print("one-shot redact (1 MB)")
    for label, text in (("clean (prefilter)", clean), ("with secrets", dirty)):
        seconds = float("inf")
        for _ in range(args.repeats):
            start = time.process_time()
            redactor.redact(text)
            seconds = min(seconds, time.process_time() - start)
        print(f"  {label:>17}: {len(text.encode()) / seconds / 1e6:7.1f} MB/s")
    return 0 if ratio <= 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
