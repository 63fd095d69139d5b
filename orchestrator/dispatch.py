"""One turn at a time per conversation; later messages queue (DESIGN §5).

Theory of operation
-------------------
Each conversation, keyed by (channel, chat), has a FIFO of waiting messages and at most one
worker task, owned by the daemon's task group. ``submit`` appends and starts the worker when none
runs; the worker drains the FIFO one turn at a time and exits when it is empty. ``close`` stops
taking messages; :meth:`wait_idle` returns when no turn runs.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from channels.base import Channel, InboundMessage

__all__ = ["Dispatcher"]

log = logging.getLogger(__name__)

TurnFunction = Callable[[Channel, InboundMessage], Awaitable[object]]
MAX_QUEUED_PER_CONVERSATION = 20


class Dispatcher:
    def __init__(self, task_group: TaskGroup, run_turn: TurnFunction) -> None:
        self._tg = task_group
        self._run_turn = run_turn
        self._queues: dict[tuple[str, str], deque[tuple[Channel, InboundMessage]]] = {}
        self._closed = False
        self._running = 0
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, channel: Channel, message: InboundMessage) -> bool:
        """Queue ``message``; False when closed or when the conversation's queue is full."""
        if self._closed:
            return False
        key = (channel.name, message.chat_id)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            self._start_worker(key, queue)
        if len(queue) >= MAX_QUEUED_PER_CONVERSATION:
            log.warning("conversation %s:%s: queue full, dropping a message", *key)
            return False
        queue.append((channel, message))
        return True

    def _start_worker(
        self, key: tuple[str, str], queue: deque[tuple[Channel, InboundMessage]]
    ) -> None:
        self._running += 1
        self._idle = anyio.Event()
        self._tg.start_soon(self._worker, key, queue)

    async def _worker(
        self, key: tuple[str, str], queue: deque[tuple[Channel, InboundMessage]]
    ) -> None:
        try:
            await anyio.lowlevel.checkpoint()
            while queue:
                channel, message = queue.popleft()
                try:
                    await self._run_turn(channel, message)
                except Exception:
                    log.exception("turn failed in %s:%s", *key)
        finally:
            del self._queues[key]
            self._running -= 1
            if self._running == 0:
                self._idle.set()

    def close(self) -> None:
        """Stop taking messages; queued ones that have not started are dropped."""
        self._closed = True
        for (channel, chat_id), queue in self._queues.items():
            if queue:
                log.warning(
                    "conversation %s:%s: %d queued message(s) not answered (shutting down)",
                    channel,
                    chat_id,
                    len(queue),
                )
            queue.clear()

    async def wait_idle(self) -> None:
        await self._idle.wait()
