"""An httpcore network backend on plain asyncio transports: the providers' sockets.

Theory of operation
-------------------
httpcore reads a streamed body one ``read()`` per received piece. Its default backend on asyncio
goes through anyio's socket stream: per read a cancel scope (even without a timeout), two
exception-mapping context managers, a resource guard, and the transport's reading switched on
and off again (two ``epoll_ctl`` calls). For a stream of small events that per-read machinery
costs more than parsing the event (bench/README.md). This backend implements httpcore's
``AsyncNetworkBackend`` / ``AsyncNetworkStream`` interface directly on an ``asyncio.Protocol``:
received data is queued as it arrives (reading is paused only above :data:`READ_BUFFER_BYTES`),
and a read returns what is queued (up to its ``max_bytes``), or waits on one future for more.

* timeouts (httpcore's ``timeout`` arguments: connect, write; reads pass none, architecture §2) are
  ``asyncio.timeout`` scopes, raised as httpcore's ``ConnectTimeout``/``ReadTimeout``/
  ``WriteTimeout``; socket errors as ``ConnectError``/``ReadError``/``WriteError``, which httpx
  maps to its own exceptions as usual;
* TLS is ``loop.start_tls`` on the same protocol (the standard library's SSL transport, or
  uvloop's);
* a closed peer reads as ``b""`` (EOF), as httpcore expects.

It needs an asyncio loop (uvloop included); :func:`providers.transport.make_client` uses it.
"""

# ruff: noqa: ASYNC109  (the ``timeout`` arguments are httpcore's interface)
from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from collections.abc import Iterable
from typing import Any

import httpcore
from httpcore import AsyncNetworkBackend, AsyncNetworkStream

__all__ = ["READ_BUFFER_BYTES", "AsyncioBackend"]

READ_BUFFER_BYTES = 256 * 1024
"""Bytes received but not yet read above which the socket's reading is paused."""

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class _Protocol(asyncio.Protocol):
    """Queues received data; wakes one waiting reader; tracks write back-pressure."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.eof = False
        self.error: BaseException | None = None
        self.reader: asyncio.Future[None] | None = None
        self.writable: asyncio.Future[None] | None = None
        self.paused_reading = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > READ_BUFFER_BYTES and self.transport is not None:
            self.transport.pause_reading()
            self.paused_reading = True
        self._wake_reader()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake_reader()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake_reader()
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    def _wake_reader(self) -> None:
        reader = self.reader
        if reader is not None and not reader.done():
            reader.set_result(None)


class _Stream(AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        chunks = protocol.chunks
        if not chunks:
            if protocol.eof:
                return b""
            reader = protocol.reader = asyncio.get_running_loop().create_future()
            try:
                if timeout is None:
                    await reader
                else:
                    async with asyncio.timeout(timeout):
                        await reader
            except TimeoutError as exc:
                raise httpcore.ReadTimeout(str(exc)) from exc
            finally:
                protocol.reader = None
            if not chunks:
                return b""  # EOF or the connection was lost
        chunk = chunks.popleft()
        if chunks and len(chunk) < max_bytes:  # everything queued, up to max_bytes
            parts = [chunk]
            size = len(chunk)
            while chunks and size + len(chunks[0]) <= max_bytes:
                part = chunks.popleft()
                parts.append(part)
                size += len(part)
            chunk = b"".join(parts)
        if len(chunk) > max_bytes:
            chunks.appendleft(chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        protocol.buffered -= len(chunk)
        if protocol.paused_reading and protocol.buffered <= READ_BUFFER_BYTES // 2:
            protocol.paused_reading = False
            self._transport.resume_reading()
        return chunk

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if self._transport.is_closing() or protocol.error is not None:
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        writable = protocol.writable
        if writable is not None:
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(writable)
            except TimeoutError as exc:
                raise httpcore.WriteTimeout(str(exc)) from exc
        if protocol.error is not None:
            raise httpcore.WriteError(repr(protocol.error))

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as exc:
            self._transport.close()
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(repr(exc)) from exc
        if transport is None:
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._protocol.transport = transport
        return _Stream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        transport = self._transport
        if info == "ssl_object":
            return transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return transport.get_extra_info("sockname")
        if info == "server_addr":
            return transport.get_extra_info("peername")
        if info == "socket":
            return transport.get_extra_info("socket")
        if info == "is_readable":
            # httpcore asks before reusing an idle connection: readable means the server sent
            # something (or closed), so it is not reused.
            protocol = self._protocol
            return bool(protocol.chunks) or protocol.eof or transport.is_closing()
        return None


class AsyncioBackend(AsyncNetworkBackend):
    """httpcore's network backend on asyncio transports (see the module docstring)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Protocol, host, port, local_addr=local
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(repr(exc)) from exc
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            if sock is not None:
                sock.setsockopt(*option)
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Stream(transport, protocol)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(_Protocol, path)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(repr(exc)) from exc
        return _Stream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
