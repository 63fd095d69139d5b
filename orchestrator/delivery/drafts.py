"""The ``partial`` mode planner: one edited draft, frozen and continued when it outgrows the limit.

Theory of operation
-------------------
Everything the planner knows of one reply is one immutable
:class:`~orchestrator.delivery.draft_state.Drafts` value (held by the engine in its
:class:`~orchestrator.delivery.reply_state.ReplyState`): the layout
(:mod:`~orchestrator.delivery.draft_layout`: where the reply's messages are cut, what each
should show, the final targets, kept incrementally), one *slot* per chat message
(:mod:`~orchestrator.delivery.slots`), the retired and superseded messages, the write in flight
and the verdict awaited. Each input is a pure function from that value and the input to a
:class:`~orchestrator.delivery.draft_state.DraftStep` (the new value, the counters that grow,
a back-off), looked up in one table, :data:`TRANSITIONS`; the queries (:func:`guard_request`,
:func:`~orchestrator.delivery.draft_scan.next_kind`) read only. The next write is found by
:mod:`~orchestrator.delivery.draft_scan` (its query and its command walk the same pure steps).

Transition table (input: what the engine passes on; ``text``: the reply's transcript, read)::

    input                     what it does to the value
    ------------------------  ----------------------------------------------------------------
    TextEmitted(appended)     the layout grows (status lines go, the live draft freezes at its
                              best cut when it outgrew), then the cap check (below)
    ToolStarted(c, s)         call c's status line under the round's lines, then the cap check
    ToolFinished(c, s)        call c's line becomes s where it still shows, then the cap check
    RoundEnded                the next status line starts the lines anew
    Restarted                 cuts past the round's start forgotten; slots from there on laid
                              out anew (those assumed landed stand); a send in flight no longer
                              shows the current text
    Ending(ended|inter-       over; the marker follows the final text; the final text's verdict
      rupted)                 is asked for (``GuardPiece``, once), or a blank text laid out
    Ending(refused)           over; the notice alone replaces what was shown
    PieceGuarded(i, t)        (i awaited) the final text t laid out: on the preview's cuts when
    PieceWithheld(i)          the hook left it unchanged, else afresh; withheld: the notice
    WriteSucceeded(id)        the slot in flight shows what it wrote (``slots`` table)
    WriteFailed(rate_limited) the write is dropped: the next plan carries the newest text
    WriteFailed(r)            by :data:`~orchestrator.delivery.planning.FAILURE_EFFECTS`
                              (below); a refused write asks for a back-off

On ``Restart`` the messages past the round's start become spares, reused as the text grows again
or deleted at the end; on ``too_long`` the rejected message and those after it are laid out
again with less room.

Edits per message (Matrix ``max_edits_per_message``): previews may use ``cap - 2`` edits of a
message; the next change freezes it with one more edit (at the best cut of the text so far), and
the last edit is kept for the final text (under a cap of 3 there is none to spare: the message
keeps its first preview until the final edit).

The end: the final text is the hook's verdict on the whole text (``GuardPiece``, once; no write
while it is awaited), laid out on the same cuts when the hook left it unchanged (else afresh),
with the interrupted marker after a blank line when the answer was interrupted. Each message is
formatted when the channel's renderer says its formatted form fits, else plain. Surplus drafts are
deleted. With ``final_as_new_message`` (Matrix ``notice_previews``) the drafts are *superseded*
instead: the final text goes out as new messages, and only once every one of them landed are
the drafts deleted; should a final message not be sent (given up), the drafts stay, the last
preview included (case C17). A refusal, or a hook that failed (``PieceWithheld``), edits the
first message to the notice and deletes the others; a hook that cancels the text deletes the
drafts.

Failures, by :data:`~orchestrator.delivery.planning.FAILURE_EFFECTS`: an edit that timed out is
retried with the newest text (``UNKNOWN``: not an identical edit), up to ``MAX_ATTEMPTS``. A send
that timed out is assumed landed, without our knowing its id (architecture §3 "Network errors"):
it is never sent again nor edited; a draft's message holds the text it was sent with for good
(``ASSUMED``: the layout is cut at the end of that text) and the reply goes on after it in a new
message, so no text is shown twice. One that showed no text of the reply (a status line alone) is
left as it stands; one overtaken by a restart while in flight is an orphan (``ORPHANED``):
previews stop and the final text is sent as a new message below it. When the messages are laid
out anew (a restart, a refusal, a hook that rewrote or withheld the text, ``too_long``), messages
assumed landed are left as they stand and the new layout goes below the last of them (the ones
above it are deleted: the reply must not end above text it no longer holds). A write refused
outright (5xx, connection refused, "message to edit not found") is retried after
``REFUSED_BACKOFF_SECS``; after ``MAX_ATTEMPTS`` (at once when the chat moved: a group became a
supergroup, and the old chat's messages cannot be edited) the message is *retired*: its text and the
messages after it go out as new messages, after the retired ones were deleted (so the chat
keeps its order and never shows a stale preview above the answer). A rejected formatted write
is retried once plain; a rejected plain preview is given up until its text changes, a rejected
final edit is retired too: a shorter preview never stands as if it were the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from orchestrator.delivery import draft_layout as layouts
from orchestrator.delivery.draft_layout import STATUS_ROOM
from orchestrator.delivery.draft_state import (
    Drafts,
    DraftStep,
    InFlight,
    assumed_after,
    current,
    find,
    forget,
    freeze_for_cap,
    give_up,
    leave_assumed,
    put,
    retire,
    supersede,
    with_layout,
)
from orchestrator.delivery.events import (
    GuardPiece,
    PieceGuarded,
    PieceWithheld,
    Restarted,
    RoundEnded,
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
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.slots import Slot, advance
from orchestrator.delivery.splitting import measure

__all__ = [
    "MIN_ROOM",
    "STATUS_ROOM",
    "TRANSITIONS",
    "DraftInput",
    "guard_request",
    "guard_started",
    "hear",
    "on_text",
]

MIN_ROOM = 16
"""``too_long`` shrinks the room by a quarter each time, down to this; then the write is given
up."""

DraftInput = (
    TextEmitted
    | ToolStarted
    | ToolFinished
    | RoundEnded
    | Restarted
    | Ending
    | PieceGuarded
    | PieceWithheld
    | WriteSucceeded
    | WriteFailed
)
"""What the planner hears (``TextEmitted`` carries the text as appended to the transcript, its
round's separator included; the three ends come as one :class:`Ending`)."""

# -- the answer ---------------------------------------------------------------------------------


def on_text(drafts: Drafts, appended: str, text: Transcript, settings: DeliverySettings) -> Drafts:
    """``appended`` was added to the transcript (nearly every input: called directly). Returns
    ``drafts`` itself when nothing changed (the live draft grew within its room)."""
    layout = layouts.append(drafts.layout, appended, text, settings)
    grown = drafts if layout is drafts.layout else with_layout(drafts, layout)
    if settings.max_edits_per_message is None:
        return grown  # no cap: nothing to freeze for it
    return freeze_for_cap(grown, text, settings)


def _text(drafts: Drafts, event: TextEmitted, text: Transcript, s: DeliverySettings) -> DraftStep:
    return DraftStep(on_text(drafts, event.text, text, s))


def _status(drafts: Drafts, event: ToolStarted, text: Transcript, s: DeliverySettings) -> DraftStep:
    layout = layouts.set_status(drafts.layout, event.call, event.status, text, s)
    return DraftStep(freeze_for_cap(drafts._replace(layout=layout), text, s))


def _status_finished(
    drafts: Drafts, event: ToolFinished, text: Transcript, s: DeliverySettings
) -> DraftStep:
    # The line is edited in place at the draft's next (throttled) edit.
    layout = layouts.finish_status(drafts.layout, event.call, event.status, text, s)
    return DraftStep(freeze_for_cap(drafts._replace(layout=layout), text, s))


def _round_ended(
    drafts: Drafts, event: RoundEnded, text: Transcript, s: DeliverySettings
) -> DraftStep:
    # A new round's tools begin: their status lines replace the last round's.
    return DraftStep(drafts._replace(layout=layouts.new_status_round(drafts.layout)))


def _restarted(
    drafts: Drafts, event: Restarted, text: Transcript, s: DeliverySettings
) -> DraftStep:
    layout = layouts.restart(drafts.layout, text.round_start, text, s)
    drafts = leave_assumed(drafts._replace(layout=layout, clean=0), len(layout.cuts))
    if drafts.in_flight is not None:  # a send in flight no longer shows the current text
        drafts = drafts._replace(in_flight=replace(drafts.in_flight, end=-1))
    return DraftStep(drafts)


def _ended(drafts: Drafts, ending: Ending, text: Transcript, s: DeliverySettings) -> DraftStep:
    suffix = ending.line if ending.kind == "interrupted" else None
    drafts = drafts._replace(ended=True, layout=layouts.end(drafts.layout, suffix))
    if ending.kind == "refused":
        drafts = drafts._replace(layout=layouts.refuse(drafts.layout, ending.line, s))
        return DraftStep(supersede(leave_assumed(drafts, 0), s))
    body = text.text
    if not body.strip():
        layout = layouts.lay_out_final(drafts.layout, "", s)
        return DraftStep(supersede(drafts._replace(layout=layout), s))
    piece_id = drafts.next_piece
    span = (0, text.emitted_offset(len(body)))
    guard = GuardPiece(piece_id, body, span)
    return DraftStep(drafts._replace(guard=guard, awaited=piece_id, next_piece=piece_id + 1))


# -- the verdict --------------------------------------------------------------------------------


def guard_request(drafts: Drafts) -> GuardPiece | None:
    """The verdict to ask for now (a query)."""
    return drafts.guard


def guard_started(drafts: Drafts) -> Drafts:
    """The verdict was asked for."""
    return drafts._replace(guard=None)


def _guarded(
    drafts: Drafts, event: PieceGuarded | PieceWithheld, text: Transcript, s: DeliverySettings
) -> DraftStep:
    if event.piece_id != drafts.awaited:
        return DraftStep(drafts)  # not awaited (late): ignored
    drafts = drafts._replace(guard=None, awaited=None)
    if isinstance(event, PieceWithheld):
        layout = layouts.lay_out_final(drafts.layout, WITHHELD_NOTICE, s, formatted=False, keep=())
        drafts = leave_assumed(drafts._replace(layout=layout), 0)
        return DraftStep(supersede(drafts, s), ("pieces_withheld",))
    body = event.text if event.text is not None and event.text.strip() else ""
    keep: tuple[layouts.Frozen, ...] | None = None  # the preview's cuts
    if body != text.text:
        keep = ()  # the hook rewrote it: lay the final text out afresh
        drafts = leave_assumed(drafts, 0)
    layout = layouts.lay_out_final(drafts.layout, body, s, keep=keep)
    return DraftStep(supersede(drafts._replace(layout=layout), s)._replace(clean=0))


# -- outcomes -----------------------------------------------------------------------------------


def _take(drafts: Drafts) -> tuple[Drafts, InFlight, Slot]:
    """The write in flight taken off, and its slot's current value."""
    flight = drafts.in_flight
    assert flight is not None, "an outcome with no write in flight"
    drafts = drafts._replace(in_flight=None)
    return drafts, flight, current(drafts, flight.slot)


def _succeeded(
    drafts: Drafts, event: WriteSucceeded, text: Transcript, s: DeliverySettings
) -> DraftStep:
    drafts, flight, slot = _take(drafts)
    shown = {"attempts": 0, "shown": flight.form, "version": flight.version}
    match flight.write.kind:
        case "delete":
            slot = replace(slot, attempts=0)
            return DraftStep(forget(put(drafts, slot), slot))
        case "send" if event.message_id is None:  # no id to edit it by: assumed landed
            slot = advance(slot, "send_timed_out", **shown)
        case "send":
            slot = advance(slot, "sent", message_id=event.message_id, edits=0, **shown)
        case "edit":
            slot = advance(slot, "edited", edits=slot.edits + 1, **shown)
    return DraftStep(freeze_for_cap(put(drafts, slot), text, s))


def _failed(drafts: Drafts, event: WriteFailed, text: Transcript, s: DeliverySettings) -> DraftStep:
    if event.reason == "rate_limited":
        return DraftStep(drafts._replace(in_flight=None))  # the next plan carries the newest text
    drafts, flight, slot = _take(drafts)
    count: list[str] = []
    backoff = 0.0
    match FAILURE_EFFECTS[(flight.write.kind, event.reason)]:
        case Effect.SHOWN if flight.write.kind == "delete":
            drafts = forget(drafts, slot)
        case Effect.SHOWN:  # "not modified": it shows that already, no edit made
            slot = advance(slot, "edited", shown=flight.form, version=flight.version, attempts=0)
            drafts = freeze_for_cap(put(drafts, slot), text, s)
        case Effect.UNCONFIRMED:
            drafts = _unconfirmed(drafts, flight, slot, count, text, s)
        case Effect.RETRY:
            drafts, backoff = _refused(drafts, flight, slot, count)
        case Effect.SHRINK:
            drafts = _shrink(drafts, flight, slot, count, text, s)
        case Effect.PLAIN:
            drafts = _rejected(drafts, flight, slot, count)
        case Effect.MOVED:
            drafts = _moved(drafts, flight, slot, count)
    return DraftStep(drafts, tuple(count), backoff)


def _unconfirmed(
    drafts: Drafts,
    flight: InFlight,
    slot: Slot,
    count: list[str],
    text: Transcript,
    s: DeliverySettings,
) -> Drafts:
    write = flight.write
    if write.kind == "send":
        count.append("unconfirmed_sends")
        drafts, pinned = (drafts, True) if write.final else _pin(drafts, flight, slot, text, s)
        slot = advance(slot, "send_timed_out" if pinned else "preview_send_timed_out")
        return put(drafts, replace(slot, shown=flight.form))
    if write.kind == "edit":
        slot = advance(replace(slot, edits=slot.edits + 1), "edit_timed_out")
        slot, given_up = _attempt_failed(slot, count)
        return put(drafts, replace(slot, abandoned=flight.form) if given_up else slot)
    slot, given_up = _attempt_failed(slot, count)
    drafts = put(drafts, slot)
    return forget(drafts, slot) if given_up else drafts


def _pin(
    drafts: Drafts, flight: InFlight, slot: Slot, text: Transcript, s: DeliverySettings
) -> tuple[Drafts, bool]:
    """A preview send timed out: assumed landed, its message holds the text it was sent with for
    good (it has no id to edit it by), and the reply goes on after that text in a new message.
    False when the layout moved under it (a restart, a shrink) and it cannot be kept: then it is
    an orphan (module docstring)."""
    index = find(drafts.slots, slot)
    if flight.end < 0 or drafts.ended or index < 0:
        return drafts, False
    if not text.tail(flight.start)[: flight.end - flight.start].strip():
        # It showed no text of the reply (a status line alone): it is left as it stands, and
        # the draft goes on in a new message.
        return drafts._replace(slots=(*drafts.slots[:index], *drafts.slots[index + 1 :])), True
    span = (flight.start, flight.end)
    layout = layouts.pin(drafts.layout, index, span, flight.form, text, s)
    if layout is None:
        return drafts, False
    return drafts._replace(layout=layout), True


def _refused(
    drafts: Drafts, flight: InFlight, slot: Slot, count: list[str]
) -> tuple[Drafts, float]:
    """Did not land: back off and retry; then a new message (module docstring)."""
    count.append("writes_refused")
    attempts = slot.attempts + 1
    if attempts < MAX_ATTEMPTS:
        return put(drafts, replace(slot, attempts=attempts)), REFUSED_BACKOFF_SECS[attempts - 1]
    slot = replace(slot, attempts=0)
    drafts = put(drafts, slot)
    kind = flight.write.kind
    if kind == "edit" and _retirable(drafts, slot):
        return retire(drafts, find(drafts.slots, slot), count), 0.0
    if kind == "delete":
        count.append("writes_given_up")
        return forget(drafts, slot), 0.0
    return give_up(drafts, slot, flight.form, count), 0.0


def _retirable(drafts: Drafts, slot: Slot) -> bool:
    index = find(drafts.slots, slot)
    return index >= 0 and not assumed_after(drafts, index)


def _moved(drafts: Drafts, flight: InFlight, slot: Slot, count: list[str]) -> Drafts:
    """The chat moved: a send goes again (to the new chat); a message of the old chat is
    retired (its text and those after it go out anew there), without a delete of it."""
    kind = flight.write.kind
    if kind == "delete":
        return forget(drafts, slot)
    index = find(drafts.slots, slot)
    if kind == "edit" and index >= 0:
        drafts = retire(drafts, index, count)
        stale = find(drafts.stale, slot)
        if stale >= 0:
            drafts = drafts._replace(stale=(*drafts.stale[:stale], *drafts.stale[stale + 1 :]))
    return drafts


def _rejected(drafts: Drafts, flight: InFlight, slot: Slot, count: list[str]) -> Drafts:
    write = flight.write
    if write.formatted and not slot.plain:
        count.append("plain_fallbacks")
        return put(drafts, replace(slot, plain=True))
    if write.kind == "edit" and write.final and _retirable(drafts, slot):
        return retire(drafts, find(drafts.slots, slot), count)
    if write.kind == "delete":
        count.append("writes_given_up")
        return forget(drafts, slot)
    return give_up(drafts, slot, flight.form, count)


def _attempt_failed(slot: Slot, count: list[str]) -> tuple[Slot, bool]:
    """Count a timeout; True when the write is given up."""
    attempts = slot.attempts + 1
    if attempts < MAX_ATTEMPTS:
        return replace(slot, attempts=attempts), False
    count.append("writes_given_up")
    return replace(slot, attempts=0), True


def _shrink(
    drafts: Drafts,
    flight: InFlight,
    slot: Slot,
    count: list[str],
    text: Transcript,
    s: DeliverySettings,
) -> Drafts:
    """The platform counted more than we did: lay this message and the next out again with a
    quarter less room."""
    room = min(drafts.layout.max, measure(s.limits, flight.write.text)) * 3 // 4
    index = find(drafts.slots, slot)
    index = len(drafts.slots) if index < 0 else index
    layout = None if room < MIN_ROOM else layouts.shrink(drafts.layout, index, room, text, s)
    if layout is None:
        count.append("writes_given_up")
        return put(drafts, replace(slot, abandoned=flight.form))
    drafts = drafts._replace(layout=layout, clean=min(drafts.clean, index))
    return leave_assumed(drafts, index + 1)


# -- the table ----------------------------------------------------------------------------------

TRANSITIONS: dict[type[Any], Callable[[Drafts, Any, Transcript, DeliverySettings], DraftStep]] = {
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


def hear(
    drafts: Drafts, event: DraftInput, text: Transcript, settings: DeliverySettings
) -> DraftStep:
    """The step ``event`` takes from ``drafts`` (:data:`TRANSITIONS`); ``text`` is read only."""
    return TRANSITIONS[type(event)](drafts, event, text, settings)
