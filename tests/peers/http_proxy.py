"""A tiny forwarding HTTP proxy on 127.0.0.1: absolute-form requests and ``CONNECT`` tunnels.

Theory of operation
-------------------
A client configured with ``HTTP_PROXY=http://127.0.0.1:<port>`` sends ``POST http://host:port/path
HTTP/1.1`` to the proxy. The proxy records that request target in :attr:`HttpProxy.targets`,
connects to ``host:port``, sends the request line in origin-form (``POST /path HTTP/1.1``) and then
copies bytes both ways until either side closes (RFC 9112 §3.2.2). For an ``https://`` URL
(``HTTPS_PROXY``) the client sends ``CONNECT host:port`` (RFC 9110 §9.3.6); the proxy records
``host:port``, answers 200 and then copies the TLS bytes both ways. So an answer that reaches
the client proves the client used the proxy.

A server it cannot connect to is answered ``502 Bad Gateway`` (to the ``CONNECT``, or to the
request), as forwarding proxies answer.

With ``refuse="407"`` every request (or ``CONNECT``) is answered 407 Proxy Authentication
Required; with ``refuse="close"`` the connection is closed once the request line is read,
without an answer.

With ``upstream=(host, port)`` every request goes there, whatever host its target names: a test
can then give a client a base URL whose host does not exist (``telegram.invalid``, RFC 6761),
which only the proxy can reach.

Limit (enough for the tests): one upstream per client connection; later requests on a
kept-alive connection are copied to the same upstream as they are (absolute-form, which
:class:`tests.peers.provider_server.ProviderServer` accepts) and are not recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Literal
from urllib.parse import urlsplit

__all__ = ["HttpProxy"]


class HttpProxy:
    """Forwarding proxy, an async context manager.

    Args:
        upstream: ``(host, port)`` every request is sent to instead of the host it names.
        refuse: ``"407"``: every request is answered 407; ``"close"``: closed unanswered.

    Attributes:
        url: ``http://127.0.0.1:<port>``, set on entry: the value for ``HTTP_PROXY``.
        targets: the request targets received, one per client connection: an absolute URL, or
            ``host:port`` for a ``CONNECT``.
    """

    def __init__(
        self,
        *,
        upstream: tuple[str, int] | None = None,
        refuse: Literal["407", "close"] | None = None,
    ) -> None:
        self.upstream = upstream
        self.refuse = refuse
        self.url = ""
        self.targets: list[str] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> HttpProxy:
        self._server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._forward(reader, writer)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = await reader.readuntil(b"\r\n")
        method, target, version = request_line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        self.targets.append(target)
        if self.refuse == "close":
            return  # closed without an answer
        if self.refuse == "407":
            writer.write(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="proxy"\r\nContent-Length: 0\r\n\r\n'
            )
            await writer.drain()
            return
        if method == "CONNECT":
            await self._tunnel(target, reader, writer)
            return
        parts = urlsplit(target)
        if parts.scheme != "http" or parts.hostname is None:
            writer.write(b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return
        host, port = self.upstream or (parts.hostname, parts.port or 80)
        upstream = await _open_or_answer(host, port, writer)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        up_writer.write(f"{method} {path or '/'} {version}\r\n".encode("latin-1"))
        try:
            await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
        finally:
            up_writer.close()

    @staticmethod
    async def _tunnel(
        target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        while (await reader.readuntil(b"\r\n")) != b"\r\n":
            pass  # the CONNECT request's headers
        host, _, port = target.rpartition(":")
        upstream = await _open_or_answer(host, int(port), writer)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
        finally:
            up_writer.close()


async def _open_or_answer(
    host: str, port: int, writer: asyncio.StreamWriter
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A connection to ``host:port``; when none can be made, ``None`` after answering the
    client ``502 Bad Gateway``, as forwarding proxies do (squid, tinyproxy)."""
    try:
        return await asyncio.open_connection(host, port)
    except OSError:
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        return None


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy bytes until ``source`` ends, then end ``sink``."""
    with contextlib.suppress(ConnectionError):
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
