"""Everything one reply's delivery knows, and the engine's decisions on it (architecture §3).

Theory of operation
-------------------
:class:`ReplyState` is one immutable value, the one home of a reply's delivery state: whether the
answer is over or the chat unreachable, the write in flight, the verdict awaited, the running
totals, the times that space the writes (the last write and send *completed*, a flood wait, a
back-off, the last typing), in monotonic seconds, and the mode's planner's state: in ``partial``
:class:`~orchestrator.delivery.draft_state.Drafts` (the layout, the slots, the write it planned), in
``off`` and ``multi_message`` :class:`~orchestrator.delivery.queue_state.Queue` (the messages to
send, the cursor, the status messages). Every decision on it is a pure function: :func:`transition`
takes the state, an event and the time and returns a :class:`Step` — the new state, whether the
mode's planner hears the event, and which counters grow — by one table, :data:`TRANSITIONS`; the
planner's own steps are pure functions in its table
(:data:`orchestrator.delivery.drafts.TRANSITIONS`,
:data:`orchestrator.delivery.pieces.TRANSITIONS`); the queries (:func:`write_at`, :func:`typing_at`,
the planner's ``next_kind``) only read. The engine
(:class:`~orchestrator.delivery.engine.DeliveryEngine`) holds the current value, applies each step
and stores the planner's new value in it. (The reply's text itself is the transcript's,
:class:`~orchestrator.delivery.planning.Transcript`, appended per delta; the state holds offsets
into it.)

Transition table (``now``: the time the event is fed)::

    event                 new state                                    planner   counters
    --------------------  -------------------------------------------  --------  ----------------
    WriteSucceeded(id)    nothing in flight; last write (and send) now hears it  messages_created
                                                                                 (a send with id)
    WriteFailed(rate_     nothing in flight; last write now; writes    hears it  rate_limited
      limited, ra)        blocked until now + ra (else the interval)
    WriteFailed(          nothing in flight; last write now;           -         unreachable
      unreachable)        unreachable
    WriteFailed(r)        nothing in flight; last write now; then      hears it
                          backed off until now + what the planner
                          asks (:func:`backed_off`)
    PieceGuarded(i, t)    the verdict awaited is i: none awaited       hears it
    PieceWithheld(i)      (a verdict not awaited is ignored)           (awaited)
    WrittenElsewhere(s)   last write (and send, s) at least now        -
    TextEmitted, Tool-    (while the answer runs) unchanged            hears it
      Started, Tool-
      Finished, Round-
      Ended, Restarted
    AnswerEnded, Answer-  (while the answer runs) over                 hears it
      Interrupted,
      AnswerRefused

An outcome (``WriteSucceeded``, ``WriteFailed``) with nothing in flight, and any input after the
answer is over, raise :class:`DeliveryProtocolError`. Starting a write (:func:`started`), asking
for a verdict (:func:`guarding`), typing (:func:`typed`) and finding the chat gone otherwise
(:func:`gone`) are the engine's own steps, pure too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from orchestrator.delivery.draft_state import Drafts
from orchestrator.delivery.events import (
    AnswerEnded,
    AnswerInterrupted,
    AnswerRefused,
    DeliveryEvent,
    PieceGuarded,
    PieceWithheld,
    Restarted,
    RoundEnded,
    TextEmitted,
    ToolFinished,
    ToolStarted,
    WriteFailed,
    WriteSucceeded,
    WrittenElsewhere,
)
from orchestrator.delivery.planning import NO_COUNTS, Write, WriteKind, counted
from orchestrator.delivery.queue_state import Queue
from orchestrator.delivery.settings import DeliverySettings

__all__ = [
    "TRANSITIONS",
    "DeliveryProtocolError",
    "ReplyState",
    "Step",
    "backed_off",
    "gone",
    "guarding",
    "started",
    "transition",
    "typed",
    "typing_at",
    "with_counts",
    "with_drafts",
    "with_queue",
    "write_at",
]


class DeliveryProtocolError(RuntimeError):
    """The caller broke the protocol: input after the answer ended, or an outcome with no write
    in flight."""


class ReplyState(NamedTuple):
    """Everything the delivery of one reply knows (see the module docstring); times in monotonic
    seconds. Immutable (a ``NamedTuple``: a delta's step builds one, and a tuple is the cheapest
    record to build).

    Attributes:
        over: the answer ended, was interrupted or refused.
        unreachable: a write (or typing) found the chat or thread gone.
        in_flight: the write started and not yet answered.
        guarding: the piece whose verdict is awaited.
        last_write_at: when the last write completed (its outcome was fed).
        last_send_at: when the last send completed.
        blocked_until: a flood wait (``-inf``: none).
        backoff_until: a back-off after a refused write (``-inf``: none).
        last_typing_at: when typing was last sent.
        counts: the running totals, in the order of
            :data:`~orchestrator.delivery.planning.COUNTER_NAMES` (``as_stats`` reads them).
        queue: ``off`` and ``multi_message``: the planner's state (the messages to send, the
            cursor, the status messages: :mod:`~orchestrator.delivery.pieces`); else ``None``.
        drafts: ``partial`` mode: the planner's state (layout, slots, the write it planned,
            the verdict it awaits: :mod:`~orchestrator.delivery.drafts`); else ``None``.
    """

    over: bool = False
    unreachable: bool = False
    in_flight: Write | None = None
    guarding: int | None = None
    last_write_at: float | None = None
    last_send_at: float | None = None
    blocked_until: float = -math.inf
    backoff_until: float = -math.inf
    last_typing_at: float | None = None
    counts: tuple[int, ...] = NO_COUNTS
    queue: Queue | None = None
    drafts: Drafts | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """What one event does: the new state, whether the planner hears the event, and the names
    of the :class:`~orchestrator.delivery.planning.DeliveryStats` counters that grow by one."""

    state: ReplyState
    tell: bool = False
    count: tuple[str, ...] = ()


# -- the table ------------------------------------------------------------------------------


def _completed(state: ReplyState, now: float) -> ReplyState:
    write = state.in_flight
    if write is None:
        raise DeliveryProtocolError("a write outcome arrived with no write in flight")
    last_send = now if write.kind == "send" else state.last_send_at
    return state._replace(in_flight=None, last_write_at=now, last_send_at=last_send)


def _write_succeeded(
    state: ReplyState, event: WriteSucceeded, now: float, settings: DeliverySettings
) -> Step:
    sent = state.in_flight is not None and state.in_flight.kind == "send"
    created = ("messages_created",) if sent and event.message_id is not None else ()
    return Step(_completed(state, now), tell=True, count=created)


def _write_failed(
    state: ReplyState, event: WriteFailed, now: float, settings: DeliverySettings
) -> Step:
    done = _completed(state, now)
    match event.reason:
        case "rate_limited":
            wait = settings.interval if event.retry_after is None else event.retry_after
            blocked = max(done.blocked_until, now + wait)
            return Step(done._replace(blocked_until=blocked), tell=True, count=("rate_limited",))
        case "unreachable":
            return Step(done._replace(unreachable=True), count=("unreachable",))
        case _:  # the planner decides, and asks for a back-off (backed_off); "not_modified"
            return Step(done, tell=True)  # on an edit is success, without an edit made


def _verdict(
    state: ReplyState, event: PieceGuarded | PieceWithheld, now: float, settings: DeliverySettings
) -> Step:
    if event.piece_id != state.guarding:
        return Step(state)  # not awaited (it timed out, or was dropped): ignored
    return Step(state._replace(guarding=None), tell=True)


def _written_elsewhere(
    state: ReplyState, event: WrittenElsewhere, now: float, settings: DeliverySettings
) -> Step:
    last_write = max(state.last_write_at or now, now)
    last_send = max(state.last_send_at or now, now) if event.sent else state.last_send_at
    return Step(state._replace(last_write_at=last_write, last_send_at=last_send))


def _answer_input(
    state: ReplyState, event: DeliveryEvent, now: float, settings: DeliverySettings
) -> Step:
    if state.over:
        raise DeliveryProtocolError(f"{type(event).__name__} after the answer ended")
    return Step(state, tell=True)


def _answer_over(
    state: ReplyState, event: DeliveryEvent, now: float, settings: DeliverySettings
) -> Step:
    if state.over:
        raise DeliveryProtocolError(f"{type(event).__name__} after the answer ended")
    return Step(state._replace(over=True), tell=True)


TRANSITIONS: dict[type[Any], Callable[[ReplyState, Any, float, DeliverySettings], Step]] = {
    WriteSucceeded: _write_succeeded,
    WriteFailed: _write_failed,
    PieceGuarded: _verdict,
    PieceWithheld: _verdict,
    WrittenElsewhere: _written_elsewhere,
    TextEmitted: _answer_input,
    ToolStarted: _answer_input,
    ToolFinished: _answer_input,
    RoundEnded: _answer_input,
    Restarted: _answer_input,
    AnswerEnded: _answer_over,
    AnswerInterrupted: _answer_over,
    AnswerRefused: _answer_over,
}
"""Each event's transition (the module docstring's table)."""


def transition(
    state: ReplyState, event: DeliveryEvent, now: float, settings: DeliverySettings
) -> Step:
    """The step ``event`` fed at ``now`` takes from ``state`` (:data:`TRANSITIONS`).

    Raises:
        DeliveryProtocolError: an outcome with nothing in flight, input after the end.
    """
    return TRANSITIONS[type(event)](state, event, now, settings)


# -- the engine's own steps -----------------------------------------------------------------


def with_drafts(state: ReplyState, drafts: Drafts) -> ReplyState:
    """``state`` with the planner's new value (its last field): nearly every input's step, built
    without the checks of ``_replace`` (which costs three times as much)."""
    return tuple.__new__(ReplyState, (*state[:-1], drafts))


def with_queue(state: ReplyState, queue: Queue) -> ReplyState:
    """``state`` with the queue planner's new value (built as :func:`with_drafts` is)."""
    return tuple.__new__(ReplyState, (*state[:-2], queue, state[-1]))


