"""The connection pool of a provider's client: httpcore's connections, bookkeeping per request.

Theory of operation
-------------------
httpcore's own pool (``httpcore.AsyncConnectionPool``) re-derives its state on every request
start and end: it asks every connection whether it is closed, expired (a ``poll`` of its socket)
or idle, and for each queued request scans every connection again. With a few hundred streams
in flight that is a few hundred checks per request start and end, and it was half the CPU of
opening a stream at 500 conversations (bench/README.md).

:class:`ConnectionPool` keeps the same connections (``httpcore.AsyncHTTPConnection``, made by
httpcore's ``create_connection``) and the same rules, but holds its state instead of scanning
it, for HTTP/1.1, where a connection serves one request at a time:

- ``_held``: every connection the pool owns (in use or idle), at most ``max_connections``;
- ``_idle``: the idle ones, oldest release first;
- ``_queue``: the requests waiting for a connection, first come first served.

Each transition is one of four, all O(1) for one origin:

- *request*: queue it, then :meth:`_dispatch`;
- :meth:`_dispatch` (on every request and release): close the idle connections whose keep-alive
  ran out (from the oldest; only the oldest is asked while it has not), then give the queue's
  head the most recently released idle connection of its origin, else a new connection while
  fewer than ``max_connections`` are held, else the oldest idle connection of another origin is
  closed to make room, else the head and everything behind it wait;
- *release* (the response closed, or the request failed or was cancelled holding a
  connection): a connection that went back to idle joins ``_idle`` (the oldest idle one closed
  beyond ``max_keepalive_connections``), any other is dropped and closed; then :meth:`_dispatch`;
- *abandon* (a waiting request failed or was cancelled): it leaves the queue.

An idle connection is asked ``is_closed()``/``has_expired()``/``is_idle()`` once, when it is
taken for a request: a server that closed it meanwhile makes it readable and it is closed
instead (httpcore's check). A connection that failed with its request, or was given to a
request cancelled before it used it, is dropped at once (httpcore's pool kept the latter,
neither idle nor closed, counted against ``max_connections`` for good). A response whose close
was cut short by a cancellation (asyncio's ``Task.cancel()`` passes anyio's shield) still gives
its connection back, dropped; one given back after the pool was closed is closed.

HTTP/2 connections serve several requests at once; a client with ``http2=True`` keeps httpcore's
pool (:func:`providers.transport.make_client`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import httpcore

__all__ = ["ConnectionPool"]


class _Waiter:
    """One request: its origin, and the connection once the pool assigns one."""

    __slots__ = ("assigned", "connection", "origin")

    def __init__(self, origin: httpcore.Origin) -> None:
        self.origin = origin
        self.connection: httpcore.AsyncConnectionInterface | None = None
        self.assigned: anyio.Event | None = None  # made only when the request has to wait


class ConnectionPool(httpcore.AsyncConnectionPool):
    """httpcore's pool for HTTP/1.1 with O(1) bookkeeping per request (see the module docstring).

    Takes httpcore's ``AsyncConnectionPool`` arguments except ``proxy`` and ``http2`` (proxies
    are httpx's own transports; HTTP/2 keeps httpcore's pool). ``max_keepalive_connections``
    bounds the idle connections kept, each for at most ``keepalive_expiry`` seconds. A request
    waits for a connection without bound unless its ``timeout`` extension has a ``pool`` value
    (seconds), then raises ``httpcore.PoolTimeout``.
    """

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("proxy") is not None or kwargs.get("http2"):
            raise ValueError("ConnectionPool serves direct HTTP/1.1 connections only")
        super().__init__(**kwargs)
        self._held: dict[httpcore.AsyncConnectionInterface, None] = {}
        self._idle: deque[httpcore.AsyncConnectionInterface] = deque()
        self._queue: deque[_Waiter] = deque()

    @property
    def connections(self) -> list[httpcore.AsyncConnectionInterface]:
        """Every connection held, in use or idle, oldest first."""
        return list(self._held)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        """Send ``request`` on a pooled connection; the response's stream gives it back.

        Raises httpcore's ``UnsupportedProtocol`` for a scheme other than http(s)/ws(s),
        ``PoolTimeout`` as above, and whatever the connection raises."""
        scheme = request.url.scheme
        if scheme not in (b"http", b"https", b"ws", b"wss"):
            raise httpcore.UnsupportedProtocol(
                "Request URL is missing an 'http://' or 'https://' protocol."
                if not scheme
                else f"Request URL has an unsupported protocol '{scheme.decode()}://'."
            )
        waiter = _Waiter(request.url.origin)
        self._queue.append(waiter)
        try:
            while True:
                await self._close(self._dispatch())
                connection = waiter.connection or await self._wait(waiter, request)
                try:
                    response = await connection.handle_async_request(request)
                except httpcore.ConnectionNotAvailable:
                    # Closed by the server between the check and the request: try another.
                    waiter.connection = None
                    self._queue.appendleft(waiter)
                    await self._close(self._release(connection, dispatch=False))
                else:
                    break
        except BaseException:
            if waiter.connection is not None:
                await self._close(self._release(waiter.connection))
            else:
                self._queue.remove(waiter)
                await self._close(self._dispatch())
            raise
        return httpcore.Response(
            status=response.status,
            headers=response.headers,
            content=_PooledStream(response.stream, connection, self),
            extensions=response.extensions,
        )

    async def _wait(
        self, waiter: _Waiter, request: httpcore.Request
    ) -> httpcore.AsyncConnectionInterface:
        timeout = request.extensions.get("timeout", {}).get("pool")
        waiter.assigned = anyio.Event()
        with anyio.move_on_after(timeout) as scope:
            await waiter.assigned.wait()
        if waiter.connection is None:
            assert scope.cancelled_caught
            raise httpcore.PoolTimeout(f"no connection within {timeout} s")
        return waiter.connection

    def _dispatch(self) -> list[httpcore.AsyncConnectionInterface]:
        """Assign connections to the queue's head while there are any; the ones to close."""
        closing: list[httpcore.AsyncConnectionInterface] = []
        idle, held = self._idle, self._held
        while idle and idle[0].has_expired():
            closing.append(self._drop(idle.popleft()))
        while self._queue:
            waiter = self._queue[0]
            connection = self._take_idle(waiter.origin, closing)
            if connection is None:
                if len(held) >= self._max_connections:
                    if not idle:
                        break
                    closing.append(self._drop(idle.popleft()))
                connection = self.create_connection(waiter.origin)
                held[connection] = None
            self._queue.popleft()
            waiter.connection = connection
            if waiter.assigned is not None:
                waiter.assigned.set()
        return closing

    def _take_idle(
        self, origin: httpcore.Origin, closing: list[httpcore.AsyncConnectionInterface]
    ) -> httpcore.AsyncConnectionInterface | None:
        """The most recently released idle connection to ``origin`` that is still usable."""
        idle = self._idle
        for index in range(len(idle) - 1, -1, -1):
            connection = idle[index]
            if not connection.can_handle_request(origin):
                continue
            del idle[index]
            if connection.is_closed():
                self._drop(connection)
            elif connection.has_expired() or not connection.is_idle():
                closing.append(self._drop(connection))
            else:
                return connection
        return None

    def _release(
        self, connection: httpcore.AsyncConnectionInterface, *, dispatch: bool = True
    ) -> list[httpcore.AsyncConnectionInterface]:
        """``connection`` is no longer a request's: keep it idle or drop it; the ones to close."""
        closing: list[httpcore.AsyncConnectionInterface] = []
        if connection not in self._held:  # the pool was closed meanwhile: so is this one
            closing.append(connection)
        elif connection.is_closed():
            self._drop(connection)
        elif connection.is_idle():
            self._idle.append(connection)
            if len(self._idle) > self._max_keepalive_connections:
                closing.append(self._drop(self._idle.popleft()))
        else:  # never connected (its request was cancelled first), or left mid-exchange
            closing.append(self._drop(connection))
        if dispatch:
            closing += self._dispatch()
        return closing

    def _drop(
        self, connection: httpcore.AsyncConnectionInterface
    ) -> httpcore.AsyncConnectionInterface:
        self._held.pop(connection, None)
        return connection

    async def _close(self, closing: Iterable[httpcore.AsyncConnectionInterface]) -> None:
        with anyio.CancelScope(shield=True):
            for connection in closing:
                await connection.aclose()

    async def aclose(self) -> None:
        """Close every connection held; requests still waiting keep waiting."""
        closing = list(self._held)
        self._held.clear()
        self._idle.clear()
        await self._close(closing)

    def __repr__(self) -> str:
        idle = len(self._idle)
        return (
            f"<{type(self).__name__} [Requests: {len(self._held) - idle} active, "
            f"{len(self._queue)} queued | Connections: {len(self._held) - idle} active, "
            f"{idle} idle]>"
        )


class _PooledStream:
    """A response body that gives its connection back to the pool when closed.

    Its ``_stream`` is the connection's own body stream, where
    :func:`providers.transport._connection_body` finds it, as under httpcore's ``PoolByteStream``.
    """

    def __init__(
        self,
        stream: Any,
        connection: httpcore.AsyncConnectionInterface,
        pool: ConnectionPool,
    ) -> None:
        self._stream = stream
        self._connection = connection
        self._pool = pool
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            with anyio.CancelScope(shield=True):  # no shield against asyncio's Task.cancel()
                if hasattr(self._stream, "aclose"):
                    await self._stream.aclose()
        finally:  # so a close cut short still gives the connection back (dropped: mid-close)
            await self._pool._close(self._pool._release(self._connection))
