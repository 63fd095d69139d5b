"""The operator's HTTP endpoints on ``server.listen`` (architecture §7 "Metrics"), served by
aiohttp's web server: ``GET /healthz`` and ``GET /metrics``, and the routes of the channels
served over HTTP (the web page, the OpenAI-compatible API: :class:`HttpEndpoint`).

aiohttp writes the status line with its reason phrase (``HTTP/1.1 503 Service Unavailable``),
answers HEAD, keep-alive and malformed requests as HTTP/1.1 (RFC 9112) says, and is stopped
within a bound (:data:`STOP_BOUND_SECS`) however many scrapers are connected. Bound only to the
configured address.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import generate_latest

from orchestrator.metrics import Metrics

__all__ = ["STOP_BOUND_SECS", "HttpEndpoint", "ListsModels", "OpsServer", "parse_listen"]

log = logging.getLogger(__name__)

STOP_BOUND_SECS = 2.0
"""How long stopping waits for requests in flight, in seconds."""


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9000`` too) → (host, port); an empty host is 127.0.0.1."""
    host, _, port = listen.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port)


@runtime_checkable
class HttpEndpoint(Protocol):
    """A channel served by this server (``kind: web``, ``kind: openai_api``): every request
    whose path starts with ``http_prefix`` (``"/"``, ``"/v1/"``) and is not ``/healthz`` or
    ``/metrics`` goes to :meth:`serve_http`; the longest prefix wins."""

    @property
    def http_prefix(self) -> str: ...

    async def serve_http(self, request: web.Request) -> web.StreamResponse:
        """Answer ``request`` (a 404 when no route of the channel matches)."""
        ...


@runtime_checkable
class ListsModels(Protocol):
    """A served channel that tells its clients the models offered (``GET /v1/models``: the
    aliases of ``agent.models``, else the chain's models); the daemon sets :attr:`served_models`
    when it builds the channel."""

    served_models: tuple[str, ...]


class OpsServer:
    """``/healthz`` and ``/metrics`` of ``metrics`` on ``host:port`` (port 0: a free one), and
    the routes of ``endpoints()`` (asked at each request, so channels added by a reload are
    served too)."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        endpoints: Callable[[], Iterable[HttpEndpoint]] = tuple,
    ) -> None:
        self._metrics = metrics
        self._endpoints = endpoints
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Listen. Raises ``OSError`` when the address cannot be bound."""
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._scrape)
        app.router.add_route("*", "/{tail:.*}", self._mounted)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=STOP_BOUND_SECS)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        addresses = runner.addresses  # the bound (host, port, ...) when port 0 was asked
        if addresses:
            self.port = int(addresses[0][1])

    async def stop(self) -> None:
        """Stop listening and close open connections. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        status, body = self._metrics.health_response()
        return web.Response(status=status, body=body, content_type="application/json")

    async def _scrape(self, request: web.Request) -> web.Response:
        response = web.Response(status=200, body=generate_latest(self._metrics.registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def _mounted(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        matching = [e for e in self._endpoints() if path.startswith(e.http_prefix)]
        if not matching:
            raise web.HTTPNotFound()
        endpoint = max(matching, key=lambda e: len(e.http_prefix))
        return await endpoint.serve_http(request)
