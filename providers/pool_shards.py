"""A provider's connections spread over several httpcore pools of at most 64 connections each.

httpcore's ``AsyncConnectionPool`` looks at every one of its connections whenever a request
starts or ends (and, for each queued request, at every one again): with a thousand connections
open, each request costs thousands of checks, and a thousand replies starting at once a million.
:class:`PoolShards` holds ``ceil(max_connections / 64)`` pools that share the limits between them
and hands each request to the one with the fewest requests in flight, so each of those passes
looks at 64 connections at most. It implements what httpx's ``AsyncHTTPTransport`` calls on its
pool (``handle_async_request``, ``aclose``, ``__aenter__``/``__aexit__``) and httpcore's
``connections`` property.

The number in flight is each pool's own request list (``AsyncConnectionPool._requests``: a
request is in it from its start until its response is closed); without that attribute (another
httpcore), requests go round the pools in turn.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from types import TracebackType

import httpcore

__all__ = ["SHARD_CONNECTIONS", "PoolShards"]

SHARD_CONNECTIONS = 64
"""The most connections one pool holds."""


class PoolShards:
    """``make_pool(max_connections, max_keepalive_connections)`` pools sharing the limits.

    Args:
        make_pool: builds one pool with the given limits.
        max_connections: connections over all pools.
        max_keepalive_connections: idle connections kept alive over all pools (each pool keeps
            its share, at least one: so up to the larger of this and the number of pools).
    """

    def __init__(
        self,
        make_pool: Callable[[int, int], httpcore.AsyncConnectionPool],
        max_connections: int,
        max_keepalive_connections: int,
    ) -> None:
        count = max(1, math.ceil(max_connections / SHARD_CONNECTIONS))
        per_pool = math.ceil(max_connections / count)
        keepalive = max(1, max_keepalive_connections // count)
        self.pools = [make_pool(per_pool, keepalive) for _ in range(count)]
        self._turns = itertools.cycle(self.pools)
        self._counted = all(isinstance(getattr(p, "_requests", None), list) for p in self.pools)

    @property
    def connections(self) -> list[httpcore.AsyncConnectionInterface]:
        """Every pool's connections."""
        return [c for pool in self.pools for c in pool.connections]

    def _pick(self) -> httpcore.AsyncConnectionPool:
        if len(self.pools) == 1:
            return self.pools[0]
        if self._counted:
            return min(self.pools, key=lambda pool: len(pool._requests))
        return next(self._turns)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        """Send ``request`` through the pool with the fewest requests in flight."""
        return await self._pick().handle_async_request(request)

    async def aclose(self) -> None:
        """Close every pool (and its connections)."""
        for pool in self.pools:
            await pool.aclose()

    async def __aenter__(self) -> PoolShards:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<PoolShards {len(self.pools)} x {self.pools[0]!r}>"
