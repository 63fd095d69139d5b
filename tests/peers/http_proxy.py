"""A tiny HTTP forward proxy on 127.0.0.1, for testing that a client really goes through a proxy.

A client configured with this proxy sends each request to it with the absolute-form target
(``POST http://host/path HTTP/1.1``, RFC 9112 §3.2.2). The proxy records the request and sends it
on to ``upstream``, whatever host the target names; so a test can give the client a base URL
whose host does not exist (``telegram.invalid``, RFC 6761) and only the proxy can reach the
peer. Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded. ``CONNECT`` (tunnels for https
targets) is not supported: tests use plain-HTTP peers.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

import aiohttp
from aiohttp import web

__all__ = ["ForwardProxy", "ProxiedRequest"]

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


@dataclass(frozen=True, slots=True)
class ProxiedRequest:
    """One request the proxy forwarded: its method, the ``Host`` it named and its path."""

    method: str
    host: str
    path: str


class ForwardProxy:
    """The proxy; ``async with ForwardProxy(upstream) as proxy`` serves at :attr:`url`.

    Args:
        upstream: ``http://127.0.0.1:PORT`` every request is sent on to.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[ProxiedRequest] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ForwardProxy:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        self._session = aiohttp.ClientSession(auto_decompress=False)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        self.requests.append(ProxiedRequest(request.method, request.host, request.path))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            data=await request.read(),
            headers=headers,
            allow_redirects=False,
        ) as upstream:
            body = await upstream.read()
            kept = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
            return web.Response(status=upstream.status, body=body, headers=kept)
