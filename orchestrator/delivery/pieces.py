"""The ``off`` and ``multi_message`` planner: a queue of finished messages, sent in order.

Theory of operation
-------------------
Each message is sent once, formatted, and stands; only a tool's status message is edited, once,
to its finished line.

``multi_message`` cuts *pieces* from the reply's visible text as they complete, at a cursor that
only moves forward (except on ``Restart``):

- unit ``paragraph`` (Matrix, Discord): a piece ends at a blank line outside code fences;
- unit ``turn`` (Telegram): a piece is a whole model turn, cut when the round ends
  (*flush_draft_turn*) and at the end of the answer;
- both: the rest of a turn is flushed when the round ends (so narration reaches the chat before
  the tool status or an approval prompt), and a piece that outgrows the limit is cut at the best
  boundary (:func:`~orchestrator.delivery.splitting.find_cut`) without waiting for its end.

Blank lines between pieces and trailing whitespace are not sent: the chat shows the text's
pieces in order, and only whitespace lies between them. A queued piece goes through
``guard_piece`` exactly once, when it reaches the head of the queue (so a piece dropped by a
restart is never guarded): the planner asks for its verdict (``GuardPiece``, with the piece's
span in the emitted text, :meth:`~orchestrator.delivery.planning.Transcript.emitted_offset`) and
sends nothing behind it until the verdict comes back (the order stands). The hook's output is
split again at the limit; a piece whose hook failed (``PieceWithheld``) is replaced by the
withheld notice. Tool statuses (``show_tool_status``), the restart notice and the interrupted
marker are queued as their own plain messages. A message goes out formatted when the channel's
renderer says its formatted form fits, else plain.

Tool status (``multi_message`` with ``show_tool_status``, architecture §3 "Tool status"): each
call's ``⏳`` line is its own message; when the call finishes that message is edited to the
finished line (``✓ name 0.4 s``, ``✗ name: cause``) by
:mod:`~orchestrator.delivery.status_messages`. A line still queued is sent in
its finished form instead. Edits go before the next send (each spaced like any write).

``Restart``: queued pieces of the failed attempt are dropped; pieces already sent stand; when one
was sent (or in flight), ``(answer restarted)`` is queued before the next message.

``off`` queues nothing until the end; then the whole text goes through the hook once and is
split at the limit; the interrupted marker follows the last part after a blank line, or comes
as a message of its own when it does not fit there (it is never split).

Failures, by :data:`~orchestrator.delivery.planning.FAILURE_EFFECTS`: a send that timed out is
assumed to have landed (re-sending could duplicate it); one refused outright (5xx, connection
refused) is retried after ``REFUSED_BACKOFF_SECS``, up to ``MAX_ATTEMPTS`` tries; ``too_long``
splits that message again with a quarter less room; a rejected formatted message is retried once
plain, then given up; a rate limit keeps it at the head of the queue, and so does a moved chat
(the message goes to the new chat).

The text before the cursor is settled in the transcript (by the engine, after each step):
cutting costs the length of the text not yet sent (under a message), whatever the length of the
answer; a delta that completes nothing reads no text and changes no record (the transcript keeps
the whole text's measure, the queue the measure before its cursor).

State and steps: everything the planner knows of one reply is one immutable
:class:`~orchestrator.delivery.queue_state.Queue` (in the engine's
:class:`~orchestrator.delivery.reply_state.ReplyState`); each input is a pure function from it and
the input to a :class:`~orchestrator.delivery.queue_state.QueueStep` (new value, counters, a
back-off) in one table, :data:`TRANSITIONS`; :func:`next_kind` and :func:`guard_request` only
read; :func:`plan` and :func:`guard_started` return a new value. ``text``: the transcript, read.

Transition table::

    input                     what it does to the value
    ------------------------  ----------------------------------------------------------------
    TextEmitted(appended)     multi_message: the pieces completed are queued, the cursor moves
    ToolStarted(c, s)         multi_message + show_tool_status: c's line queued as a message
    ToolFinished(c, s)        c's line still queued: it goes out finished; else its message's
                              edit is due (``status_messages``)
    RoundEnded                multi_message: the turn flushed; then a new attempt
    Restarted                 (above); the cursor back within the text; then a new attempt
    Ending(refused)           queued pieces dropped; the notice queued
    Ending(ended|inter-       multi_message: the rest flushed (the marker, or a due notice,
      rupted)                 queued); off: the whole text queued raw, the marker as its line
    PieceGuarded(i, t)        the raw piece i replaced by t split at the room (its line after)
    PieceWithheld(i)          the raw piece i replaced by the withheld notice
    WriteSucceeded(id)        the item sent leaves the queue (a status line's id kept)
    WriteFailed(r)            rate_limited: the head stays; else by ``FAILURE_EFFECTS`` (above)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.delivery import status_messages as statuses
from orchestrator.delivery.events import (
    GuardPiece,
    PieceGuarded,
    PieceWithheld,
    Restarted,
    RoundEnded,
    SendMessage,
    TextEmitted,
    ToolFinished,
    ToolStarted,
    WriteFailed,
    WriteSucceeded,
)
from orchestrator.delivery.planning import (
    FAILURE_EFFECTS,
    MAX_ATTEMPTS,
    REFUSED_BACKOFF_SECS,
    WITHHELD_NOTICE,
    Effect,
    Ending,
    Transcript,
    Write,
    WriteKind,
    clip_line,
    fit_rendering,
)
from orchestrator.delivery.queue_state import (
    Item,
    Queue,
    QueueStep,
    queue_message,
    queue_notice,
    queue_split,
    shrink,
    with_item,
    without_item,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import Fence, find_cut, measure, opening_fence, render_chunk
from orchestrator.delivery.status_messages import StatusEdit

__all__ = [
    "TRANSITIONS",
    "guard_request",
    "guard_started",
    "hear",
    "next_kind",
    "on_text",
    "paragraph_end",
    "plan",
]


def paragraph_end(text: str, start: int, fence: Fence | None) -> tuple[int, int] | None:
    """The first completed paragraph of ``text[start:]``.

    A paragraph ends at a blank line (empty or spaces only, its newline received) outside a code
    fence, after some content. ``fence`` is the fence open at ``start``.

    Returns:
        ``(content_end, next_start)``: the paragraph is ``text[start:content_end]`` (without its
        last newline); the next one starts after the blank line. ``None`` while incomplete.
    """
    pos, content_end = start, None
    while True:
        newline = text.find("\n", pos)
        if newline < 0:
            return None
        line = text[pos:newline]
        if fence is not None:
            if fence.closes(line):
                fence = None
            content_end = newline
        elif line.strip():
            fence = opening_fence(line)
            content_end = newline
        elif content_end is not None:
            return content_end, newline + 1
        pos = newline + 1


def _skip_blank_lines(text: str, pos: int) -> int:
    while True:
        newline = text.find("\n", pos)
        if newline < 0 or text[pos:newline].strip():
            return pos
        pos = newline + 1


# -- cutting pieces ---------------------------------------------------------------------------


def _span(queue: Queue, text: Transcript, length: int) -> tuple[int, int]:
    """The ``length`` code points at the cursor, as offsets into the emitted text."""
    emitted = text.emitted_offset
    return emitted(queue.cursor), emitted(queue.cursor + length)


def _advance(
    queue: Queue, live: str, count: int, fence: Fence | None, s: DeliverySettings
) -> Queue:
    """The cursor ``count`` code points on; ``live`` is the text from the cursor."""
    units = queue.cursor_units + measure(s.limits, live[:count])
    return queue._replace(cursor=queue.cursor + count, cursor_units=units, fence=fence)


def _queue_piece(queue: Queue, live: str, end: int, text: Transcript, s: DeliverySettings) -> Queue:
    """``live[:end]`` (trailing whitespace dropped) queued, and the cursor past it."""
    stop = len(live[:end].rstrip())
    if stop > 0:
        body, _ = render_chunk(live, 0, stop, queue.fence)
        span = _span(queue, text, stop)
        queue = queue_message(queue, body, formatted=True, piece=True, raw=True, span=span)
    return _advance(queue, live, end, None, s)


def _fits(queue: Queue, text: Transcript, s: DeliverySettings) -> bool:
    """The unsent text, its fence reopened, fits in one message (no text is read)."""
    prefix = measure(s.limits, queue.fence.reopen) if queue.fence else 0
    return prefix + text.units - queue.cursor_units <= queue.max


def _cut(
    queue: Queue, text: Transcript, s: DeliverySettings, *, flush: bool, appended: str = "\n"
) -> Queue:
    """What is complete, cut. ``appended``: the text just added; a paragraph can only have
    completed when it holds a newline, so without one nothing is read unless it overflows."""
    by_paragraph = s.multi_message_unit == "paragraph"
    while True:
        if not flush and _fits(queue, text, s) and not (by_paragraph and "\n" in appended):
            return queue
        live = text.tail(queue.cursor)
        if queue.fence is None:
            skip = _skip_blank_lines(live, 0)
            if skip:
                queue = _advance(queue, live, skip, None, s)
                live = live[skip:]
        if by_paragraph:
            found = paragraph_end(live, 0, queue.fence)
            if found is not None:
                queue = _queue_piece(queue, live, found[0], text, s)
                live = live[found[0] :]
                queue = _advance(queue, live, found[1] - found[0], None, s)
                continue
        if not _fits(queue, text, s):
            chunk = find_cut(s.limits, live, 0, len(live), queue.fence, queue.max)
            body, fence = render_chunk(live, 0, chunk.cut, queue.fence)
            span = _span(queue, text, len(live[: chunk.cut].rstrip()))
            body = body.rstrip()
            queue = queue_message(queue, body, formatted=True, piece=True, raw=True, span=span)
            queue = _advance(queue, live, chunk.cut, fence, s)
            continue
        if flush:
            queue = _queue_piece(queue, live, len(live), text, s)
        return queue


# -- the answer -------------------------------------------------------------------------------


def on_text(queue: Queue, appended: str, text: Transcript, s: DeliverySettings) -> Queue:
    """``appended`` was added to the transcript (nearly every input: called directly). Returns
    ``queue`` itself when nothing completed."""
    if s.mode != "multi_message":
        return queue
    if queue.fence is None and text.units - queue.cursor_units <= queue.max:
        if s.multi_message_unit != "paragraph" or "\n" not in appended:
            return queue  # it fits and completes no paragraph (what _cut checks first)
    return _cut(queue, text, s, flush=False, appended=appended)


def _text(queue: Queue, event: TextEmitted, text: Transcript, s: DeliverySettings) -> QueueStep:
    return QueueStep(on_text(queue, event.text, text, s))


def _shows_status(s: DeliverySettings) -> bool:
    return s.mode == "multi_message" and s.show_tool_status


def _status(queue: Queue, event: ToolStarted, text: Transcript, s: DeliverySettings) -> QueueStep:
    if not _shows_status(s):
        return QueueStep(queue)
    line = clip_line(s.limits, event.status, queue.max)
    return QueueStep(
        queue_message(queue, line, formatted=False, piece=False, raw=False, call=event.call)
    )


def _status_finished(
    queue: Queue, event: ToolFinished, text: Transcript, s: DeliverySettings
) -> QueueStep:
    if not _shows_status(s):
        return QueueStep(queue)
    line = clip_line(s.limits, event.status, queue.max)
    queued = next((item for item in queue.items if item.call == event.call), None)
    flight = queue.in_flight
    sending = isinstance(flight, Item) and queued is not None and flight.key == queued.key
    if queued is not None and not sending:
        return QueueStep(with_item(queue, queued._replace(text=line)))  # it goes out finished
    status = statuses.finish(
        queue.status, event.call, line, sending=queued is not None, can_edit=s.can_edit
    )
    return QueueStep(queue._replace(status=status))


def _round_ended(
    queue: Queue, event: RoundEnded, text: Transcript, s: DeliverySettings
) -> QueueStep:
    if s.mode == "multi_message":
        queue = _cut(queue, text, s, flush=True)
    return QueueStep(queue._replace(attempt=queue.attempt + 1))  # the next round: a new attempt


def _restarted(queue: Queue, event: Restarted, text: Transcript, s: DeliverySettings) -> QueueStep:
    current = queue.attempt
    items = tuple(item for item in queue.items if not (item.piece and item.attempt == current))
    cursor, fence = queue.cursor, queue.fence
    if cursor > text.length:
        cursor, fence = text.length, None
    units = text.units - measure(s.limits, text.tail(cursor))
    notice_due = queue.notice_due or current in queue.sent_attempts
    return QueueStep(
        queue._replace(
            items=items,
            notice_due=notice_due,
            attempt=current + 1,
            cursor=cursor,
            cursor_units=units,
            fence=fence,
        )
    )


def _ended(queue: Queue, ending: Ending, text: Transcript, s: DeliverySettings) -> QueueStep:
    if ending.kind == "refused":
        queue = queue._replace(items=tuple(i for i in queue.items if not i.piece), notice_due=False)
        line = clip_line(s.limits, ending.line, queue.max)
        return QueueStep(queue_message(queue, line, formatted=False, piece=False, raw=False))
    if s.mode == "multi_message":
        queue = _cut(queue, text, s, flush=True)
        if ending.kind == "interrupted":
            line = clip_line(s.limits, ending.line, queue.max)
            queue = queue_message(queue, line, formatted=False, piece=False, raw=False)
        elif queue.notice_due:  # the failed attempt showed something and nothing followed
            queue = queue_notice(queue)
        return QueueStep(queue)
    body = text.text
    line = clip_line(s.limits, ending.line, queue.max) if ending.line else ""
    if body.strip():
        span = (0, text.emitted_offset(len(body)))
        return QueueStep(
            queue_message(queue, body, formatted=True, piece=True, raw=True, span=span, line=line)
        )
    if line:
        at = len(queue.items)
        queue = queue_split(queue, "", line, s, formatted=True, attempt=queue.attempt, at=at)
    return QueueStep(queue)


# -- the verdicts -----------------------------------------------------------------------------


def guard_request(queue: Queue) -> GuardPiece | None:
    """The verdict to ask for now: the head's, when it is raw and not asked yet (a query)."""
    head = queue.items[0] if queue.items else None
    if head is None or not head.raw or head.asked:
        return None
    return GuardPiece(head.piece_id, head.text, head.span)


