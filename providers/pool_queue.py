"""Requests waiting for a pooled connection, made visible (architecture §2 "Transport").

A provider's pool holds ``max_connections`` connections; a request beyond them waits for one,
unbounded (it is not the model's time). :class:`PoolQueue` counts those waits from aiohttp's
public trace events (``on_connection_queued_start`` / ``on_connection_queued_end``) and says
so in the log: a warning when a queue forms (the pool is full), an info line when it has
drained (how many waited, the longest wait), so a pool too small for the load is never silent.
Its counts are attributes a metric can read (:attr:`waiting`, :attr:`queued`).

aiohttp reports no end for a wait its request abandoned (cancelled while waiting): each request
runs inside :func:`watching`, which forgets the waits its request left open (the trace events
run in the requesting task, so a context variable links them to it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import SimpleNamespace

import aiohttp

__all__ = ["PoolQueue", "watching"]

log = logging.getLogger(__name__)

_waits: ContextVar[list[tuple[PoolQueue, SimpleNamespace]] | None] = ContextVar(
    "pool_waits", default=None
)
"""The waits the current request began (set by :func:`watching`)."""


@contextmanager
def watching() -> Iterator[None]:
    """Around one request: a wait for a connection it left open (it was cancelled or failed
    while waiting) is forgotten when it ends."""
    waits: list[tuple[PoolQueue, SimpleNamespace]] = []
    token = _waits.set(waits)
    try:
        yield
    finally:
        _waits.reset(token)
        for queue, context in waits:
            if context.pool_waiting:
                queue._ended(context)


class PoolQueue:
    """The queue for one pool's connections.

    Args:
        name: what the log lines call the pool (the provider's name, else its URL).
        max_connections: the pool's size, for the log lines.

    Attributes:
        waiting: requests waiting for a connection now.
        queued: requests that waited, in all.
        longest_secs: the longest wait of the current (or last) queue, in seconds.
    """

    def __init__(self, name: str, max_connections: int) -> None:
        self.name = name
        self.max_connections = max_connections
        self.waiting = 0
        self.queued = 0
        self.longest_secs = 0.0
        self._in_queue = 0  # requests that waited since the queue formed

    def trace(self, trace: aiohttp.TraceConfig) -> None:
        """Count through ``trace``'s queue events (the session's trace configuration)."""
        trace.on_connection_queued_start.append(self._start)
        trace.on_connection_queued_end.append(self._end)

    async def _start(
        self, session: aiohttp.ClientSession, context: SimpleNamespace, params: object
    ) -> None:
        context.queued_at = time.monotonic()
        context.pool_waiting = True
        waits = _waits.get()
        if waits is not None:
            waits.append((self, context))
        if self.waiting == 0:
            self._in_queue, self.longest_secs = 0, 0.0
            log.warning(
                "provider %s: all %d connections of its pool are in use; requests wait for "
                "one (raise its max_connections to serve more at once)",
                self.name,
                self.max_connections,
            )
        self.waiting += 1
        self.queued += 1
        self._in_queue += 1

    async def _end(
        self, session: aiohttp.ClientSession, context: SimpleNamespace, params: object
    ) -> None:
        if getattr(context, "pool_waiting", False):
            self._ended(context)

    def _ended(self, context: SimpleNamespace) -> None:
        """The wait of ``context`` is over (a connection came, or its request gave up)."""
        context.pool_waiting = False
        self.waiting -= 1
        waited = time.monotonic() - context.queued_at
        self.longest_secs = max(self.longest_secs, waited)
        if self.waiting == 0:
            log.info(
                "provider %s: its pool's queue drained: %d requests waited, the longest %.2f s",
                self.name,
                self._in_queue,
                self.longest_secs,
            )
