"""The tool status messages of ``multi_message`` with ``show_tool_status`` (architecture §3
"Tool status"): which call's message was sent under which id, and the edits that bring each to
its finished line.

Theory of operation
-------------------
The ``off`` / ``multi_message`` planner (:mod:`~orchestrator.delivery.pieces`) sends a call's
``⏳`` line as its own message; one immutable :class:`Status` value, held in the planner's
:class:`~orchestrator.delivery.queue_state.Queue`, keeps what happens after. When the call
finishes (:func:`finish`):

- its message was sent (its id known): an edit to the finished line is due;
- its send is in flight: the finished line waits, and the edit is due once the send landed
  (:func:`sent`), unless the send already carried it;
- its line was never sent (still queued): the planner sends it finished (latest text wins),
  nothing here.

A status message is left as it stands when the channel cannot edit, when its send timed out
(no id to edit it by: :func:`dropped`), or when its edit is given up: after ``MAX_ATTEMPTS``
tries that timed out or were refused, or at once for any other rejection. Every function takes
a value and returns a new one (pure and synchronous, like the rest of the engine).
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator.delivery.events import EditMessage, WriteFailure
from orchestrator.delivery.planning import (
    FAILURE_EFFECTS,
    MAX_ATTEMPTS,
    REFUSED_BACKOFF_SECS,
    Effect,
    Write,
)

__all__ = ["Status", "StatusEdit", "dropped", "edit_write", "failed", "finish", "sent", "succeeded"]


class StatusEdit(NamedTuple):
    """A status message to edit to its call's finished line (``tries``: attempts failed)."""

    call: int
    message_id: str
    text: str
    tries: int = 0


class Status(NamedTuple):
    """The status messages of one reply (an immutable record).

    Attributes:
        ids: ``(call, message id)`` of the status messages sent and not yet finished.
        waiting: ``(call, finished line)`` of calls whose status send is in flight.
        edits: the edits due, oldest first (one per call).
    """

    ids: tuple[tuple[int, str], ...] = ()
    waiting: tuple[tuple[int, str], ...] = ()
    edits: tuple[StatusEdit, ...] = ()


def _get(pairs: tuple[tuple[int, str], ...], call: int) -> str | None:
    return next((value for key, value in pairs if key == call), None)


def _without(pairs: tuple[tuple[int, str], ...], call: int) -> tuple[tuple[int, str], ...]:
    return tuple(pair for pair in pairs if pair[0] != call)


def _due(status: Status, call: int, message_id: str, line: str, can_edit: bool) -> Status:
    if not can_edit:
        return status
    edit = StatusEdit(call, message_id, line)
    edits = status.edits
    if any(due.call == call for due in edits):  # the newest line, in the first one's place
        return status._replace(edits=tuple(edit if due.call == call else due for due in edits))
    return status._replace(edits=(*edits, edit))


def finish(status: Status, call: int, line: str, *, sending: bool, can_edit: bool) -> Status:
    """Call ``call`` ended with ``line``; ``sending``: its status send is in flight. A call
    without a message here (never sent, or left) is ignored."""
    if sending:
        return status._replace(waiting=(*_without(status.waiting, call), (call, line)))
    message_id = _get(status.ids, call)
    if message_id is None:
        return status
    return _due(status._replace(ids=_without(status.ids, call)), call, message_id, line, can_edit)


def sent(status: Status, call: int, message_id: str | None, text: str, *, can_edit: bool) -> Status:
    """Call ``call``'s status message landed as ``text`` (``message_id`` ``None``: its send
    timed out, assumed landed without an id)."""
    finished = _get(status.waiting, call)
    status = dropped(status, call)
    if message_id is None:
        return status
    if finished is None:
        return status._replace(ids=(*_without(status.ids, call), (call, message_id)))
    if finished != text:
        return _due(status, call, message_id, finished, can_edit)
    return status


def dropped(status: Status, call: int) -> Status:
    """Call ``call``'s status send was given up: nothing of it is edited."""
    if _get(status.waiting, call) is None:
        return status
    return status._replace(waiting=_without(status.waiting, call))


def edit_write(edit: StatusEdit) -> Write:
    """The write of ``edit`` (the oldest due is ``status.edits[0]``)."""
    return Write(EditMessage(edit.message_id, edit.text), final=True)


def succeeded(status: Status, edit: StatusEdit) -> Status:
    return status._replace(edits=tuple(due for due in status.edits if due.call != edit.call))


def failed(
    status: Status, edit: StatusEdit, reason: WriteFailure
) -> tuple[Status, tuple[str, ...], float]:
    """The edit failed: tried again when it may have landed or was refused, up to
    ``MAX_ATTEMPTS`` tries; otherwise, and then, the message is left. Returns the new value,
    the counters that grow and the back-off in seconds."""
    effect = FAILURE_EFFECTS[("edit", reason)]
    if effect in (Effect.UNCONFIRMED, Effect.RETRY):
        tries = edit.tries + 1
        if tries < MAX_ATTEMPTS:
            edits = tuple(due._replace(tries=tries) if due is edit else due for due in status.edits)
            status = status._replace(edits=edits)
            if effect is Effect.RETRY:
                return status, ("writes_refused",), REFUSED_BACKOFF_SECS[tries - 1]
            return status, (), 0.0
    count = () if effect is Effect.SHOWN else ("writes_given_up",)
    return succeeded(status, edit), count, 0.0