def backed_off(state: ReplyState, now: float, seconds: float) -> ReplyState:
    """No write before ``now + seconds`` (a refused write's back-off, as its planner asks)."""
    return state._replace(backoff_until=max(state.backoff_until, now + seconds))


def started(state: ReplyState, write: Write) -> ReplyState:
    """``write`` in flight, counted (``writes_sent``, and ``edits_sent`` / ``deletes_sent``)."""
    kind = write.kind
    names = ("writes_sent",) if kind == "send" else ("writes_sent", f"{kind}s_sent")
    return state._replace(in_flight=write, counts=counted(state.counts, names))


def with_counts(state: ReplyState, names: tuple[str, ...]) -> ReplyState:
    """``state`` with the counters named in ``names`` one more each."""
    return state._replace(counts=counted(state.counts, names)) if names else state


def guarding(state: ReplyState, piece_id: int) -> ReplyState:
    return state._replace(guarding=piece_id)


def typed(state: ReplyState, now: float) -> ReplyState:
    return state._replace(last_typing_at=now)


def gone(state: ReplyState) -> ReplyState:
    """The chat found gone other than by a write (counted as ``unreachable``)."""
    return state._replace(unreachable=True, counts=counted(state.counts, ("unreachable",)))


# -- queries --------------------------------------------------------------------------------


def write_at(state: ReplyState, kind: WriteKind, settings: DeliverySettings) -> float:
    """The earliest monotonic time a write of ``kind`` may start: the spacing after the last
    write (and, for a send, the last send), a flood wait, a back-off."""
    # Comparisons rather than max(): the engine asks on most polls.
    at, backoff = state.blocked_until, state.backoff_until
    if backoff > at:
        at = backoff
    last = state.last_write_at
    if last is not None and last + settings.interval > at:
        at = last + settings.interval
    last = state.last_send_at
    if kind == "send" and last is not None and last + settings.send_delay > at:
        at = last + settings.send_delay
    return at


def typing_at(state: ReplyState, now: float, settings: DeliverySettings) -> float:
    """Typing is due at once before anything was shown, then ``typing_interval`` after the
    later of the last typing and the last write (both show the user something)."""
    typed, wrote = state.last_typing_at, state.last_write_at
    if typed is None or (wrote is not None and wrote > typed):
        typed = wrote
    due = now if typed is None else typed + settings.typing_interval
    blocked = state.blocked_until
    return blocked if blocked > due else due
