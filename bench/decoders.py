"""Cost of the provider decoders (architecture §2 "Wire formats": bounded and linear).

Three measurements:

1. **A long line without a newline** (1, 10, 100 MB of ``x`` after ``data: `` for SSE; bare for
   NDJSON), fed in 64 KiB reads as httpx delivers them, then ``close()``: time until the decoder
   is done with it (the 1 MB line is held and discarded at the end; 10 and 100 MB are rejected
   with ``StreamProtocolError`` at the read that crosses 8 MiB) and the peak memory the decoder
   allocated (``tracemalloc``, in a separate run so it does not slow the timing).
2. **Accepted long lines** (2, 4, 8 MB, ended by a newline): time per MB, flat when the cost is
   linear in the length.
3. **The hot path**: a Chat Completions stream of 20000 small chunks through
   ``ChatCompletionsStreamReducer`` (µs per chunk), and one typical event's data parsed by the
   bounded parse against plain ``json.loads`` (µs per event).

Usage: ``python bench/decoders.py`` (or ``main()`` from a runner). Best of 3 runs per figure.
"""

from __future__ import annotations

import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from providers.bounded_json import parse_json
from providers.errors import StreamProtocolError
from providers.ndjson import NDJSONDecoder
from providers.openai_chat_decode import ChatCompletionsStreamReducer
from providers.sse import SSEDecoder
from providers.stream_reducer import reduce_body

__all__ = ["main"]

MB = 1024 * 1024
READ = 64 * 1024
PIECE = b"x" * READ


def _feed_line(make: Callable[[], SSEDecoder | NDJSONDecoder], size: int, prefix: bytes) -> str:
    """Feed ``prefix`` + ``size`` bytes without a line end in 64 KiB reads, then close."""
    decoder = make()
    try:
        decoder.feed(prefix)
        for _ in range(size // READ):
            decoder.feed(bytes(bytearray(PIECE)))  # a fresh read each time, as from httpx
        decoder.close()
    except StreamProtocolError:
        return "rejected"
    return "discarded"


def _best(run: Callable[[], object], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _peak(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def long_lines() -> list[str]:
    rows = ["long line without a newline, 64 KiB reads: time, peak memory, outcome"]
    for name, make, prefix in (
        ("SSE", SSEDecoder, b"data: "),
        ("NDJSON", NDJSONDecoder, b""),
    ):
        for size_mb in (1, 10, 100):

            def run(
                make: Callable[[], SSEDecoder | NDJSONDecoder] = make,
                size: int = size_mb * MB,
                prefix: bytes = prefix,
            ) -> str:
                return _feed_line(make, size, prefix)

            seconds = _best(run)
            peak = _peak(run)
            rows.append(
                f"  {name:6} {size_mb:>3} MB: {seconds * 1000:8.1f} ms  "
                f"peak {peak / MB:5.1f} MiB  {run()}"
            )
    return rows


def accepted_lines() -> list[str]:
    rows = ["accepted line ended by a newline, 64 KiB reads: time per MB"]
    for size_mb in (2, 4, 8):
        body = b"data: " + b"y" * (size_mb * MB - 6) + b"\n\n"
        reads = [body[i : i + READ] for i in range(0, len(body), READ)]

        def run(reads: list[bytes] = reads) -> None:
            decoder = SSEDecoder()
            for chunk in reads:
                decoder.feed(chunk)

        seconds = _best(run, repeats=5)
        rows.append(f"  SSE    {size_mb:>3} MB: {seconds * 1000 / size_mb:8.2f} ms/MB")
    return rows


def hot_path() -> list[str]:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": None}],
    }
    data = json.dumps(chunk)
    count = 20_000
    body = (f"data: {data}\n\n" * count).encode() + b"data: [DONE]\n\n"
    reads = [body[i : i + 4096] for i in range(0, len(body), 4096)]
    seconds = _best(lambda: reduce_body(ChatCompletionsStreamReducer(), reads))
    rows = [
        "hot path",
        f"  Chat Completions stream, {count} chunks: {seconds * 1e6 / count:6.2f} µs/chunk",
    ]
    loops = 100_000
    bounded = _best(lambda: [parse_json(data) for _ in range(loops)])
    plain = _best(lambda: [json.loads(data) for _ in range(loops)])
    rows.append(
        f"  one event's data: bounded parse {bounded * 1e6 / loops:5.2f} µs, "
        f"json.loads {plain * 1e6 / loops:5.2f} µs"
    )
    return rows


def main() -> None:
    """Print the three tables (takes about a minute on an idle machine)."""
    for table in (long_lines, accepted_lines, hot_path):
        for row in table():
            print(row)


if __name__ == "__main__":
    main()
