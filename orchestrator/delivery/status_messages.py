"""The tool status messages of ``multi_message`` with ``show_tool_status`` (architecture §3
"Tool status"): which call's message was sent under which id, and the edits that bring each to
its finished line.

Theory of operation
-------------------
The :class:`~orchestrator.delivery.pieces.QueuePlanner` sends a call's ``⏳`` line as its own
message; this keeps what happens after. When the call finishes (:meth:`StatusMessages.finish`):

- its message was sent (its id known): an edit to the finished line is due;
- its send is in flight: the finished line waits, and the edit is due once the send landed
  (:meth:`StatusMessages.sent`), unless the send already carried it;
- its line was never sent (still queued): the planner sends it finished (latest text wins),
  nothing here.

A status message is left as it stands when the channel cannot edit, when its send timed out
(no id to edit it by: :meth:`StatusMessages.dropped`), or when its edit is given up: after
``MAX_ATTEMPTS`` tries that timed out or were refused, or at once for any other rejection.
Pure and synchronous, like the rest of the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.delivery.events import EditMessage, WriteFailure
from orchestrator.delivery.planning import (
    FAILURE_EFFECTS,
    MAX_ATTEMPTS,
    REFUSED_BACKOFF_SECS,
    Counters,
    Effect,
    Write,
)

__all__ = ["StatusEdit", "StatusMessages"]


@dataclass(eq=False, slots=True)
class StatusEdit:
    """A status message to edit to its call's finished line (``tries``: attempts failed)."""

    call: int
    message_id: str
    text: str
    tries: int = 0


class StatusMessages:
    """Status messages by call, and the edits due (see the module docstring).

    Args:
        can_edit: the channel can edit a message it sent; without, no edit is ever due.
        counters: the engine's running totals (refused and given-up writes).
    """

    def __init__(self, can_edit: bool, counters: Counters) -> None:
        self._can_edit = can_edit
        self._counters = counters
        self._ids: dict[int, str] = {}
        """The message ids of the status messages sent and not yet finished, by call."""
        self._waiting: dict[int, str] = {}
        """Finished lines of calls whose status send is in flight."""
        self._edits: dict[int, StatusEdit] = {}
        """Edits due, oldest first."""

    # -- the calls --------------------------------------------------------------------------

    def finish(self, call: int, line: str, *, sending: bool) -> None:
        """Call ``call`` ended with ``line``; ``sending``: its status send is in flight. A call
        without a message here (never sent, or left) is ignored."""
        if sending:
            self._waiting[call] = line
        elif call in self._ids:
            self._due(call, self._ids.pop(call), line)

    def sent(self, call: int, message_id: str | None, text: str) -> None:
        """Call ``call``'s status message landed as ``text`` (``message_id`` ``None``: its send
        timed out, assumed landed without an id)."""
        finished = self._waiting.pop(call, None)
        if message_id is None:
            return
        if finished is None:
            self._ids[call] = message_id
        elif finished != text:
            self._due(call, message_id, finished)

    def dropped(self, call: int) -> None:
        """Call ``call``'s status send was given up: nothing of it is edited."""
        self._waiting.pop(call, None)

    def _due(self, call: int, message_id: str, line: str) -> None:
        if self._can_edit:
            self._edits[call] = StatusEdit(call, message_id, line)

    # -- the edits --------------------------------------------------------------------------

    @property
    def due(self) -> bool:
        """An edit is due (a query)."""
        return bool(self._edits)

    def plan(self) -> tuple[StatusEdit, Write]:
        """The oldest edit due, and its write (the caller keeps it as in flight)."""
        edit = next(iter(self._edits.values()))
        return edit, Write(EditMessage(edit.message_id, edit.text), final=True)

    def succeeded(self, edit: StatusEdit) -> None:
        self._edits.pop(edit.call, None)

    def failed(self, edit: StatusEdit, reason: WriteFailure) -> float:
        """The edit failed: tried again when it may have landed or was refused, up to
        ``MAX_ATTEMPTS`` tries; otherwise, and then, the message is left. Returns the back-off
        in seconds."""
        effect = FAILURE_EFFECTS[("edit", reason)]
        if effect in (Effect.UNCONFIRMED, Effect.RETRY):
            edit.tries += 1
            if edit.tries < MAX_ATTEMPTS:
                if effect is Effect.RETRY:
                    self._counters.writes_refused += 1
                    return REFUSED_BACKOFF_SECS[edit.tries - 1]
                return 0.0
        if effect is not Effect.SHOWN:
            self._counters.writes_given_up += 1
        self._edits.pop(edit.call, None)
        return 0.0
