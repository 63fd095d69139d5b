"""The ``partial`` mode planner: one edited draft, frozen and continued when it outgrows the limit.

Theory of operation
-------------------
The layout — where the reply's messages are cut, what each should show, the final targets — is
kept by :class:`~orchestrator.delivery.draft_layout.DraftLayout`, incrementally. This planner
holds one *slot* (:mod:`orchestrator.delivery.slots`) per chat message and decides the writes
that make the chat show the layout. On ``Restart`` the messages past the round's start become
spares, reused as the text grows again or deleted at the end; on ``too_long`` the rejected
message and those after it are laid out again with less room.

A query (:meth:`DraftPlanner.next_kind`) never changes state; it may answer "edit" for a live
draft whose version changed but whose text turns out to equal what is shown, and then
:meth:`DraftPlanner.plan` (a command) records that and writes nothing.

Every time a write may start, the first slot whose message does not show its desired form gets
the one write: a send when it has no message, else an edit. So a frozen message gets its freezing
edit before the next message is sent, and an edit equal to what is shown is never sent.

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

import itertools
from dataclasses import dataclass, replace

from orchestrator.delivery.draft_layout import STATUS_ROOM, DraftLayout
from orchestrator.delivery.events import (
    DeleteMessage,
    EditMessage,
    GuardPiece,
    SendMessage,
    WriteFailure,
)
from orchestrator.delivery.planning import (
    FAILURE_EFFECTS,
    MAX_ATTEMPTS,
    REFUSED_BACKOFF_SECS,
    WITHHELD_NOTICE,
    Counters,
    Effect,
    Ending,
    Transcript,
    Write,
    WriteKind,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.slots import Slot, SlotState, advance
from orchestrator.delivery.splitting import measure

__all__ = ["MIN_ROOM", "STATUS_ROOM", "DraftPlanner"]

MIN_ROOM = 16
"""``too_long`` shrinks the room by a quarter each time, down to this; then the write is given
up."""


@dataclass(frozen=True, slots=True)
class _InFlight:
    """A write in flight; a send of the live draft also carries the span of the text it shows,
    ``text[start:end]`` (``end`` is -1 otherwise)."""

    slot: Slot
    form: str
    version: int
    write: Write
    start: int = 0
    end: int = -1


class DraftPlanner:
    """Plans the writes of ``partial`` mode (see the module docstring)."""

    def __init__(
        self, settings: DeliverySettings, transcript: Transcript, counters: Counters
    ) -> None:
        self._settings = settings
        self._limits = settings.limits
        self._transcript = transcript
        self._counters = counters
        self._layout = DraftLayout(settings, transcript)
        self._slots: list[Slot] = []
        self._stale: list[Slot] = []
        """Retired messages, deleted before anything else is written."""
        self._ended = False
        self._guard: GuardPiece | None = None
        self._awaited: int | None = None
        self._piece_ids = itertools.count(1)
        self._in_flight: _InFlight | None = None
        self._clean = 0
        """Leading frozen messages known to show their text: the scan starts after them."""
        self._superseded: list[Slot] | None = None
        """``final_as_new_message``: the drafts, deleted once the final messages landed."""

    def _freeze_for_cap(self) -> None:
        """Freeze the live draft when its message has no preview edit left (module docstring)."""
        cap = self._settings.max_edits_per_message
        layout = self._layout
        live = len(layout.cuts)
        if cap is None or cap < 3 or self._ended or live >= len(self._slots):
            return  # below 3 edits there is none to spare: the preview stays until the end
        slot = self._slots[live]
        if not slot.writable or slot.edits != cap - 2 or not layout.live_has_text:
            return  # one edit to freeze it, one for the final
        if layout.live_text() != slot.shown:
            layout.freeze_live()

    # -- events ---------------------------------------------------------------------------

    def on_text(self, appended: str) -> None:
        self._layout.append(appended)
        self._freeze_for_cap()

    def on_status(self, call: int, status: str) -> None:
        self._layout.set_status(call, status)
        self._freeze_for_cap()

    def on_status_finished(self, call: int, status: str) -> None:
        # The line is edited in place at the draft's next (throttled) edit.
        self._layout.finish_status(call, status)
        self._freeze_for_cap()

    def on_round_ended(self) -> None:
        # A new round's tools begin: their status lines replace the last round's.
        self._layout.new_status_round()

    def on_restarted(self) -> None:
        self._layout.restart(self._transcript.round_start)
        self._clean = 0
        self._leave_assumed(len(self._layout.cuts))
        if self._in_flight is not None:  # a send in flight no longer shows the current text
            self._in_flight = replace(self._in_flight, end=-1)

    def on_end(self, ending: Ending) -> None:
        self._ended = True
        self._layout.end()
        if ending.kind == "refused":
            self._layout.refuse(ending.line)
            self._leave_assumed(0)
            self._supersede()
            return
        self._layout.suffix = ending.line if ending.kind == "interrupted" else None
        text = self._transcript.text
        if not text.strip():
            self._layout.lay_out_final("")
            self._supersede()
            return
        piece_id = next(self._piece_ids)
        self._guard, self._awaited = GuardPiece(piece_id, text), piece_id

    # -- the verdict ------------------------------------------------------------------------

    def guard_request(self) -> GuardPiece | None:
        return self._guard

    def guard_started(self, piece_id: int) -> None:
        self._guard = None

    def guarded(self, piece_id: int, text: str | None, *, withheld: bool) -> None:
        if piece_id != self._awaited:
            return  # not awaited (late): ignored
        self._guard = self._awaited = None
        if withheld:
            self._counters.pieces_withheld += 1
            self._layout.cuts = []
            self._layout.lay_out_final(WITHHELD_NOTICE, formatted=False)
            self._leave_assumed(0)
            self._supersede()
            return
        body = text if text is not None and text.strip() else ""
        if body != self._transcript.text:
            self._layout.cuts = []  # the hook rewrote it: lay the final text out afresh
            self._leave_assumed(0)
        self._layout.lay_out_final(body)
        self._supersede()
        self._clean = 0

    def _supersede(self) -> None:
        """``final_as_new_message``: the final text goes to new slots; the drafts wait to be
        deleted (module docstring)."""
        if not self._settings.final_as_new_message or self._superseded is not None:
            return
        self._superseded, self._slots, self._clean = self._slots, [], 0

    def _leave_assumed(self, index: int) -> None:
        """Messages from ``index`` on are laid out anew: those assumed landed (no id to edit or
        delete them by) are left as they stand, and the new layout goes below the last of them:
        the messages above it are deleted, since the reply laid out there would end above text
        it no longer holds (a failed attempt's, a rewritten one's)."""
        tail = self._slots[index:]
        assumed = [i for i, slot in enumerate(tail) if slot.state is SlotState.ASSUMED]
        if assumed:
            last = assumed[-1]
            self._stale.extend(slot for slot in tail[:last] if slot.writable)
            del self._slots[index:]
            self._slots.extend(tail[last + 1 :])
        self._clean = min(self._clean, index)

    # -- choosing the next write ----------------------------------------------------------

    def _edit_allowed(self, slot: Slot, live: bool, final: bool) -> bool:
        cap = self._settings.max_edits_per_message
        if cap is None:
            return True
        if live and not final:
            return slot.edits < _preview_edits(cap)
        # A frozen message normally needs one edit (its freezing edit) and keeps one for the
        # final; should retries use that one too, right content beats formatting.
        return slot.edits < cap

    def _scan(self, commit: bool) -> _InFlight | WriteKind | None:
        """The next write: with ``commit``, the write itself (recording what it finds shown);
        without, only its kind, and nothing changes."""
        layout = self._layout
        final = layout.final is not None
        if self._stale:  # retired messages go first, the last one first (the chat then
            return self._delete(self._stale[-1], commit)  # always shows a prefix)
        if self._ended and not final:
            return None  # the hook's verdict on the final text is awaited
        count = layout.count()
        for index in range(self._clean, count):
            slot = self._slots[index] if index < len(self._slots) else None
            state = slot.state if slot is not None else SlotState.EMPTY
            live = not final and index == len(layout.cuts)
            if state is SlotState.ASSUMED:
                if commit and index == self._clean:
                    self._clean += 1  # never written again
                continue
            if state is SlotState.ORPHANED and not final:
                return None  # previews stopped: see the module docstring
            if live and slot is not None and state is SlotState.SHOWN:
                if slot.version == layout.version:
                    continue  # the live draft has not changed since it was written
                if not commit:  # changed: an edit, unless its text turns out the same
                    if self._edit_allowed(slot, live, final):
                        return "edit"
                    continue
            target = layout.target(index)
            formatted = target.formatted and not (slot is not None and slot.plain)
            form = target.form if formatted else target.text
            if slot is not None and form == slot.abandoned:
                if commit and not live and index == self._clean:
                    self._clean += 1  # given up until its target changes (which resets this)
                continue
            if state in (SlotState.EMPTY, SlotState.ORPHANED):
                if not commit:
                    return "send"
                if slot is None:
                    slot = Slot()
                    self._slots.append(slot)
                send = SendMessage(target.text, formatted)
                if live:
                    span = layout.start(), self._transcript.length
                    return _InFlight(slot, form, layout.version, Write(send), *span)
                if not final:  # a frozen message: it holds text[previous cut:its cut]
                    span = layout.cuts[index - 1].cut if index else 0, layout.cuts[index].cut
                    return _InFlight(slot, form, layout.version, Write(send), *span)
                return _InFlight(slot, form, layout.version, Write(send, final))
            assert slot is not None and slot.message_id is not None
            if form == slot.shown:
                if commit and live:
                    slot.version = layout.version
                elif commit and index == self._clean:
                    self._clean += 1  # a frozen or final message showing its text stays so
                continue
            if self._edit_allowed(slot, live, final):
                if not commit:
                    return "edit"
                edit = EditMessage(slot.message_id, target.text, formatted)
                return _InFlight(slot, form, self._layout.version, Write(edit, final))
            if live and not final:
                continue  # the live draft keeps its preview until the final edit
            # No edit left for a frozen message or the final text (timeouts used them up):
            # it goes out as a new message, and the messages after it too; not when one
            # assumed landed follows (it cannot be deleted): then it keeps what it shows.
            if self._assumed_after(index):
                if commit:
                    self._give_up(slot, form)
                continue
            if not commit:
                return "send"
            self._retire(index)
            return self._scan(commit)
        for spare in self._slots[count:] if final else []:
            if spare.writable:
                return self._delete(spare, commit)
        if final and self._superseded and self._final_landed(count):
            for draft in self._superseded:
                if draft.writable:
                    return self._delete(draft, commit)
        return None

    def _final_landed(self, count: int) -> bool:
        """Every one of the ``count`` final messages was sent (a send that timed out counts:
        it is assumed landed)."""
        landed = (SlotState.SHOWN, SlotState.UNKNOWN, SlotState.ASSUMED)
        return len(self._slots) >= count and all(
            slot.state in landed for slot in self._slots[:count]
        )

    def _delete(self, slot: Slot, commit: bool) -> _InFlight | WriteKind:
        if not commit:
            return "delete"
        assert slot.message_id is not None
        return _InFlight(slot, "", self._layout.version, Write(DeleteMessage(slot.message_id)))

    def _assumed_after(self, index: int) -> bool:
        """A message assumed landed follows slot ``index``: the messages before it cannot be
        retired, since a new message goes below that one, which cannot be deleted."""
        return any(slot.state is SlotState.ASSUMED for slot in self._slots[index + 1 :])

    def _give_up(self, slot: Slot, form: str) -> None:
        """``slot`` keeps what it shows until its target changes."""
        slot.abandoned = form
        self._counters.writes_given_up += 1

    def _retire(self, index: int) -> None:
        """Slot ``index`` can no longer be edited: the old messages from it on are deleted, then
        their texts go out as new messages (never with a message assumed landed among them:
        see :meth:`_assumed_after`; a moved chat aside, where all of them are sent anew)."""
        self._counters.resent_as_new += 1
        self._clean = min(self._clean, index)
        self._stale.extend(slot for slot in self._slots[index:] if slot.writable)
        del self._slots[index:]

    def next_kind(self) -> WriteKind | None:
        found = self._scan(commit=False)
        assert not isinstance(found, _InFlight)
        return found

    def plan(self) -> Write | None:
        found = self._scan(commit=True)
        if not isinstance(found, _InFlight):
            return None
        self._in_flight = found
        return found.write

    # -- outcomes -------------------------------------------------------------------------

    def _take(self) -> _InFlight:
        flight, self._in_flight = self._in_flight, None
        assert flight is not None, "an outcome with no write in flight"
        return flight

    def succeeded(self, message_id: str | None) -> None:
        flight = self._take()
        slot, write = flight.slot, flight.write
        slot.attempts = 0
        match write.kind:
            case "delete":
                self._forget(slot)
                return
            case "send" if message_id is None:  # no id to edit it by: assumed landed
                advance(slot, "send_timed_out")
            case "send":
                advance(slot, "sent")
                slot.message_id, slot.edits = message_id, 0
            case "edit":
                advance(slot, "edited")
                slot.edits += 1
        slot.shown, slot.version = flight.form, flight.version
        self._freeze_for_cap()

    def failed(self, reason: WriteFailure) -> float:
        flight = self._take()
        slot, write = flight.slot, flight.write
        match FAILURE_EFFECTS[(write.kind, reason)]:
            case Effect.SHOWN:
                if write.kind == "delete":
                    self._forget(slot)
                    return 0.0
                advance(slot, "edited")  # "not modified": it shows that already, no edit made
                slot.shown, slot.version, slot.attempts = flight.form, flight.version, 0
                self._freeze_for_cap()
            case Effect.UNCONFIRMED:
                self._unconfirmed(flight)
            case Effect.RETRY:
                return self._refused(flight)
            case Effect.SHRINK:
                self._shrink(flight)
            case Effect.PLAIN:
                self._rejected(flight)
            case Effect.MOVED:
                self._moved(flight)
        return 0.0

    def deferred(self) -> None:
        self._take()  # the next plan carries the newest text

    def _unconfirmed(self, flight: _InFlight) -> None:
        slot, write = flight.slot, flight.write
        if write.kind == "send":
            self._counters.unconfirmed_sends += 1
            if write.final or self._pin(flight):
                advance(slot, "send_timed_out")
            else:
                advance(slot, "preview_send_timed_out")
            slot.shown = flight.form
        elif write.kind == "edit":
            slot.edits += 1
            advance(slot, "edit_timed_out")
            if self._attempt_failed(slot):
                slot.abandoned = flight.form
        elif self._attempt_failed(slot):
            self._forget(slot)

    def _pin(self, flight: _InFlight) -> bool:
        """A preview send timed out: assumed landed, its message holds the text it was sent with
        for good (it has no id to edit it by), and the reply goes on after that text in a new
        message. False when the layout moved under it (a restart, a shrink) and it cannot be
        kept: then it is an orphan (module docstring)."""
        slot = flight.slot
        if flight.end < 0 or self._ended or slot not in self._slots:
            return False
        if not self._transcript.tail(flight.start)[: flight.end - flight.start].strip():
            # It showed no text of the reply (a status line alone): it is left as it stands,
            # and the draft goes on in a new message.
            self._slots.remove(slot)
            return True
        return self._layout.pin(self._slots.index(slot), flight.start, flight.end, flight.form)

    def _refused(self, flight: _InFlight) -> float:
        """Did not land: back off and retry; then a new message (module docstring)."""
        slot, write = flight.slot, flight.write
        self._counters.writes_refused += 1
        slot.attempts += 1
        if slot.attempts < MAX_ATTEMPTS:
            return REFUSED_BACKOFF_SECS[slot.attempts - 1]
        slot.attempts = 0
        if write.kind == "edit" and self._retirable(slot):
            self._retire(self._slots.index(slot))
        elif write.kind == "delete":
            self._counters.writes_given_up += 1
            self._forget(slot)
        else:
            self._give_up(slot, flight.form)
        return 0.0

    def _retirable(self, slot: Slot) -> bool:
        return slot in self._slots and not self._assumed_after(self._slots.index(slot))

    def _moved(self, flight: _InFlight) -> None:
        """The chat moved: a send goes again (to the new chat); a message of the old chat is
        retired (its text and those after it go out anew there), without a delete of it."""
        slot, write = flight.slot, flight.write
        if write.kind == "delete":
            self._forget(slot)
        elif write.kind == "edit" and slot in self._slots:
            self._retire(self._slots.index(slot))
            if slot in self._stale:
                self._stale.remove(slot)

    def _rejected(self, flight: _InFlight) -> None:
        slot, write = flight.slot, flight.write
        if write.formatted and not slot.plain:
            slot.plain = True
            self._counters.plain_fallbacks += 1
        elif write.kind == "edit" and write.final and self._retirable(slot):
            self._retire(self._slots.index(slot))
        elif write.kind == "delete":
            self._counters.writes_given_up += 1
            self._forget(slot)
        else:
            self._give_up(slot, flight.form)

    def _attempt_failed(self, slot: Slot) -> bool:
        """Count a timeout; True when the write is given up."""
        slot.attempts += 1
        if slot.attempts < MAX_ATTEMPTS:
            return False
        slot.attempts = 0
        self._counters.writes_given_up += 1
        return True

    def _forget(self, slot: Slot) -> None:
        if slot in self._stale:
            self._stale.remove(slot)
        if slot.writable:
            advance(slot, "deleted")

    def _shrink(self, flight: _InFlight) -> None:
        """The platform counted more than we did: lay this message and the next out again with
        a quarter less room."""
        slot = flight.slot
        room = min(self._layout.max, measure(self._limits, flight.write.text)) * 3 // 4
        index = self._slots.index(slot) if slot in self._slots else len(self._slots)
        if room < MIN_ROOM or not self._layout.shrink(index, room):
            slot.abandoned = flight.form
            self._counters.writes_given_up += 1
            return
        self._clean = min(self._clean, index)
        self._leave_assumed(index + 1)


def _preview_edits(cap: int) -> int:
    """Edits of one message previews may use: two are kept, to freeze it and for the final."""
    return cap - 2 if cap >= 3 else 0
