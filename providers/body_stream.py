"""The body of a streaming response: read from aiohttp's own reader, held while a paced read
waits, bounded by the byte-idle watchdog (architecture §2 "Timeouts", §5 "Read pacing").

A streaming body is read from aiohttp's own reader (``ClientResponse.content``, at most
:data:`READ_BYTES` a read) — the response :func:`providers.transport.open_stream` posted
directly, or the one under httpx's, reached through aiohttp's public ``on_request_end`` trace
event — not through httpx's byte-stream layers, which add nothing for a body without a
content coding (httpx's decoders decode one that has one: :func:`decoded_view`). The same
response's connection lends its transport to :meth:`BodyStream.held`: while the reader paces its
reads (architecture §5 "Read pacing") the socket is not read, so a burst the model sends
meanwhile costs one ``recv`` later, not a wakeup of the loop per packet.

The idle bound is one watchdog per stream (:class:`IdleWatchdog`), not a timer per read: a read
only stores the loop's time; one timer per idle period compares that time with the bound and,
when it is exceeded while a read is waiting, cancels the reading task, which the read turns into
:class:`providers.errors.ProviderTimeout` (phase ``"idle"``). aiohttp's own per-read bound
(``sock_read``) re-arms a timer on every received packet, and it is dropped, leaving the read
waiting for good, when aiohttp's parser meets broken chunked framing after the first read
(aiohttp 3.14): the watchdog ends such a stream at the bound. Framing bytes (a chunk's size
line) are parsed inside aiohttp and do not reset the bound; data does.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import aiohttp
import httpx

from providers.errors import ProviderTimeout
from providers.status_errors import is_json_media_type
from providers.transport_errors import translated

__all__ = ["READ_BYTES", "BodyStream", "IdleWatchdog", "decoded_view"]

READ_BYTES = 16 * 1024
"""The most one read of a body takes (bytes), as httpx-aiohttp's own reads of it."""


class _AiohttpBody(httpx.AsyncByteStream):
    """An aiohttp response's body as httpx's byte stream (its bytes as they came)."""

    def __init__(self, answer: aiohttp.ClientResponse) -> None:
        self._answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._answer.content.iter_chunked(READ_BYTES):
            yield chunk


def decoded_view(answer: aiohttp.ClientResponse) -> httpx.Response:
    """``answer`` as an ``httpx.Response`` over the same body, for httpx's decoders of a content
    coding (``aiter_bytes``, ``aread``); nothing is read until it is iterated."""
    return httpx.Response(answer.status, headers=answer.raw_headers, stream=_AiohttpBody(answer))