def guard_started(queue: Queue, piece_id: int) -> Queue:
    """The verdict on ``piece_id`` was asked for."""
    items = tuple(
        item._replace(asked=True) if item.piece_id == piece_id else item for item in queue.items
    )
    return queue._replace(items=items)


def _guarded(
    queue: Queue, event: PieceGuarded | PieceWithheld, text: Transcript, s: DeliverySettings
) -> QueueStep:
    index = next(
        (i for i, it in enumerate(queue.items) if it.raw and it.piece_id == event.piece_id), -1
    )
    if index < 0:
        return QueueStep(queue)  # dropped by a restart, or a late verdict: ignored
    item = queue.items[index]
    queue = without_item(queue, item.key)
    body = WITHHELD_NOTICE if isinstance(event, PieceWithheld) else event.text
    if body is None or not body.strip():
        if not item.line:
            return QueueStep(queue)
        body = ""
    formatted = not isinstance(event, PieceWithheld)
    queue = queue_split(
        queue, body, item.line, s, formatted=formatted, attempt=item.attempt, at=index
    )
    return QueueStep(queue, ("pieces_withheld",) if not formatted else ())


# -- writes -----------------------------------------------------------------------------------


def next_kind(queue: Queue) -> WriteKind | None:
    """The kind of the next write (a query)."""
    if queue.status.edits:
        return "edit"
    return "send" if queue.items and not queue.items[0].raw else None


