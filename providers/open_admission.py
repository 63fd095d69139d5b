"""Stream opens admitted a batch per pass of the event loop (architecture §2 "Transport").

Opening a provider stream costs CPU in the event loop (the request built and sent, a connection
made, the headers parsed: 0.3 ms on loopback, more over TLS) before any of it reaches the chat.
When many replies begin at once (a restart that finds a backlog of messages, a broadcast answered
in many chats), every one of them opens its stream in the same pass of the loop, and the replies
already streaming — their reads and their writes — wait behind all of those openings: their
edits come late. And the streams then begin together, so their chats' writes keep coming due
together, once a draft interval, for as long as they last.

:class:`OpenAdmission` lets at most ``per_pass`` opens begin in one pass of the loop; the others
wait for the following passes, in order, so the loop runs what is due between batches, and a
burst's streams begin spread over the time their openings take. An open that finds room is
admitted without waiting at all (no pass of the loop is spent), so a bot that is not under a
burst never waits here. The waits are counted (:attr:`OpenAdmission.waiting`,
:attr:`OpenAdmission.deferred`, the metric ``relaybot_provider_opens_deferred_total``) and the
first of a burst is logged, with how many waited once it has passed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

__all__ = ["OPENS_PER_PASS", "OpenAdmission"]

log = logging.getLogger(__name__)

OPENS_PER_PASS = 4
"""Stream opens that may begin in one pass of the event loop (architecture §2 "Transport").
Measured (bench/scale, 1,000 and 1,200 replies begun at once, edit lag p99): 4 a pass kept it
lowest at the same TTFT; 2 a pass started them later, 8 to 32 left more lag behind the bursts."""


class OpenAdmission:
    """Admits at most ``per_pass`` opens in each pass of the running event loop, the others in
    the order they asked. An open that waited goes on in the pass after the one that admitted
    it, so one pass may see up to twice ``per_pass`` opens go on, never more.

    Args:
        name: what the log lines call it (the provider's name, else its URL).
        per_pass: admissions per pass of the loop (at least 1).

    Attributes:
        waiting: opens waiting for a later pass of the running loop now.
        deferred: opens that waited, in all.
    """

    def __init__(self, name: str, per_pass: int = OPENS_PER_PASS) -> None:
        if per_pass < 1:
            raise ValueError(f"per_pass must be at least 1, not {per_pass}")
        self.name = name
        self.waiting = 0
        self.deferred = 0
        self._per_pass = per_pass
        self._admitted = 0  # in the current pass
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the count is of
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._in_burst = 0  # opens that waited since the burst began

    async def admitted(self) -> None:
        """Return once this open may begin: at once while the current pass has room, else in
        a later pass (in the order the opens came). Cancellation while waiting leaves no trace.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a loop that ended may have left its pass's count open
            self._loop, self._admitted = loop, 0
            self._waiters.clear()  # a wait of another loop can never be resumed here
            self.waiting = self._in_burst = 0  # nor ever end in this loop's count
        if self._admitted < self._per_pass and not self._waiters:
            self._count_one()
            return
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        if self.waiting == 0:
            self._in_burst = 0
            log.info(
                "provider %s: more than %d streams opening at once; the rest open %d a pass "
                "of the event loop",
                self.name,
                self._per_pass,
                self._per_pass,
            )
        self.waiting += 1
        self.deferred += 1
        self._in_burst += 1
        try:
            await waiter
        finally:
            if self._loop is loop:  # a wait of a closed loop ended by its task's collection
                self.waiting -= 1
                if self.waiting == 0:
                    log.info("provider %s: %d stream opens waited", self.name, self._in_burst)

    def _count_one(self) -> None:
        if self._admitted == 0 and self._loop is not None:  # the first of this pass
            self._loop.call_soon(self._next_pass)
        self._admitted += 1

    def _next_pass(self) -> None:
        """A new pass of the loop: room for ``per_pass`` more, given to the waiters first."""
        self._admitted = 0
        waiters = self._waiters
        while waiters and self._admitted < self._per_pass:
            waiter = waiters.popleft()
            if not waiter.done():  # a cancelled wait takes no room
                waiter.set_result(None)
                self._count_one()
