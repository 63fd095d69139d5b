"""The HTTP front of the local Discord peer's REST routes: recording, auth, scripted faults.

Every request is recorded (:class:`~tests.peers.discord_wire.Request`) before it is answered;
a request without ``Authorization: Bot <token>`` is 401 (interaction callbacks and interaction
webhooks are authorised by the token in their path, as on Discord); a scripted :class:`Fault`
for the route's N-th call answers 429 or an error without applying the request, or delays the
answer of an applied one. Unknown paths are 404 ``{"message": "404: Not Found", "code": 0}``.

With ``bucket_limit`` set, every route keeps Discord's per-route buckets
(https://discord.com/developers/docs/topics/rate-limits): one per route and major parameter
(channel, guild, interaction or webhook token), at most ``bucket_limit`` requests per
``bucket_window`` seconds from the first; answers carry ``X-RateLimit-Limit``, ``-Remaining``,
``-Reset`` (Unix seconds), ``-Reset-After`` (seconds) and ``-Bucket``, and a request over the
limit is refused with a 429 whose ``retry_after`` is the rest of the window (discord.py reads
the headers and waits before it would be refused). Without it no bucket headers are sent, and
discord.py then sends one request at a time per route and major parameter.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.peers.discord_rest import Handler, RestRoutes
from tests.peers.discord_wire import (
    NOT_FOUND,
    UNAUTHORIZED,
    ApiError,
    RateLimit,
    Refused,
    Request,
    json_response,
)

__all__ = ["Fault", "RestFront"]


@dataclass(frozen=True)
class Fault:
    """What one scripted call gets: a 429, an error (both unapplied) or a late answer (s)."""

    error: ApiError | None = None
    rate_limit: RateLimit | None = None
    delay_secs: float = 0.0


class RestFront:
    """Serves :class:`RestRoutes` under ``/api/v10``; ``changed`` is called on every change."""

    def __init__(
        self,
        routes: RestRoutes,
        *,
        token: str,
        changed: Callable[[], None],
        bucket_limit: int | None = None,
        bucket_window: float = 5.0,
    ) -> None:
        self.routes = routes
        self.token = token
        self.requests: list[Request] = []
        self._changed = changed
        self._faults: dict[tuple[str, int], Fault] = {}
        self._calls: dict[str, int] = {}
        self._buckets = _Buckets(bucket_limit, bucket_window) if bucket_limit else None

    def install(self, app: web.Application) -> None:
        for method, template, handler in self.routes.routes():
            app.router.add_route(
                method, "/api/v10" + template, self._wrap(method, template, handler)
            )
        app.router.add_route("*", "/{tail:.*}", self._not_found)

    def script(self, route: str, call: int | None, fault: Fault) -> None:
        """``fault`` for the ``call``-th request of ``route`` (None: the next one).

        Raises:
            ValueError: ``route`` is not one of the served routes.
        """
        known = self.routes.route_keys()
        if route not in known:
            raise ValueError(f"unknown route {route!r}; known: {sorted(known)}")
        number = call if call is not None else self._calls.get(route, 0) + 1
        self._faults[(route, number)] = fault

    def _wrap(
        self,
        method: str,
        template: str,
        handler: Handler,
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        route = f"{method} {template}"
        needs_auth = not template.startswith(("/interactions/", "/webhooks/"))

        async def handle(request: web.Request) -> web.StreamResponse:
            body, files = await _read_body(request)
            record = Request(
                method=method,
                path=request.path.removeprefix("/api/v10"),
                route=route,
                call=self._count(route),
                query=dict(request.query),
                json=body,
                at=time.monotonic(),
                headers={k: v for k, v in request.headers.items() if k != "Authorization"},
                files=files,
            )
            self.requests.append(record)
            self._changed()
            fault = self._faults.pop((route, record.call), Fault())
            if needs_auth and request.headers.get("Authorization") != f"Bot {self.token}":
                response = _error(UNAUTHORIZED)
            elif fault.rate_limit is not None:
                response = fault.rate_limit.response()
            elif fault.error is not None:
                response = _error(fault.error)
            else:
                response = await self._answer(route, request, body, handler, record)
            if fault.delay_secs:
                await asyncio.sleep(fault.delay_secs)
            record.status = response.status
            record.answered_at = time.monotonic()
            self._changed()
            return response

        return handle

    async def _answer(
        self, route: str, request: web.Request, body: Any, handler: Handler, record: Request
    ) -> web.Response:
        headers: dict[str, str] = {}
        if self._buckets is not None:
            major = tuple(request.match_info.get(k, "") for k in _MAJOR_PARAMETERS)
            headers, retry_after = self._buckets.take(route, major)
            if retry_after is not None:
                return json_response(
                    429,
                    {
                        "message": "You are being rate limited.",
                        "retry_after": retry_after,
                        "global": False,
                    },
                    {
                        **headers,
                        "Via": "1.1 google",
                        "X-RateLimit-Scope": "user",
                        "Retry-After": str(math.ceil(retry_after)),
                    },
                )
        try:
            status, result = await handler(request, body)
        except Refused as exc:
            return json_response(exc.error.status, exc.error.body(), headers)
        record.response = result
        if result is None:
            return web.Response(status=204, headers=headers)
        return json_response(status, result, headers)

    def _count(self, route: str) -> int:
        self._calls[route] = self._calls.get(route, 0) + 1
        return self._calls[route]

    async def _not_found(self, request: web.Request) -> web.Response:
        return _error(NOT_FOUND)


_MAJOR_PARAMETERS = ("channel_id", "guild_id", "interaction_id", "interaction_token")


class _Buckets:
    """Fixed windows of ``limit`` requests per ``window`` seconds, per (route, major params)."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._state: dict[tuple[str, tuple[str, ...]], tuple[float, int]] = {}

    def take(self, route: str, major: tuple[str, ...]) -> tuple[dict[str, str], float | None]:
        """The bucket headers for one request, and ``retry_after`` (s) when it is refused."""
        now = time.monotonic()
        reset_at, used = self._state.get((route, major), (now + self.window, 0))
        if now >= reset_at:
            reset_at, used = now + self.window, 0
        refused = used >= self.limit
        if not refused:
            used += 1
        self._state[(route, major)] = (reset_at, used)
        reset_after = max(0.0, reset_at - now)
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.limit - used),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": hashlib.sha1(route.encode()).hexdigest()[:16],
        }
        return headers, (round(reset_after, 3) if refused else None)


def _error(error: ApiError) -> web.Response:
    return json_response(error.status, error.body())


async def _read_body(request: web.Request) -> tuple[Any, dict[str, bytes]]:
    """The JSON body, or a multipart request's ``payload_json`` decoded (None without a body),
    and a multipart request's files by file name."""
    if not request.can_read_body:
        return None, {}
    if request.content_type == "application/json":
        with contextlib.suppress(ValueError):
            return await request.json(), {}
        return None, {}
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        files = {v.filename: v.file.read() for v in form.values() if isinstance(v, web.FileField)}
        raw = form.get("payload_json")
        return (json.loads(raw) if isinstance(raw, str) else None), files
    return None, {}