def plan(queue: Queue, s: DeliverySettings) -> tuple[Queue, Write | None]:
    """The next write, and the value with it in flight (a command): a status edit due first,
    else the head of the queue (nothing while the head awaits its verdict)."""
    if queue.status.edits:
        edit = queue.status.edits[0]
        return queue._replace(in_flight=edit), statuses.edit_write(edit)
    if not queue.items or queue.items[0].raw:
        return queue, None  # the head awaits its verdict: nothing behind it goes first
    item = queue.items[0]
    sent = queue.sent_attempts
    if item.piece and item.attempt not in sent:
        sent = sent | {item.attempt}
    message, formatted = item.message, item.formatted and not item.plain
    if formatted:
        formatted, _ = fit_rendering(s.rendering(message), message, queue.max)
    queue = queue._replace(in_flight=item, sent_attempts=sent)
    return queue, Write(SendMessage(message, formatted), final=True)


def _take(queue: Queue) -> tuple[Queue, Item | StatusEdit]:
    flight = queue.in_flight
    assert flight is not None, "an outcome with no write in flight"
    return queue._replace(in_flight=None), flight


def _discard(queue: Queue, item: Item) -> Queue:
    if item.call is not None:
        queue = queue._replace(status=statuses.dropped(queue.status, item.call))
    return without_item(queue, item.key)


