"""The ``off`` and ``multi_message`` planner: a queue of finished messages, sent in order.

Theory of operation
-------------------
Nothing here is ever edited: each message is sent once, formatted, and stands.

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
restart is never guarded), and the hook's output is split again at the limit. Tool statuses
(``show_tool_status``), the restart notice and the interrupted marker are queued as their own
plain messages.

``Restart``: queued pieces of the failed attempt are dropped; pieces already sent stand; when one
was sent (or in flight), ``(answer restarted)`` is queued before the next message.

``off`` queues nothing until the end; then the whole text goes through ``guard_piece`` once and
is split at the limit; the interrupted marker follows the last part after a blank line, or comes
as a message of its own when it does not fit there (it is never split).

Failures: a send that timed out is assumed to have landed (re-sending could duplicate it);
``too_long`` splits that message again with a quarter less room; ``failed`` retries a formatted
message once plain, then gives it up; a rate limit keeps it at the head of the queue.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from orchestrator.delivery.events import SendMessage, WriteFailure
from orchestrator.delivery.planning import (
    RESTARTED_NOTICE,
    Counters,
    Ending,
    PlannedWrite,
    Transcript,
    WriteKind,
    append_line,
    clip_line,
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
from orchestrator.policy.reply import PieceGuard

__all__ = ["QueuePlanner", "paragraph_end"]

_MIN_ROOM = 16


@dataclass(eq=False, slots=True)
class _Item:
    """One message to send. ``raw`` pieces have not been through ``guard_piece`` yet; ``line``
    (the interrupted marker in ``off``) follows ``text`` after a blank line and is never split."""

    text: str
    formatted: bool
    attempt: int
    piece: bool
    raw: bool = False
    plain: bool = False
    line: str = ""

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


class QueuePlanner:
    """Plans the writes of ``off`` and ``multi_message`` modes (see the module docstring)."""

    def __init__(
        self,
        settings: DeliverySettings,
        guard: PieceGuard,
        transcript: Transcript,
        counters: Counters,
    ) -> None:
        self._settings = settings
        self._limits = settings.limits
        self._guard = guard
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

    # -- cutting pieces -------------------------------------------------------------------

    def _queue_message(self, text: str, *, formatted: bool, piece: bool, raw: bool) -> None:
        if not text.strip():
            return
        if self._notice_due:
            self._notice_due = False
            notice = self._guard.redact_line(RESTARTED_NOTICE)
            self._queue.append(_Item(notice, False, self._attempt, piece=False))
        self._queue.append(_Item(text, formatted, self._attempt, piece=piece, raw=raw))

    def _queue_piece(self, text: str, start: int, end: int) -> None:
        """Queue ``text[start:end]`` (trailing whitespace dropped) and move the cursor to
        ``end``."""
        stop = start + len(text[start:end].rstrip())
        if stop > start:
            body, _ = render_chunk(text, start, stop, self._fence)
            self._queue_message(body, formatted=True, piece=True, raw=True)
        self._cursor, self._fence = end, None

    def _fits(self, text: str, start: int) -> bool:
        prefix = len(self._fence.reopen) if self._fence else 0
        width = 2 if self._limits.unit == "utf16" else 1
        if (len(text) - start + prefix) * width <= self._max:
            return True  # cheap bound: no need to measure
        tail = render_chunk(text, start, len(text), self._fence, close=False)[0]
        return measure(self._limits, tail) <= self._max

    def _cut(self, *, flush: bool) -> None:
        text = self._transcript.text
        while True:
            if self._fence is None:
                self._cursor = _skip_blank_lines(text, self._cursor)
            start = self._cursor
            if self._by_paragraph:
                found = paragraph_end(text, start, self._fence)
                if found is not None:
                    self._queue_piece(text, start, found[0])
                    self._cursor = found[1]
                    continue
            if not self._fits(text, start):
                chunk = find_cut(self._limits, text, start, len(text), self._fence, self._max)
                body, fence = render_chunk(text, start, chunk.cut, self._fence)
                self._queue_message(body.rstrip(), formatted=True, piece=True, raw=True)
                self._cursor, self._fence = chunk.cut, fence
                continue
            if flush:
                self._queue_piece(text, start, len(text))
            return

    # -- events ---------------------------------------------------------------------------

    def on_text(self) -> None:
        if self._streams:
            self._cut(flush=False)

    def on_status(self, status: str) -> None:
        if self._streams and self._settings.show_tool_status:
            line = clip_line(self._limits, status, self._max)
            self._queue_message(line, formatted=False, piece=False, raw=False)

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
        if self._cursor > len(self._transcript.text):
            self._cursor, self._fence = len(self._transcript.text), None

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
                notice = self._guard.redact_line(RESTARTED_NOTICE)
                self._queue.append(_Item(notice, False, self._attempt, piece=False))
            return
        text = self._transcript.text
        body = (self._guard.guard_piece(text) or "") if text.strip() else ""
        line = clip_line(self._limits, ending.line, self._max) if ending.line else ""
        self._queue_split(body, line, formatted=True, attempt=self._attempt, at=len(self._queue))

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

    # -- writes ---------------------------------------------------------------------------

    def next_kind(self) -> WriteKind | None:
        return "send" if self._queue else None

    def plan(self) -> PlannedWrite | None:
        while self._queue:
            item = self._queue[0]
            if item.raw:
                self._queue.popleft()
                guarded = self._guard.guard_piece(item.text)
                if guarded is not None and guarded.strip():
                    self._queue_split(guarded, "", formatted=True, attempt=item.attempt, at=0)
                continue
            if item.piece:
                self._sent_attempts.add(item.attempt)
            action = SendMessage(item.message, item.formatted and not item.plain)
            return PlannedWrite(action, item, final=True)
        return None

    def succeeded(self, write: PlannedWrite, message_id: str | None) -> None:
        self._discard(write)

    def failed(self, write: PlannedWrite, reason: WriteFailure) -> None:
        item = write.target
        assert isinstance(item, _Item)
        if reason == "timeout":
            self._counters.unconfirmed_sends += 1
            self._discard(write)  # it may have landed: never send a second copy
        elif reason == "too_long":
            room = min(self._max, measure(self._limits, item.message)) * 3 // 4
            if room < _MIN_ROOM:
                self._give_up(write)
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
        elif write.action.formatted and not item.plain:  # type: ignore[union-attr]
            item.plain = True
            self._counters.plain_fallbacks += 1
        else:
            self._give_up(write)

    def deferred(self, write: PlannedWrite) -> None:
        return None  # it stays at the head of the queue

    def _give_up(self, write: PlannedWrite) -> None:
        self._counters.writes_given_up += 1
        self._discard(write)

    def _discard(self, write: PlannedWrite) -> None:
        if write.target in self._queue:
            self._queue.remove(write.target)  # type: ignore[arg-type]
