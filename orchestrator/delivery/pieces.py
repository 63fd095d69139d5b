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
:class:`~orchestrator.delivery.status_messages.StatusMessages`. A line still queued is sent in
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

The text before the cursor is settled in the transcript: cutting costs the length of the text
not yet sent (under a message), whatever the length of the answer.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.delivery.events import GuardPiece, SendMessage, WriteFailure
from orchestrator.delivery.planning import (
    FAILURE_EFFECTS,
    MAX_ATTEMPTS,
    REFUSED_BACKOFF_SECS,
    RESTARTED_NOTICE,
    WITHHELD_NOTICE,
    Counters,
    Effect,
    Ending,
    Transcript,
    Write,
    WriteKind,
    append_line,
    clip_line,
    fit_rendering,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import (
    Fence,
    find_cut,
    measure,
    opening_fence,
    render_chunk,
    split_text,
)
from orchestrator.delivery.status_messages import StatusEdit, StatusMessages

__all__ = ["QueuePlanner", "paragraph_end"]

_MIN_ROOM = 16


@dataclass(eq=False, slots=True)
class _Item:
    """One message to send. ``raw`` pieces have not been through the hook yet (``asked``: its
    verdict was requested); ``line`` (the interrupted marker in ``off``) follows ``text`` after a
    blank line and is never split."""

    text: str
    formatted: bool
    attempt: int
    piece: bool
    raw: bool = False
    piece_id: int = 0
    asked: bool = False
    plain: bool = False
    tries: int = 0
    line: str = ""
    call: int | None = None
    """The tool call whose status line this is."""
    span: tuple[int, int] | None = None
    """A raw piece's place in the emitted text (``GuardPiece.span``)."""

    @property
    def message(self) -> str:
        return append_line(self.text, self.line) if self.line else self.text


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


def _as_is(text: str) -> str:
    return text


class QueuePlanner:
    """Plans the writes of ``off`` and ``multi_message`` modes (see the module docstring).

    Args:
        redact_line: redacts the notices it composes (the restart notice).
    """

    def __init__(
        self,
        settings: DeliverySettings,
        transcript: Transcript,
        counters: Counters,
        redact_line: Callable[[str], str] = _as_is,
    ) -> None:
        self._settings = settings
        self._limits = settings.limits
        self._redact_line = redact_line
        self._transcript = transcript
        self._counters = counters
        self._max = settings.limits.max_length
        self._streams = settings.mode == "multi_message"
        self._by_paragraph = settings.multi_message_unit == "paragraph"
        self._queue: deque[_Item] = deque()
        self._cursor = 0
        self._fence: Fence | None = None
        self._attempt = 0
        self._sent_attempts: set[int] = set()
        self._notice_due = False
        self._piece_ids = itertools.count(1)
        self._in_flight: _Item | StatusEdit | None = None
        self._status = StatusMessages(settings.can_edit, counters)
        self._live_units = 0
        """``measure`` of the text after the cursor, kept as it grows."""

    # -- cutting pieces -------------------------------------------------------------------

    def _queue_message(
        self,
        text: str,
        *,
        formatted: bool,
        piece: bool,
        raw: bool,
        call: int | None = None,
        span: tuple[int, int] | None = None,
    ) -> None:
        if not text.strip():
            return
        if self._notice_due:
            self._notice_due = False
            notice = self._redact_line(RESTARTED_NOTICE)
            self._queue.append(_Item(notice, False, self._attempt, piece=False))
        piece_id = next(self._piece_ids) if raw else 0
        self._queue.append(
            _Item(
                text,
                formatted,
                self._attempt,
                piece=piece,
                raw=raw,
                piece_id=piece_id,
                call=call,
                span=span,
            )
        )

    def _span(self, length: int) -> tuple[int, int]:
        """The ``length`` code points at the cursor, as offsets into the emitted text."""
        emitted = self._transcript.emitted_offset
        return emitted(self._cursor), emitted(self._cursor + length)

    def _advance(self, live: str, count: int, fence: Fence | None) -> None:
        """Move the cursor ``count`` code points on; ``live`` is the text from the cursor."""
        self._cursor += count
        self._fence = fence
        self._live_units -= measure(self._limits, live[:count])
        self._transcript.settle(self._cursor)

    def _queue_piece(self, live: str, end: int) -> None:
        """Queue ``live[:end]`` (trailing whitespace dropped) and move the cursor past it."""
        stop = len(live[:end].rstrip())
        if stop > 0:
            body, _ = render_chunk(live, 0, stop, self._fence)
            span = self._span(stop)
            self._queue_message(body, formatted=True, piece=True, raw=True, span=span)
        self._advance(live, end, None)

    def _fits(self) -> bool:
        """The unsent text, its fence reopened, fits in one message (no text is read)."""
        prefix = measure(self._limits, self._fence.reopen) if self._fence else 0
        return prefix + self._live_units <= self._max

    def _cut(self, *, flush: bool, appended: str = "\n") -> None:
        """Cut what is complete. ``appended``: the text just added; a paragraph can only have
        completed when it holds a newline, so without one nothing is read unless it overflows."""
        while True:
            if not flush and self._fits() and not (self._by_paragraph and "\n" in appended):
                return
            live = self._transcript.tail(self._cursor)
            if self._fence is None:
                skip = _skip_blank_lines(live, 0)
                if skip:
                    self._advance(live, skip, None)
                    live = live[skip:]
            if self._by_paragraph:
                found = paragraph_end(live, 0, self._fence)
                if found is not None:
                    self._queue_piece(live, found[0])
                    live = live[found[0] :]
                    self._advance(live, found[1] - found[0], None)
                    continue
            if not self._fits():
                chunk = find_cut(self._limits, live, 0, len(live), self._fence, self._max)
                body, fence = render_chunk(live, 0, chunk.cut, self._fence)
                span = self._span(len(live[: chunk.cut].rstrip()))
                self._queue_message(body.rstrip(), formatted=True, piece=True, raw=True, span=span)
                self._advance(live, chunk.cut, fence)
                continue
            if flush:
                self._queue_piece(live, len(live))
            return

    # -- events ---------------------------------------------------------------------------

    def on_text(self, appended: str) -> None:
        self._live_units += measure(self._limits, appended)
        if self._streams:
            self._cut(flush=False, appended=appended)

    def on_status(self, call: int, status: str) -> None:
        if self._streams and self._settings.show_tool_status:
            line = clip_line(self._limits, status, self._max)
            self._queue_message(line, formatted=False, piece=False, raw=False, call=call)

    def on_status_finished(self, call: int, status: str) -> None:
        if not (self._streams and self._settings.show_tool_status):
            return
        line = clip_line(self._limits, status, self._max)
        queued = next((item for item in self._queue if item.call == call), None)
        if queued is not None and queued is not self._in_flight:
            queued.text = line  # not sent yet: it goes out finished
        else:
            self._status.finish(call, line, sending=queued is not None)

    def on_round_ended(self) -> None:
        if self._streams:
            self._cut(flush=True)
        self._attempt += 1  # the next round is a new attempt too

    def on_restarted(self) -> None:
        current = self._attempt
        self._queue = deque(
            item for item in self._queue if not (item.piece and item.attempt == current)
        )
        if current in self._sent_attempts:
            self._notice_due = True
        self._attempt += 1
        if self._cursor > self._transcript.length:
            self._cursor, self._fence = self._transcript.length, None
        self._live_units = measure(self._limits, self._transcript.tail(self._cursor))
        self._transcript.settle(self._cursor)

    def on_end(self, ending: Ending) -> None:
        if ending.kind == "refused":
            self._queue = deque(item for item in self._queue if not item.piece)
            self._notice_due = False
            line = clip_line(self._limits, ending.line, self._max)
            self._queue_message(line, formatted=False, piece=False, raw=False)
            return
        if self._streams:
            self._cut(flush=True)
            if ending.kind == "interrupted":
                line = clip_line(self._limits, ending.line, self._max)
                self._queue_message(line, formatted=False, piece=False, raw=False)
            elif self._notice_due:
                # The failed attempt showed something and nothing followed: still say so.
                self._notice_due = False
                notice = self._redact_line(RESTARTED_NOTICE)
                self._queue.append(_Item(notice, False, self._attempt, piece=False))
            return
        text = self._transcript.text
        line = clip_line(self._limits, ending.line, self._max) if ending.line else ""
        if text.strip():
            span = (0, self._transcript.emitted_offset(len(text)))
            item = _Item(text, True, self._attempt, piece=True, raw=True, line=line, span=span)
            item.piece_id = next(self._piece_ids)
            self._queue.append(item)
        elif line:
            self._queue_split("", line, formatted=True, attempt=self._attempt, at=len(self._queue))

    def _queue_split(
        self, body: str, line: str, *, formatted: bool, attempt: int, at: int, piece: bool = True
    ) -> None:
        """Queue ``body`` split at the limit, at position ``at``; ``line`` goes after the last
        part when it fits there, else in a message of its own."""
        items = [
            _Item(chunk, formatted, attempt, piece=piece)
            for chunk in split_text(self._limits, body, self._max)
        ]
        if line:
            last = items[-1] if items else None
            if (
                last is not None
                and measure(self._limits, append_line(last.text, line)) <= self._max
            ):
                last.line = line
            else:
                items.append(_Item(line, formatted, attempt, piece=piece))
        for item in reversed(items):
            self._queue.insert(at, item)

    # -- the verdicts ---------------------------------------------------------------------

    def guard_request(self) -> GuardPiece | None:
        head = self._queue[0] if self._queue else None
        if head is None or not head.raw or head.asked:
            return None
        return GuardPiece(head.piece_id, head.text, head.span)

    def guard_started(self, piece_id: int) -> None:
        for item in self._queue:
            if item.piece_id == piece_id:
                item.asked = True

    def guarded(self, piece_id: int, text: str | None, *, withheld: bool) -> None:
        found = [i for i, item in enumerate(self._queue) if item.raw and item.piece_id == piece_id]
        if not found:
            return  # dropped by a restart, or a late verdict: ignored
        index = found[0]
        item = self._queue[index]
        del self._queue[index]
        if withheld:
            self._counters.pieces_withheld += 1
            self._queue_split(
                WITHHELD_NOTICE, item.line, formatted=False, attempt=item.attempt, at=index
            )
        elif text is not None and text.strip():
            self._queue_split(text, item.line, formatted=True, attempt=item.attempt, at=index)
        elif item.line:
            self._queue_split("", item.line, formatted=True, attempt=item.attempt, at=index)

    # -- writes ---------------------------------------------------------------------------

    def next_kind(self) -> WriteKind | None:
        if self._status.due:
            return "edit"
        return "send" if self._queue and not self._queue[0].raw else None

    def plan(self) -> Write | None:
        if self._status.due:
            self._in_flight, write = self._status.plan()
            return write
        if not self._queue or self._queue[0].raw:
            return None  # the head awaits its verdict: nothing behind it goes first
        item = self._queue[0]
        if item.piece:
            self._sent_attempts.add(item.attempt)
        message, formatted = item.message, item.formatted and not item.plain
        if formatted:
            formatted, _ = fit_rendering(self._settings.rendering(message), message, self._max)
        self._in_flight = item
        return Write(SendMessage(message, formatted), final=True)

    def _take(self) -> _Item | StatusEdit:
        item, self._in_flight = self._in_flight, None
        assert item is not None, "an outcome with no write in flight"
        return item

    def succeeded(self, message_id: str | None) -> None:
        item = self._take()
        if isinstance(item, StatusEdit):
            self._status.succeeded(item)
            return
        if item.call is not None:
            self._status.sent(item.call, message_id, item.text)
        self._discard(item)

    def failed(self, reason: WriteFailure) -> float:
        item = self._take()
        if isinstance(item, StatusEdit):
            return self._status.failed(item, reason)
        match FAILURE_EFFECTS[("send", reason)]:
            case Effect.UNCONFIRMED:
                self._counters.unconfirmed_sends += 1
                self._discard(item)  # it may have landed: never send a second copy
            case Effect.SHRINK:
                self._shrink(item)
            case Effect.RETRY:
                self._counters.writes_refused += 1
                item.tries += 1
                if item.tries < MAX_ATTEMPTS:
                    return REFUSED_BACKOFF_SECS[item.tries - 1]
                self._give_up(item)
            case Effect.MOVED:
                pass  # it did not land: sent again, to the new chat, at once
            case Effect.PLAIN | Effect.SHOWN:
                if item.formatted and not item.plain:
                    item.plain = True
                    self._counters.plain_fallbacks += 1
                else:
                    self._give_up(item)
        return 0.0

    def _shrink(self, item: _Item) -> None:
        room = min(self._max, measure(self._limits, item.message)) * 3 // 4
        if room < _MIN_ROOM:
            self._give_up(item)
            return
        self._max = room
        if item in self._queue:
            index = self._queue.index(item)
            del self._queue[index]
            self._queue_split(
                item.text,
                item.line,
                formatted=item.formatted,
                attempt=item.attempt,
                at=index,
                piece=item.piece,
            )

    def deferred(self) -> None:
        self._take()  # it stays at the head of the queue (an edit stays pending)

    def _give_up(self, item: _Item) -> None:
        self._counters.writes_given_up += 1
        self._discard(item)

    def _discard(self, item: _Item) -> None:
        if item.call is not None:
            self._status.dropped(item.call)
        if item in self._queue:
            self._queue.remove(item)