def _succeeded(
    queue: Queue, event: WriteSucceeded, text: Transcript, s: DeliverySettings
) -> QueueStep:
    queue, flight = _take(queue)
    if isinstance(flight, StatusEdit):
        return QueueStep(queue._replace(status=statuses.succeeded(queue.status, flight)))
    if flight.call is not None:
        status = statuses.sent(
            queue.status, flight.call, event.message_id, flight.text, can_edit=s.can_edit
        )
        queue = queue._replace(status=status)
    return QueueStep(_discard(queue, flight))


def _failed(queue: Queue, event: WriteFailed, text: Transcript, s: DeliverySettings) -> QueueStep:
    queue, flight = _take(queue)
    if event.reason == "rate_limited":
        return QueueStep(queue)  # it stays at the head of the queue (an edit stays due)
    if isinstance(flight, StatusEdit):
        status, count, backoff = statuses.failed(queue.status, flight, event.reason)
        return QueueStep(queue._replace(status=status), count, backoff)
    item = flight
    match FAILURE_EFFECTS[("send", event.reason)]:
        case Effect.UNCONFIRMED:  # it may have landed: never send a second copy
            return QueueStep(_discard(queue, item), ("unconfirmed_sends",))
        case Effect.SHRINK:
            shrunk = shrink(queue, item, s)
            if shrunk is not None:
                return QueueStep(shrunk)
        case Effect.RETRY:
            tries = item.tries + 1
            if tries < MAX_ATTEMPTS:
                queue = with_item(queue, item._replace(tries=tries))
                return QueueStep(queue, ("writes_refused",), REFUSED_BACKOFF_SECS[tries - 1])
            return QueueStep(_discard(queue, item), ("writes_refused", "writes_given_up"))
        case Effect.MOVED:
            return QueueStep(queue)  # it did not land: sent again, to the new chat, at once
        case Effect.PLAIN | Effect.SHOWN:
            if item.formatted and not item.plain:
                return QueueStep(with_item(queue, item._replace(plain=True)), ("plain_fallbacks",))
    return QueueStep(_discard(queue, item), ("writes_given_up",))


# -- the table --------------------------------------------------------------------------------

TRANSITIONS: dict[type[Any], Callable[[Queue, Any, Transcript, DeliverySettings], QueueStep]] = {
    TextEmitted: _text,
    ToolStarted: _status,
    ToolFinished: _status_finished,
    RoundEnded: _round_ended,
    Restarted: _restarted,
    Ending: _ended,
    PieceGuarded: _guarded,
    PieceWithheld: _guarded,
    WriteSucceeded: _succeeded,
    WriteFailed: _failed,
}
"""Each input's transition (the module docstring's table)."""


def hear(queue: Queue, event: Any, text: Transcript, settings: DeliverySettings) -> QueueStep:
    """The step ``event`` takes from ``queue`` (:data:`TRANSITIONS`); ``text`` is read only."""
    return TRANSITIONS[type(event)](queue, event, text, settings)
