"""The ``partial`` mode planner: one edited draft, frozen and continued when it outgrows the limit.

Theory of operation
-------------------
The layout — where the reply's messages are cut, what each should show, the final targets — is
kept by :class:`~orchestrator.delivery.draft_layout.DraftLayout`, incrementally. This planner
holds one *slot* (:mod:`orchestrator.delivery.slots`) per chat message and decides the writes
that make the chat show the layout. On ``Restart`` the messages past the round's start become
spares, reused as the text grows again or deleted at the end; on ``too_long`` the rejected
message and those after it are laid out again with less room.

The query and the command walk the same steps, found by one pure generator
(:meth:`DraftPlanner._steps`, which reads and never writes): *records* of what the scan found
(``_Clean``: a frozen message shows its text for good; ``_Mark``: the live draft shows the
current version; ``_GiveUp``) and at most one step naming a write (``_Planned``, ``_Retire``,
or ``_Guess`` for a live draft whose version changed). The query
(:meth:`DraftPlanner.next_kind`) answers the kind of the first such step and changes nothing;
it may answer "edit" for a live draft whose text turns out to equal what is shown. The command
(:meth:`DraftPlanner.plan`) applies each record as it comes (the steps after it see it), so it
records that draft as shown and writes nothing; it starts the planned write, or retires and
looks again. One ``plan`` per poll: it goes on to the end itself.

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
from collections.abc import Iterator
from dataclasses import dataclass, replace

from orchestrator.delivery.draft_layout import STATUS_ROOM, DraftLayout, Frozen
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


@dataclass(frozen=True, slots=True)
class _Planned:
    """The next write as the query found it: ``slot`` ``None`` for a message not sent yet (the
    commit gives it a slot); the rest as :class:`_InFlight`."""

    slot: Slot | None
    form: str
    version: int
    write: Write
    start: int = 0
    end: int = -1


@dataclass(frozen=True, slots=True)
class _Guess:
    """The live draft changed: ``kind`` unless its text turns out the same as shown (the
    query's answer; the commit composes the text and goes on)."""

    kind: WriteKind


@dataclass(frozen=True, slots=True)
class _Stop:
    """Nothing is written now (previews stopped at an orphan)."""


@dataclass(frozen=True, slots=True)
class _Clean:
    """Record: the frozen message ``index`` shows its text for good (or was given up): later
    scans start after it."""

    index: int


@dataclass(frozen=True, slots=True)
class _Mark:
    """Record: the live draft shows the current version already."""

    slot: Slot


@dataclass(frozen=True, slots=True)
class _GiveUp:
    """Record: ``slot`` keeps what it shows until its target changes."""

    slot: Slot
    form: str


@dataclass(frozen=True, slots=True)
class _Retire:
    """Command: slot ``index`` can no longer be edited: retire it (a send follows)."""

    index: int


_PASSING = (_Clean, _Mark, _GiveUp, _Guess)
"""Steps after which the scan goes on (the query stops at a ``_Guess``; the commit does not)."""
_GUESS_EDIT = _Guess("edit")
_STOP = _Stop()
_Step = _Planned | _Guess | _Stop | _Clean | _Mark | _GiveUp | _Retire


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
        self._layout.end(ending.line if ending.kind == "interrupted" else None)
        if ending.kind == "refused":
            self._layout.refuse(ending.line)
            self._leave_assumed(0)
            self._supersede()
            return
        text = self._transcript.text
        if not text.strip():
            self._layout.lay_out_final("")
            self._supersede()
            return
        piece_id = next(self._piece_ids)
        span = (0, self._transcript.emitted_offset(len(text)))
        self._guard, self._awaited = GuardPiece(piece_id, text, span), piece_id

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
            self._layout.lay_out_final(WITHHELD_NOTICE, formatted=False, keep=[])
            self._leave_assumed(0)
            self._supersede()
            return
        body = text if text is not None and text.strip() else ""
        keep: list[Frozen] | None = None  # the preview's cuts
        if body != self._transcript.text:
            keep = []  # the hook rewrote it: lay the final text out afresh
            self._leave_assumed(0)
        self._layout.lay_out_final(body, keep=keep)
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

    def _steps(self) -> Iterator[_Step]:
        """The steps to the next write, in order: a pure query (it reads, never writes).

        :meth:`next_kind` answers from the first step that names a write (:class:`_Guess`,
        :class:`_Retire` or a :class:`_Planned` write); :meth:`plan` applies each record
        (:class:`_Clean`, :class:`_Mark`, :class:`_GiveUp`) as it comes, so the steps after it
        see it, and starts the planned write (after a :class:`_Retire`, it looks again)."""
        layout = self._layout
        final = layout.final is not None
        if self._stale:  # retired messages go first, the last one first (the chat then
            yield self._delete(self._stale[-1])  # always shows a prefix)
            return
        if self._ended and not final:
            return  # the hook's verdict on the final text is awaited
        count = layout.count()
        for index in range(self._clean, count):
            slot = self._slots[index] if index < len(self._slots) else None
            live = not final and index == len(layout.cuts)
            for step in self._slot_steps(index, slot, live, final):
                yield step
                if not isinstance(step, _PASSING):
                    return
        if final:
            for spare in self._slots[count:]:
                if spare.writable:
                    yield self._delete(spare)
                    return
            if self._superseded and self._final_landed(count):
                for draft in self._superseded:
                    if draft.writable:
                        yield self._delete(draft)
                        return

    def _slot_steps(
        self, index: int, slot: Slot | None, live: bool, final: bool
    ) -> Iterator[_Step]:
        """The steps for slot ``index`` (``None``: no message yet): records, then at most one
        step that names a write (see :meth:`_steps`); none when it shows what it should."""
        state = slot.state if slot is not None else SlotState.EMPTY
        if state is SlotState.ASSUMED:
            if index == self._clean:
                yield _Clean(index)  # never written again
            return
        if state is SlotState.ORPHANED and not final:
            yield _STOP  # previews stopped: see the module docstring
            return
        layout = self._layout
        if live and slot is not None and state is SlotState.SHOWN:
            if slot.version == layout.version:
                return  # the live draft has not changed since it was written
            # Changed: an edit, unless its text turns out the same (the query does not compose
            # the text to know; the commit does, below).
            if self._edit_allowed(slot, live, final):
                yield _GUESS_EDIT
        target = layout.target(index)
        formatted = target.formatted and not (slot is not None and slot.plain)
        form = target.form if formatted else target.text
        if slot is not None and form == slot.abandoned:
            if not live and index == self._clean:
                yield _Clean(index)  # given up until its target changes (which resets this)
            return
        if state in (SlotState.EMPTY, SlotState.ORPHANED):
            send = SendMessage(target.text, formatted)
            if live:
                span = layout.start(), self._transcript.length
                yield _Planned(slot, form, layout.version, Write(send), *span)
            elif not final:  # a frozen message: it holds text[previous cut:its cut]
                span = layout.cuts[index - 1].cut if index else 0, layout.cuts[index].cut
                yield _Planned(slot, form, layout.version, Write(send), *span)
            else:
                yield _Planned(slot, form, layout.version, Write(send, final))
            return
        assert slot is not None and slot.message_id is not None
        if form == slot.shown:
            if live:
                yield _Mark(slot)
            elif index == self._clean:
                yield _Clean(index)  # a frozen or final message showing its text stays so
            return
        if self._edit_allowed(slot, live, final):
            edit = EditMessage(slot.message_id, target.text, formatted)
            yield _Planned(slot, form, layout.version, Write(edit, final))
            return
        if live and not final:
            return  # the live draft keeps its preview until the final edit
        # No edit left for a frozen message or the final text (timeouts used them up):
        # it goes out as a new message, and the messages after it too; not when one
        # assumed landed follows (it cannot be deleted): then it keeps what it shows.
        if self._assumed_after(index):
            yield _GiveUp(slot, form)
            return
        yield _Retire(index)

    def _final_landed(self, count: int) -> bool:
        """Every one of the ``count`` final messages was sent (a send that timed out counts:
        it is assumed landed)."""
        landed = (SlotState.SHOWN, SlotState.UNKNOWN, SlotState.ASSUMED)
        return len(self._slots) >= count and all(
            slot.state in landed for slot in self._slots[:count]
        )

    def _delete(self, slot: Slot) -> _Planned:
        assert slot.message_id is not None
        return _Planned(slot, "", self._layout.version, Write(DeleteMessage(slot.message_id)))

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
        """The kind of the next write, or ``None``: a query, it changes nothing. It may answer
        ``"edit"`` for a live draft whose text turns out to equal what it shows (module
        docstring)."""
        live = self._live_only()
        if live is not None:  # the scan's most common case, without walking its steps
            if live.version == self._layout.version:
                return None  # the live draft has not changed since it was written
            if self._edit_allowed(live, True, False):
                return "edit"
        for step in self._steps():
            match step:
                case _Guess(kind=kind):
                    return kind
                case _Retire():
                    return "send"
                case _Planned(write=write):
                    return write.kind
                case _Stop():
                    return None
                case _:
                    pass  # a record: the query skips it
        return None

    def _live_only(self) -> Slot | None:
        """The live draft's slot when it is all the scan has to look at (while the answer runs:
        nothing to delete, every frozen message clean, the draft shown); else ``None``."""
        layout = self._layout
        index = len(layout.cuts)
        if self._stale or self._ended or self._clean != index or layout.count() != index + 1:
            return None
        slot = self._slots[index] if index < len(self._slots) else None
        return slot if slot is not None and slot.state is SlotState.SHOWN else None

    def plan(self) -> Write | None:
        """The next write, started (``None``: nothing to write): a command. It applies the
        records on the way (what it found shown, given up, retired)."""
        while True:
            for step in self._steps():
                match step:
                    case _Clean(index=index):
                        self._clean = index + 1
                    case _Mark(slot=slot):
                        slot.version = self._layout.version
                    case _GiveUp(slot=slot, form=form):
                        self._give_up(slot, form)
                    case _Retire(index=index):
                        self._retire(index)
                        break  # the layout of slots changed: look again
                    case _Planned():
                        self._in_flight = self._start(step)
                        return step.write
                    case _Guess() | _Stop():
                        pass
            else:
                return None

    def _start(self, planned: _Planned) -> _InFlight:
        slot = planned.slot
        if slot is None:  # a message not sent yet: its slot begins
            slot = Slot()
            self._slots.append(slot)
        return _InFlight(
            slot, planned.form, planned.version, planned.write, planned.start, planned.end
        )

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
