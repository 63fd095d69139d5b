"""The ``partial`` mode planner: one edited draft, frozen and continued when it outgrows the limit.

Theory of operation
-------------------
The reply's visible text (the :class:`~orchestrator.delivery.planning.Transcript`) is laid out
over *slots* (:mod:`orchestrator.delivery.slots`), one per chat message. ``cuts`` are the
offsets where a message was *frozen*: slot ``i`` holds ``text[cuts[i-1]:cuts[i]]`` (fences
balanced by :func:`~orchestrator.delivery.splitting.render_chunk`, rendered once, when it froze),
and the last slot, the *live* draft, holds the rest, followed by the tool status line after a
blank line while a tool runs. Cuts only ever grow, except on ``Restart`` (cuts past the round's
start are forgotten; their messages become spares, reused as the text grows again or deleted at
the end) and on ``too_long`` (the rejected message and those after it are laid out again with
less room).

The layout is kept up to date as the text changes, at a cost that does not grow with the
answer: an append adds its length to the live draft's measure; only when that passes the room
is the live text read and frozen. Frozen messages are never laid out again before the end. The
live draft carries a *version*, bumped by every change of what it should show; its text is
composed only when a write of it is planned. A query (:meth:`DraftPlanner.next_kind`) never
changes state; it may answer "edit" for a changed version whose text turns out to equal what
is shown, and then :meth:`DraftPlanner.plan` (a command) records that and writes nothing.

Every time a write may start, the first slot whose message does not show its desired form gets
the one write: a send when it has no message, else an edit. So a frozen message gets its freezing
edit before the next message is sent, and an edit equal to what is shown is never sent.

Room: the live draft keeps ``STATUS_ROOM`` units free for a status line or the interrupted
marker; when the text, or the text plus the status, does not fit, the draft is frozen at the best
cut (paragraph, line, word, hard) within the full limit and the rest continues in a new message.

Edits per message (Matrix ``max_edits_per_message``): previews may use ``cap - 2`` edits of a
message; the next change freezes it with one more edit (at the best cut of the text so far), and
the last edit is kept for the final text (under a cap of 3 there is none to spare: the message
keeps its first preview until the final edit).

The end: the final text is the hook's verdict on the whole text (``GuardPiece``, once; no write
while it is awaited), laid out on the same cuts when the hook left it unchanged (else afresh),
with the interrupted marker after a blank line when the answer was interrupted. Each message is
formatted when the channel's renderer says its formatted form fits, else plain. Surplus drafts are
deleted. A refusal, or a hook that failed (``PieceWithheld``), edits the first message to the
notice and deletes the others; a hook that cancels the text deletes the drafts.

Failures, by :data:`~orchestrator.delivery.planning.FAILURE_EFFECTS`: an edit that timed out is
retried with the newest text (``UNKNOWN``: not an identical edit), up to ``MAX_ATTEMPTS``. A send
that timed out may have landed without our knowing its id: we never send a second draft, previews
stop (``ORPHANED``), and at the end the final text is sent as a new message. A write refused
outright (5xx, connection refused, "message to edit not found") is retried after
``REFUSED_BACKOFF_SECS``; after ``MAX_ATTEMPTS`` the message is *retired*: its text and the
messages after it go out as new messages, after the retired ones were deleted (so the chat
keeps its order and never shows a stale preview above the answer). A rejected formatted write
is retried once plain; a rejected plain preview is given up until its text changes, a rejected
final edit is retired too: a shorter preview never stands as if it were the answer.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

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
    PARAGRAPH_BREAK,
    REFUSED_BACKOFF_SECS,
    WITHHELD_NOTICE,
    Counters,
    Effect,
    Ending,
    Transcript,
    Write,
    WriteKind,
    clip_line,
    fit_rendering,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.slots import Slot, SlotState, advance
from orchestrator.delivery.splitting import Fence, find_cut, measure, render_chunk

__all__ = ["MIN_ROOM", "STATUS_ROOM", "DraftPlanner"]

STATUS_ROOM = 100
"""Units a growing draft keeps free for a status line or the interrupted marker (at most a
quarter of the limit)."""

MIN_ROOM = 16
"""``too_long`` shrinks the room by a quarter each time, down to this; then the write is given
up."""


@dataclass(frozen=True, slots=True)
class _Frozen:
    """A frozen message: ``text[previous cut:cut]`` rendered as ``body``; ``fence`` is open at
    ``cut``."""

    cut: int
    fence: Fence | None
    body: str


@dataclass(frozen=True, slots=True)
class _Target:
    """What one message should show: ``text`` written ``formatted`` shows ``form``."""

    text: str
    formatted: bool
    form: str


@dataclass(frozen=True, slots=True)
class _InFlight:
    slot: Slot
    form: str
    version: int
    write: Write


def compose(limits_max: int, tail: str, fence: Fence | None, suffix: str | None) -> str:
    """The live draft: ``tail`` (fence reopened; closed when ``suffix`` follows), then
    ``suffix`` after a blank line."""
    if not suffix:  # nothing to close: no need to scan for fences
        return (fence.reopen if fence else "") + tail if tail.strip() else ""
    body = ""
    if tail.strip():
        body = render_chunk(tail, 0, len(tail), fence, close=True)[0]
    return body + PARAGRAPH_BREAK + suffix if body else suffix


class DraftPlanner:
    """Plans the writes of ``partial`` mode (see the module docstring)."""

    def __init__(
        self, settings: DeliverySettings, transcript: Transcript, counters: Counters
    ) -> None:
        self._settings = settings
        self._limits = settings.limits
        self._transcript = transcript
        self._counters = counters
        self._max = settings.limits.max_length
        self._cuts: list[_Frozen] = []
        self._live_units = 0
        """``measure`` of the live text, ``text[start:]`` (the reopened fence not included)."""
        self._live_has_text = False
        self._version = 0
        self._memo: tuple[int, str] = (-1, "")
        self._status: str | None = None
        self._slots: list[Slot] = []
        self._stale: list[Slot] = []
        """Retired messages, deleted before anything else is written."""
        self._ended = False
        self._final: list[_Target] | None = None
        self._final_cuts: list[_Frozen] = []
        self._final_body: str | None = None
        """What the final layout cut (``None`` for a refusal)."""
        self._final_formatted = True
        self._suffix: str | None = None
        self._guard: GuardPiece | None = None
        self._awaited: int | None = None
        self._piece_ids = itertools.count(1)
        self._in_flight: _InFlight | None = None
        self._clean = 0
        """Leading frozen messages known to show their text: the scan starts after them."""

    # -- geometry ---------------------------------------------------------------------------

    @property
    def _live_room(self) -> int:
        return self._max - min(STATUS_ROOM, self._max // 4)

    def _start(self) -> int:
        return self._cuts[-1].cut if self._cuts else 0

    def _fence_in(self) -> Fence | None:
        return self._cuts[-1].fence if self._cuts else None

    def _reset_live(self) -> None:
        """Measure the live text again (after its start moved back)."""
        self._transcript.rebase(self._start())
        tail = self._transcript.tail(self._start())
        self._live_units = measure(self._limits, tail)
        self._live_has_text = bool(tail.strip())
        self._version += 1

    def _live_text(self) -> str:
        """The live draft's text (composed once per version)."""
        version, text = self._memo
        if version != self._version:
            status = clip_line(self._limits, self._status, self._max) if self._status else None
            text = compose(
                self._max, self._transcript.tail(self._start()), self._fence_in(), status
            )
            self._memo = (self._version, text)
        return text

    def _extend(self) -> None:
        """Freeze the live draft until its text fits in the live room and, with the status
        line, in the limit. Costs nothing but a comparison while it fits without a status."""
        while self._live_has_text:
            fence = self._fence_in()
            reopen = measure(self._limits, fence.reopen) if fence else 0
            if self._status is None and reopen + self._live_units <= self._live_room:
                return
            start = self._start()
            tail = self._transcript.tail(start)
            fits = reopen + self._live_units <= self._live_room
            if fits and self._status is not None:
                status = clip_line(self._limits, self._status, self._max)
                fits = measure(self._limits, compose(self._max, tail, fence, status)) <= self._max
            if fits:
                return
            self._freeze(start, tail, fence)

    def _freeze(self, start: int, tail: str, fence: Fence | None) -> None:
        chunk = find_cut(self._limits, tail, 0, len(tail), fence, self._max)
        body = render_chunk(tail, 0, chunk.cut, fence)[0]
        self._cuts.append(_Frozen(start + chunk.cut, chunk.fence, body))
        rest = tail[chunk.cut :]
        self._live_units = measure(self._limits, rest)
        self._live_has_text = bool(rest.strip())
        self._version += 1
        self._transcript.settle(start + chunk.cut)

    def _freeze_for_cap(self) -> None:
        """Freeze the live draft when its message has no preview edit left (module docstring)."""
        cap = self._settings.max_edits_per_message
        live = len(self._cuts)
        if cap is None or cap < 3 or self._ended or live >= len(self._slots):
            return  # below 3 edits there is none to spare: the preview stays until the end
        slot = self._slots[live]
        if not slot.writable or slot.edits != cap - 2 or not self._live_has_text:
            return  # one edit to freeze it, one for the final
        if self._live_text() == slot.shown:
            return
        start = self._start()
        self._freeze(start, self._transcript.tail(start), self._fence_in())

    # -- events ---------------------------------------------------------------------------

    def on_text(self, appended: str) -> None:
        self._status = None  # the next text replaces the status line
        self._live_units += measure(self._limits, appended)
        self._live_has_text = self._live_has_text or bool(appended.strip())
        self._version += 1
        self._extend()
        self._freeze_for_cap()

    def on_status(self, status: str) -> None:
        # A status line takes at most half a message.
        self._status = clip_line(self._limits, status, self._limits.max_length // 2)
        self._version += 1
        self._extend()
        self._freeze_for_cap()

    def on_round_ended(self) -> None:
        return None

    def on_restarted(self) -> None:
        start = self._transcript.round_start
        self._cuts = [frozen for frozen in self._cuts if frozen.cut <= start]
        self._clean = 0
        self._status = None
        self._reset_live()
        self._extend()

    def on_end(self, ending: Ending) -> None:
        self._ended = True
        self._status = None
        self._version += 1
        if ending.kind == "refused":
            self._final = [_plain(clip_line(self._limits, ending.line, self._max))]
            return
        self._suffix = ending.line if ending.kind == "interrupted" else None
        text = self._transcript.text
        if not text.strip():
            self._lay_out_final("")
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
            self._cuts = []
            self._lay_out_final(WITHHELD_NOTICE, formatted=False)
            return
        body = text if text is not None and text.strip() else ""
        if body != self._transcript.text:
            self._cuts = []  # the hook rewrote it: lay the final text out afresh
        self._lay_out_final(body)

    def _lay_out_final(
        self, body: str, *, formatted: bool = True, keep: list[_Frozen] | None = None
    ) -> None:
        """The final targets: the cuts ``keep`` (default: the preview's cuts) kept, the rest of
        ``body`` cut with the full limit and the suffix after it; each message formatted where
        its rendering fits."""
        cuts = list(self._cuts if keep is None else keep)
        start = cuts[-1].cut if cuts else 0
        fence = cuts[-1].fence if cuts else None
        suffix = clip_line(self._limits, self._suffix, self._max) if self._suffix else None
        while body[start:].strip():
            tail = body[start:]
            rendered = render_chunk(tail, 0, len(tail), fence, close=False)[0]
            if measure(self._limits, compose(self._max, tail, fence, suffix)) <= self._max and (
                measure(self._limits, rendered) <= self._max
            ):
                break
            chunk = find_cut(self._limits, tail, 0, len(tail), fence, self._max)
            cuts.append(
                _Frozen(start + chunk.cut, chunk.fence, render_chunk(tail, 0, chunk.cut, fence)[0])
            )
            start, fence = start + chunk.cut, chunk.fence
        texts = [frozen.body for frozen in cuts]
        last = compose(self._max, body[start:], fence, suffix)
        if last:
            texts.append(last)
        self._final_cuts, self._final_body, self._final_formatted = cuts, body, formatted
        self._final = [self._formatted(text) if formatted else _plain(text) for text in texts]

    def _formatted(self, text: str) -> _Target:
        formatted, form = fit_rendering(self._settings.rendering(text), text, self._max)
        return _Target(text, formatted, form)

    # -- choosing the next write ----------------------------------------------------------

    def _count(self) -> int:
        if self._final is not None:
            return len(self._final)
        return len(self._cuts) + (1 if self._live_has_text or self._status else 0)

    def _target(self, index: int) -> _Target:
        if self._final is not None:
            return self._final[index]
        if index < len(self._cuts):
            return _plain(self._cuts[index].body)
        return _plain(self._live_text())

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
        final = self._final is not None
        if self._stale:  # retired messages go first, the last one first (the chat then
            return self._delete(self._stale[-1], commit)  # always shows a prefix)
        if self._ended and not final:
            return None  # the hook's verdict on the final text is awaited
        count = self._count()
        for index in range(0 if final else self._clean, count):
            slot = self._slots[index] if index < len(self._slots) else None
            state = slot.state if slot is not None else SlotState.EMPTY
            live = not final and index == len(self._cuts)
            if state is SlotState.ASSUMED:
                continue
            if state is SlotState.ORPHANED and not final:
                return None  # previews stopped: see the module docstring
            if live and slot is not None and state is SlotState.SHOWN:
                if slot.version == self._version:
                    continue  # the live draft has not changed since it was written
                if not commit:  # changed: an edit, unless its text turns out the same
                    if self._edit_allowed(slot, live, final):
                        return "edit"
                    continue
            target = self._target(index)
            formatted = target.formatted and not (slot is not None and slot.plain)
            form = target.form if formatted else target.text
            if slot is not None and form == slot.abandoned:
                continue
            if state in (SlotState.EMPTY, SlotState.ORPHANED):
                if not commit:
                    return "send"
                if slot is None:
                    slot = Slot()
                    self._slots.append(slot)
                send = SendMessage(target.text, formatted)
                return _InFlight(slot, form, self._version, Write(send, final))
            assert slot is not None and slot.message_id is not None
            if form == slot.shown:
                if commit and live:
                    slot.version = self._version
                elif commit and not final and index == self._clean:
                    self._clean += 1  # a frozen message showing its text stays so
                continue
            if self._edit_allowed(slot, live, final):
                if not commit:
                    return "edit"
                edit = EditMessage(slot.message_id, target.text, formatted)
                return _InFlight(slot, form, self._version, Write(edit, final))
            if live and not final:
                continue  # the live draft keeps its preview until the final edit
            # No edit left for a frozen message or the final text (timeouts used them up):
            # it goes out as a new message, and the messages after it too.
            if not commit:
                return "send"
            self._retire(index)
            return self._scan(commit)
        for spare in self._slots[count:] if final else []:
            if spare.writable:
                return self._delete(spare, commit)
        return None

    def _delete(self, slot: Slot, commit: bool) -> _InFlight | WriteKind:
        if not commit:
            return "delete"
        assert slot.message_id is not None
        return _InFlight(slot, "", self._version, Write(DeleteMessage(slot.message_id)))

    def _retire(self, index: int) -> None:
        """Slot ``index`` can no longer be edited: the old messages from it on are deleted, then
        their texts go out as new messages."""
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
                advance(slot, "final_send_timed_out")
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
        return 0.0

    def deferred(self) -> None:
        self._take()  # the next plan carries the newest text

    def _unconfirmed(self, flight: _InFlight) -> None:
        slot, write = flight.slot, flight.write
        if write.kind == "send":
            self._counters.unconfirmed_sends += 1
            advance(slot, "final_send_timed_out" if write.final else "preview_send_timed_out")
            slot.shown = flight.form
        elif write.kind == "edit":
            slot.edits += 1
            advance(slot, "edit_timed_out")
            if self._attempt_failed(slot):
                slot.abandoned = flight.form
        elif self._attempt_failed(slot):
            self._forget(slot)

    def _refused(self, flight: _InFlight) -> float:
        """Did not land: back off and retry; then a new message (module docstring)."""
        slot, write = flight.slot, flight.write
        self._counters.writes_refused += 1
        slot.attempts += 1
        if slot.attempts < MAX_ATTEMPTS:
            return REFUSED_BACKOFF_SECS[slot.attempts - 1]
        slot.attempts = 0
        if write.kind == "edit" and slot in self._slots:
            self._retire(self._slots.index(slot))
        else:
            self._counters.writes_given_up += 1
            if write.kind == "delete":
                self._forget(slot)
            else:
                slot.abandoned = flight.form
        return 0.0

    def _rejected(self, flight: _InFlight) -> None:
        slot, write = flight.slot, flight.write
        if write.formatted and not slot.plain:
            slot.plain = True
            self._counters.plain_fallbacks += 1
        elif write.kind == "edit" and write.final and slot in self._slots:
            self._retire(self._slots.index(slot))
        else:
            self._counters.writes_given_up += 1
            if write.kind == "delete":
                self._forget(slot)
            else:
                slot.abandoned = flight.form

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
        room = min(self._max, measure(self._limits, flight.write.text)) * 3 // 4
        index = self._slots.index(slot) if slot in self._slots else len(self._slots)
        if room < MIN_ROOM or (self._final is not None and self._final_body is None):
            slot.abandoned = flight.form
            self._counters.writes_given_up += 1
            return
        self._max = room
        if self._final is not None and self._final_body is not None:
            keep = self._final_cuts[:index]
            self._lay_out_final(self._final_body, formatted=self._final_formatted, keep=keep)
            return
        self._cuts = self._cuts[:index]
        self._clean = min(self._clean, index)
        self._reset_live()
        self._extend()


def _plain(text: str) -> _Target:
    return _Target(text, False, text)


def _preview_edits(cap: int) -> int:
    """Edits of one message previews may use: two are kept, to freeze it and for the final."""
    return cap - 2 if cap >= 3 else 0
