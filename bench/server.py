"""A loopback model-API server for the benchmarks, run in its own process.

``python -m bench.server`` prints ``PORT <n>`` and serves until stdin closes. Any POST path of
:data:`bench.streams.PATHS` answers a stream in that wire format, chosen by the request's
``model``: ``"bench:<deltas>:<gap_us>:<stamp>"``:

* ``gap_us`` 0: the whole body at once, one event per HTTP chunk (chunked framing);
* ``gap_us`` > 0: one delta event per ``gap_us`` microseconds (scheduled on due times, so the
  rate holds on a millisecond-resolution event loop); streams with the same gap share one timer;
* ``stamp`` 1: each delta's text is its send time (:func:`bench.streams.stamp`).

Connections are kept alive. Uses uvloop when installed (the server is not what is measured).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from functools import cache

from bench.streams import FORMATS, PATHS, deltas, stamp

__all__ = ["main", "serve"]

_FORMAT_BY_PATH = {path: fmt for fmt, path in PATHS.items()}
_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n"
    b"connection: keep-alive\r\n\r\n"
)


def _chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


@cache
def _burst(fmt: str, n: int) -> bytes:
    texts = deltas(n)
    frame, delta = FORMATS[fmt](texts)
    at = frame.index(b"")
    body = frame[:at] + [delta(t) for t in texts] + frame[at + 1 :]
    return b"".join(_chunk(e) for e in body) + b"0\r\n\r\n"


class _Paced:
    """One paced stream: its deltas written by the shared ticker of its gap."""

    def __init__(self, transport: asyncio.Transport, fmt: str, n: int, stamped: bool) -> None:
        self.transport = transport
        texts = deltas(n)
        frame, self.delta = FORMATS[fmt](texts)
        at = frame.index(b"")
        self.texts = texts
        self.stamped = stamped
        self.sent = 0
        self.tail = b"".join(_chunk(e) for e in frame[at + 1 :]) + b"0\r\n\r\n"
        transport.write(b"".join(_chunk(e) for e in frame[:at]))

    def step(self, now: float) -> bool:
        """Write the next delta; True when the stream is done."""
        if self.transport.is_closing():
            return True
        text = stamp(now) if self.stamped else self.texts[self.sent]
        self.transport.write(_chunk(self.delta(text)))
        self.sent += 1
        if self.sent >= len(self.texts):
            self.transport.write(self.tail)
            return True
        return False


class _Ticker:
    def __init__(self, gap: float) -> None:
        self.gap = gap
        self.streams: list[_Paced] = []
        self.task: asyncio.Task[None] | None = None

    def add(self, stream: _Paced) -> None:
        self.streams.append(stream)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        due = time.monotonic()
        while self.streams:
            due += self.gap
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            now = time.monotonic()
            self.streams = [s for s in self.streams if not s.step(now)]


_TICKERS: dict[int, _Ticker] = {}


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            self._answer(head[0].split(" ")[1].split("?")[0], body)

    def _answer(self, path: str, body: bytes) -> None:
        assert self.transport is not None
        fmt = _FORMAT_BY_PATH.get(path)
        try:
            _, n, gap_us, stamped = json.loads(body)["model"].split(":")
        except (ValueError, KeyError):
            fmt = None
        if fmt is None:
            self.transport.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            return
        media = b"application/x-ndjson" if fmt == "ollama" else b"text/event-stream"
        self.transport.write(_HEAD % media)
        if int(gap_us) == 0:
            self.transport.write(_burst(fmt, int(n)))
            return
        ticker = _TICKERS.setdefault(int(gap_us), _Ticker(int(gap_us) / 1e6))
        ticker.add(_Paced(self.transport, fmt, int(n), stamped == "1"))


async def serve(ready: asyncio.Future[int] | None = None) -> None:
    """Serve on 127.0.0.1 (a free port, printed as ``PORT <n>``) until stdin closes."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Connection, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


def main() -> int:
    try:
        import uvloop

        uvloop.run(serve())
    except ImportError:
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
