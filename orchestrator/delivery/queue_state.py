"""The state of an ``off`` / ``multi_message`` reply's queue: one immutable :class:`Queue`
record, and the pure steps the planner (:mod:`~orchestrator.delivery.pieces`) builds on.

Theory of operation
-------------------
:class:`Queue` holds everything the queue planner knows of one reply: the messages still to send
(:class:`Item`, each with a ``key`` that names it for good), the cursor up to which the text was
cut into pieces (and its measure), the attempt, the write in flight, the status messages
(:class:`~orchestrator.delivery.status_messages.Status`) and the room of a message (less after a
``too_long``). Every function here takes a value and returns a new one; the old value is never
changed. The engine holds the current value in its
:class:`~orchestrator.delivery.reply_state.ReplyState`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from orchestrator.delivery.planning import append_line
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import Fence, measure, split_text
from orchestrator.delivery.status_messages import Status, StatusEdit

MIN_ROOM = 16
"""``too_long`` shrinks the room by a quarter each time, down to this; then the send is given
up."""

__all__ = [
    "MIN_ROOM",
    "Item",
    "Queue",
    "QueueStep",
    "index_of",
    "new_queue",
    "queue_message",
    "queue_notice",
    "queue_split",
    "shrink",
    "with_item",
    "without_item",
]


class Item(NamedTuple):
    """One message to send. ``raw`` pieces have not been through the hook yet (``asked``: its
    verdict was requested); ``line`` (the interrupted marker in ``off``) follows ``text`` after a
    blank line and is never split; ``call``: the tool call whose status line this is; ``span``:
    a raw piece's place in the emitted text (``GuardPiece.span``)."""

    key: int
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
    span: tuple[int, int] | None = None

    @property
    def message(self) -> str:
        return append_line(self.text, self.line) if self.line else self.text


class Queue(NamedTuple):
    """What the ``off`` / ``multi_message`` planner knows of one reply (an immutable record).

    Attributes:
        items: the messages to send, in order.
        cursor: the text before it is cut into pieces (code points into the transcript).
        cursor_units: the measure of the text before the cursor (the transcript keeps the
            whole text's, so the text after the cursor is measured without reading it).
        fence: the code fence open at the cursor.
        attempt: the current attempt (a restart or a round's end starts the next).
        sent_attempts: the attempts a piece of which was sent (or is in flight).
        notice_due: ``(answer restarted)`` goes before the next message.
        next_piece: the id of the next piece to guard.
        next_key: the key of the next item.
        in_flight: the send (an item, as it was when sent) or status edit in flight.
        status: the tool status messages.
        max: the room of a message (a ``too_long`` shrinks it by a quarter).
        notice: the restart notice, redacted.
    """

    items: tuple[Item, ...] = ()
    cursor: int = 0
    cursor_units: int = 0
    fence: Fence | None = None
    attempt: int = 0
    sent_attempts: frozenset[int] = frozenset()
    notice_due: bool = False
    next_piece: int = 1
    next_key: int = 0
    in_flight: Item | StatusEdit | None = None
    status: Status = Status()
    max: int = 0
    notice: str = ""


@dataclass(frozen=True, slots=True)
class QueueStep:
    """What one input does to :class:`Queue`: the new value, the names of the
    :class:`~orchestrator.delivery.planning.DeliveryStats` counters that grow by one, and the
    back-off (in seconds) a refused write asks for."""

    queue: Queue
    count: tuple[str, ...] = ()
    backoff: float = 0.0


def new_queue(settings: DeliverySettings, notice: str) -> Queue:
    """The state of a reply that has queued nothing yet; ``notice``: the restart notice."""
    return Queue(max=settings.limits.max_length, notice=notice)


def index_of(queue: Queue, key: int) -> int:
    """Where the item ``key`` is in the queue; -1 when it is not there (sent, dropped)."""
    for i, item in enumerate(queue.items):
        if item.key == key:
            return i
    return -1


def with_item(queue: Queue, item: Item) -> Queue:
    """``queue`` with ``item``'s new value where its key is; unchanged when it is gone."""
    i = index_of(queue, item.key)
    if i < 0:
        return queue
    return queue._replace(items=(*queue.items[:i], item, *queue.items[i + 1 :]))


def without_item(queue: Queue, key: int) -> Queue:
    i = index_of(queue, key)
    if i < 0:
        return queue
    return queue._replace(items=(*queue.items[:i], *queue.items[i + 1 :]))


def queue_message(
    queue: Queue,
    text: str,
    *,
    formatted: bool,
    piece: bool,
    raw: bool,
    call: int | None = None,
    span: tuple[int, int] | None = None,
    line: str = "",
) -> Queue:
    """``queue`` with ``text`` queued last (a raw piece gets the next piece id), after the
    restart notice when it is due; blank text is not queued."""
    if not text.strip():
        return queue
    key, items = queue.next_key, queue.items
    if queue.notice_due:
        items = (*items, Item(key, queue.notice, False, queue.attempt, piece=False))
        key += 1
    piece_id = queue.next_piece if raw else 0
    item = Item(key, text, formatted, queue.attempt, piece, raw, piece_id, line=line, call=call)
    item = item._replace(span=span) if span is not None else item
    return queue._replace(
        items=(*items, item),
        notice_due=False,
        next_key=key + 1,
        next_piece=queue.next_piece + 1 if raw else queue.next_piece,
    )


def queue_notice(queue: Queue) -> Queue:
    """The restart notice queued last (it was due, and nothing followed it)."""
    item = Item(queue.next_key, queue.notice, False, queue.attempt, piece=False)
    return queue._replace(items=(*queue.items, item), notice_due=False, next_key=item.key + 1)


def queue_split(
    queue: Queue,
    body: str,
    line: str,
    settings: DeliverySettings,
    *,
    formatted: bool,
    attempt: int,
    at: int,
    piece: bool = True,
) -> Queue:
    """``body`` split at the room, queued at position ``at``; ``line`` goes after the last part
    when it fits there, else in a message of its own."""
    limits, key = settings.limits, queue.next_key
    items: list[Item] = []
    for chunk in split_text(limits, body, queue.max):
        items.append(Item(key, chunk, formatted, attempt, piece=piece))
        key += 1
    if line:
        if items and measure(limits, append_line(items[-1].text, line)) <= queue.max:
            items[-1] = items[-1]._replace(line=line)
        else:
            items.append(Item(key, line, formatted, attempt, piece=piece))
            key += 1
    queued = (*queue.items[:at], *items, *queue.items[at:])
    return queue._replace(items=queued, next_key=key)


def shrink(queue: Queue, item: Item, settings: DeliverySettings) -> Queue | None:
    """``item`` was too long for the platform (it counted more than we did): the room a quarter
    less, and ``item`` split again at it in its place. ``None`` below :data:`MIN_ROOM`."""
    room = min(queue.max, measure(settings.limits, item.message)) * 3 // 4
    if room < MIN_ROOM:
        return None
    queue = queue._replace(max=room)
    index = index_of(queue, item.key)
    if index < 0:
        return queue
    return queue_split(
        without_item(queue, item.key),
        item.text,
        item.line,
        settings,
        formatted=item.formatted,
        attempt=item.attempt,
        at=index,
        piece=item.piece,
    )
