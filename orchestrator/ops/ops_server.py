"""The operator's HTTP endpoints on ``server.listen`` (architecture §7 "Metrics"), served by
aiohttp's web server: ``GET /healthz`` and ``GET /metrics``.

aiohttp writes the status line with its reason phrase (``HTTP/1.1 503 Service Unavailable``),
answers HEAD, keep-alive and malformed requests as HTTP/1.1 (RFC 9112) says, and is stopped
within a bound (:data:`STOP_BOUND_SECS`) however many scrapers are connected. Bound only to the
configured address.
"""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import generate_latest

from orchestrator.metrics import Metrics

__all__ = ["STOP_BOUND_SECS", "OpsServer", "parse_listen"]

log = logging.getLogger(__name__)

STOP_BOUND_SECS = 2.0
"""How long stopping waits for requests in flight, in seconds."""


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9000`` too) → (host, port); an empty host is 127.0.0.1."""
    host, _, port = listen.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port)


class OpsServer:
    """``/healthz`` and ``/metrics`` of ``metrics`` on ``host:port`` (port 0: a free one)."""

    def __init__(self, metrics: Metrics, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._metrics = metrics
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Listen. Raises ``OSError`` when the address cannot be bound."""
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._scrape)
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
