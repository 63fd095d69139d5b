"""How long a stream's reads may wait for more data: the consumer's word to the socket.

A streamed answer's text is shown by throttled writes (architecture §3 "Spacing"): text that
arrives while no write could start is only held until the next one may. The turn says so for
the stream it iterates by setting :data:`READS_MAY_WAIT_UNTIL` in its context (a function
giving that time on the event loop's clock, ``-inf`` for "now"); a streamed body
(:class:`providers.transport.BodyStream`) then starts its next read no earlier than that time
less :data:`HOLD_MARGIN_SECS`, waiting at most :data:`MAX_HOLD_SECS`, and the read returns
everything that arrived meanwhile: one wakeup of the whole read path for many events instead of
one per event. The wait is not a read: the idle bound (architecture §2 "Timeouts") does not run
during it. Unset (the default), reads start at once.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["HOLD_MARGIN_SECS", "MAX_HOLD_SECS", "READS_MAY_WAIT_UNTIL"]

MAX_HOLD_SECS = 0.25
"""The longest a read with data waits for more (so the end of a stream, a tool call among it,
is seen at most this much later)."""

HOLD_MARGIN_SECS = 0.02
"""A read's wait ends this long before the consumer's time, so that what arrived is decoded and
waiting for the write when it starts (within this margin a read returns at once)."""

READS_MAY_WAIT_UNTIL: ContextVar[Callable[[], float] | None] = ContextVar(
    "reads_may_wait_until", default=None
)
"""The time (event loop clock, seconds) before which the reading task has no use for more data;
``None``: reads return at once."""
