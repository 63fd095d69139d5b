"""A minimal HTTP/1.1 server for the built-in demo model (the operator's endpoints are
:mod:`orchestrator.ops.ops_server`).

h11 does the framing; each connection serves one request. A handler receives the request and
returns an :class:`HttpResponse` whose body is bytes or an async iterator of byte chunks (sent as
they come, for SSE). Only ever bound to the address the config names (127.0.0.1 by default).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus

import anyio
import h11
from anyio.abc import SocketAttribute, SocketStream, TaskGroup

__all__ = ["HttpRequest", "HttpResponse", "HttpServer"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    target: str
    body: bytes


@dataclass(slots=True)
class HttpResponse:
    status: int
    body: bytes | AsyncIterator[bytes] = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class HttpServer:
    """Serve ``handler`` on ``host:port`` (port 0 picks a free one) until the task group ends."""

    def __init__(self, handler: Handler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self.host = host
        self.port = port

    async def start(self, task_group: TaskGroup) -> None:
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
        self.port = listener.extra(SocketAttribute.local_port)
        task_group.start_soon(listener.serve, self._serve_connection, task_group)

    async def _serve_connection(self, stream: SocketStream) -> None:
        async with stream:
            try:
                await self._serve(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                return
            except h11.RemoteProtocolError as exc:
                log.debug("bad HTTP request: %s", exc)

    async def _serve(self, stream: SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive(65536))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY_BYTES:
                    return
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # ConnectionClosed or PAUSED before a whole request
                return
        assert request is not None
        response = await self._handler(
            HttpRequest(request.method.decode(), request.target.decode(), bytes(body))
        )
        headers = [("content-type", response.content_type), *response.headers]
        if isinstance(response.body, bytes):
            headers.append(("content-length", str(len(response.body))))
        reason = HTTPStatus(response.status).phrase.encode()  # "200 OK", not "200 "
        head = h11.Response(status_code=response.status, headers=headers, reason=reason)
        await stream.send(conn.send(head))
        if isinstance(response.body, bytes):
            await stream.send(conn.send(h11.Data(data=response.body)))
        else:
            async for chunk in response.body:
                await stream.send(conn.send(h11.Data(data=chunk)))
        await stream.send(conn.send(h11.EndOfMessage()))
