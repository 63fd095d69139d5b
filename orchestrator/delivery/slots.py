"""The messages of a ``partial`` reply: one :class:`Slot` each, its state one :class:`SlotState`.

Theory of operation
-------------------
A slot is one chat message of the reply (architecture §3 "What the chat shows"). Its state says what
we know of that message; every change of state is a :class:`Step` looked up in :data:`TRANSITIONS`
(a step that is not in the table is a bug: :func:`advance` raises ``KeyError``)::

    state       step                    next        meaning
    ----------  ----------------------  ----------  -------------------------------------------
    EMPTY       sent                    SHOWN       no message yet; the send landed
    EMPTY       send_timed_out          ASSUMED     assumed landed with the text it was sent
                                                    with: never sent twice, never edited
    EMPTY       preview_send_timed_out  ORPHANED    the same, but the layout moved under it (a
                                                    restart): it holds no text of the reply
    ORPHANED    sent                    SHOWN       the final text, sent anew below the orphan
    ORPHANED    send_timed_out          ASSUMED
    SHOWN       edited                  SHOWN       it shows the text we wrote ("not modified"
    UNKNOWN     edited                  SHOWN         too: it showed it already)
    SHOWN       edit_timed_out          UNKNOWN     the old text or the new: retry the newest
    UNKNOWN     edit_timed_out          UNKNOWN       (not an identical edit)
    SHOWN       deleted                 EMPTY       deleted (or it was gone already)
    UNKNOWN     deleted                 EMPTY

Only ``SHOWN`` and ``UNKNOWN`` slots have a message id; only ``EMPTY`` and ``ORPHANED`` ones are
sent to (an orphan only with the final text: previews stop, as we cannot edit what we cannot
address). ``ASSUMED`` is final: a preview that landed so holds its text for good, and the reply
goes on after that text in the next message (architecture §3 "Network errors"). A slot whose
edits keep being refused is *retired* by the planner: it leaves the list of slots (its message is
deleted later) and a fresh ``EMPTY`` slot takes its place, so its text goes out as a new
message.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Literal

__all__ = ["TRANSITIONS", "Slot", "SlotState", "Step", "advance"]


class SlotState(Enum):
    EMPTY = "empty"
    SHOWN = "shown"
    UNKNOWN = "unknown"
    ORPHANED = "orphaned"
    ASSUMED = "assumed"


Step = Literal[
    "sent",
    "preview_send_timed_out",
    "send_timed_out",
    "edited",
    "edit_timed_out",
    "deleted",
]

_E, _S, _U, _O, _A = (
    SlotState.EMPTY,
    SlotState.SHOWN,
    SlotState.UNKNOWN,
    SlotState.ORPHANED,
    SlotState.ASSUMED,
)

TRANSITIONS: dict[tuple[SlotState, Step], SlotState] = {
    (_E, "sent"): _S,
    (_E, "preview_send_timed_out"): _O,
    (_E, "send_timed_out"): _A,
    (_O, "sent"): _S,
    (_O, "send_timed_out"): _A,
    (_S, "edited"): _S,
    (_U, "edited"): _S,
    (_S, "edit_timed_out"): _U,
    (_U, "edit_timed_out"): _U,
    (_S, "deleted"): _E,
    (_U, "deleted"): _E,
}


@dataclass(frozen=True, slots=True)
class Slot:
    """One message of the reply (an immutable record).

    Attributes:
        key: names the message among the reply's slots (a slot's identity across its values).
        state: what we know of it.
        message_id: set in ``SHOWN`` and ``UNKNOWN``.
        shown: the form it shows (the plain text, or the renderer's form of a formatted text);
            ``None`` unless ``SHOWN``.
        version: the live draft's version it shows (see :mod:`~orchestrator.delivery.drafts`).
        edits: edits it received (Matrix ``max_edits_per_message``).
        attempts: consecutive tries of its current write that timed out or were refused.
        plain: its formatted write was rejected: it is written plain.
        abandoned: a form given up on; tried again only when the desired form changes.
    """

    key: int = 0
    state: SlotState = SlotState.EMPTY
    message_id: str | None = None
    shown: str | None = None
    version: tuple[int, int] = (-1, -1)
    edits: int = 0
    attempts: int = 0
    plain: bool = False
    abandoned: str | None = None

    @property
    def writable(self) -> bool:
        """It has a message we can edit or delete."""
        return self.state in (SlotState.SHOWN, SlotState.UNKNOWN)


def advance(slot: Slot, step: Step, **changes: Any) -> Slot:
    """``slot`` after ``step`` (see :data:`TRANSITIONS`), with ``changes`` to its other fields
    made too (one new record); ``slot`` is left as it was.

    Raises:
        KeyError: the step is not allowed in the slot's state.
    """
    state = TRANSITIONS[(slot.state, step)]
    if state is SlotState.EMPTY:
        return replace(slot, state=state, message_id=None, shown=None, edits=0, **changes)
    if state is SlotState.UNKNOWN:
        return replace(slot, state=state, shown=None, **changes)
    return replace(slot, state=state, **changes)