class IdleWatchdog:
    """The byte-idle bound of one stream: one timer per idle period, not one scope per read.

    Call :meth:`reading` right before awaiting a read and :meth:`read_done` after it (both
    cheap: a clock read and a flag). When
    ``idle_secs`` seconds pass after a read started, or after its latest bytes, and it is
    still waiting, the timer cancels the reading task; :meth:`expired_by` tells the read
    that the ``CancelledError`` it caught was the watchdog's (and clears that cancellation), so
    it can raise the timeout instead. A cancellation from anywhere else is never taken for it.
    While the consumer works between reads nothing is bounded. :meth:`stop` cancels the timer.
    """

    __slots__ = ("_expired", "_handle", "_idle", "_last", "_loop", "_reading", "_task")

    def __init__(self, idle_secs: float) -> None:
        self._idle = idle_secs
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._reading = False
        self._expired = False
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.TimerHandle | None = None
        if math.isfinite(idle_secs):
            self._handle = self._loop.call_at(self._last + idle_secs, self._check)

    def reading(self) -> None:
        """A read is about to be awaited by the current task."""
        self._last = self._loop.time()
        self._reading = True
        if self._task is None:
            self._task = asyncio.current_task()

    def read_done(self) -> None:
        """The read returned (or raised)."""
        self._reading = False

    def expired_by(self) -> bool:
        """True when the ``CancelledError`` being handled is the watchdog's alone.

        Then that cancellation is withdrawn (``Task.uncancel``); when another one is also
        pending, it stays and this returns False, so the caller re-raises it.
        """
        if not self._expired or self._task is None:
            return False
        self._expired = False
        return self._task.uncancel() == 0

    def stop(self) -> None:
        """Cancel the timer (idempotent)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _check(self) -> None:
        now = self._loop.time()
        due = self._last + self._idle
        if not self._reading:
            # The consumer is busy between reads: the next read, whenever it starts, is due
            # no earlier than one bound from now.
            self._handle = self._loop.call_at(now + self._idle, self._check)
        elif now >= due - 1e-3 and self._task is not None:
            self._handle = None
            self._expired = True
            self._task.cancel()
        else:  # a read started after the timer was set: look again when it is due
            self._handle = self._loop.call_at(due, self._check)


class _Held:
    """:meth:`BodyStream.held`'s context manager: pauses ``transport`` when it is reading and
    not closing; on the way out resumes it, when the pause was its own and it is not closing."""

    __slots__ = ("_paused", "_transport")

    def __init__(self, transport: asyncio.ReadTransport | None) -> None:
        self._transport = transport
        self._paused = False

    def __enter__(self) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing() and transport.is_reading():
            transport.pause_reading()
            self._paused = True

    def __exit__(self, *exc_info: object) -> None:
        transport = self._transport
        if self._paused and transport is not None and not transport.is_closing():
            transport.resume_reading()


class BodyStream:
    """The body of a 2xx streaming response, read under the byte-idle bound (seconds).

    Attributes:
        whole_json: the server answered with one JSON body (``Content-Type:
            application/json``) instead of a stream: it ignored ``stream: true``
            (architecture §2 "A server that does not stream"). Read once, from the headers.
        paceable: a read takes all that arrived (up to :data:`READ_BYTES`; aiohttp's reader),
            not one HTTP chunk as httpx's own transports give (a proxied request), where a
            paced reader would fall one chunk a pause behind (architecture §5 "Read pacing").

    Args:
        response: httpx's response (``None``: a direct stream, ``answer`` alone).
        url: the request's URL (in errors).
        idle_timeout_secs: the byte-idle bound.
        answer: aiohttp's response beneath (``None``: httpx's own transport, a proxied request).

    Raises:
        ValueError: neither response given.
    """

    def __init__(
        self,
        response: httpx.Response | None,
        url: str,
        idle_timeout_secs: float,
        answer: aiohttp.ClientResponse | None = None,
    ) -> None:
        if response is not None:
            media_type = response.headers.get("content-type")
            coding = response.headers.get("content-encoding", "identity")
        elif answer is not None:  # a field sent more than once reads as httpx joins it
            media_type = ", ".join(answer.headers.getall("content-type", ())) or None
            coding = ", ".join(answer.headers.getall("content-encoding", ("identity",)))
        else:
            raise ValueError("a BodyStream needs an httpx or an aiohttp response")
        self._response = response
        self._url = url
        self._idle = idle_timeout_secs
        self._answer = answer
        self._raw = coding.strip().lower() in ("", "identity")
        self.paceable = answer is not None
        self.whole_json = is_json_media_type(media_type)

    def held(self) -> AbstractContextManager[None]:
        """While inside, the connection's socket is not read (asyncio's
        ``ReadTransport.pause_reading``): what the server sends meanwhile waits in the kernel's
        buffer, and the first read after takes it in one ``recv`` and one parse of aiohttp's,
        instead of one wakeup of the loop per packet. Nothing is lost or reordered. A transport
        already paused (aiohttp's own flow control) or closing is left as it is, and only a
        pause made here is undone on the way out (cancellation included), so the connection
        goes back to the pool reading. Without a transport (a proxied request) it does nothing,
        nor once aiohttp has the whole body and gave the connection back to the pool, where
        another request may be using it (``ClientResponse.connection`` is ``None``). A plain
        context manager (no generator per pause: it is entered before every paced read).
        """
        connection = None if self._answer is None else self._answer.connection
        return _Held(None if connection is None else connection.transport)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive: the raw bytes without a content coding (httpx's
        decoder layer skipped), else decoded.

        Raises:
            ProviderTimeout: phase ``"idle"``, no byte for ``idle_timeout_secs`` seconds.
            ProviderConnectionError: the connection broke.
            StreamProtocolError: the body could not be decoded (e.g. corrupt gzip).
        """
        raw = self._raw
        if raw and self._answer is not None:  # aiohttp's own reader, no layer between
            read: Callable[[], Awaitable[bytes]] = partial(self._answer.content.read, READ_BYTES)
        else:
            response = self._response
            if response is None:
                assert self._answer is not None
                response = decoded_view(self._answer)
            read = (response.aiter_raw() if raw else response.aiter_bytes()).__anext__
        watchdog = IdleWatchdog(self._idle)
        try:
            while True:
                watchdog.reading()
                try:
                    chunk = await read()
                    if not chunk and self._answer is not None and raw:
                        return  # aiohttp's reader's end of the body
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if watchdog.expired_by():
                        raise ProviderTimeout(
                            f"no bytes for {self._idle:g} s (stream_idle_timeout_secs)",
                            phase="idle",
                        ) from None
                    raise
                except Exception as exc:
                    raise translated(exc, self._url, "read", self._idle) from exc
                finally:
                    watchdog.read_done()
                if chunk:
                    yield chunk
        finally:
            watchdog.stop()
