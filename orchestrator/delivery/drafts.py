"""The ``partial`` mode planner: one edited draft, frozen and continued when it outgrows the limit.

Theory of operation
-------------------
The reply's visible text (the :class:`~orchestrator.delivery.planning.Transcript`) is laid out
over *slots*, one per chat message. ``cuts`` are the offsets where a message was *frozen*:
slot ``i`` holds ``text[cuts[i-1]:cuts[i]]`` (fences balanced by
:func:`~orchestrator.delivery.splitting.render_chunk`), and the last slot, the *live* draft, holds
the rest, followed by the tool status line after a blank line while a tool runs. Cuts only ever
grow, except on ``Restart`` (cuts past the round's start are forgotten; their messages become
spares, reused as the text grows again or deleted at the end) and on ``too_long`` (the rejected
message and those after it are laid out again with less room).

Every time a write may start, the desired text of each slot is computed afresh from the current
text — latest text wins, nothing is queued — and the first slot whose message does not already
show its desired rendering gets the one write: a send when it has no message, else an edit.
So a frozen message gets its freezing edit before the next message is sent, and an edit equal to
what is shown is never sent.

Room: the live draft keeps ``STATUS_ROOM`` units free for a status line or the interrupted
marker; when the text, or the text plus the status, does not fit, the draft is frozen at the best
cut (paragraph, line, word, hard) within the full limit and the rest continues in a new message.

Edits per message (Matrix ``max_edits_per_message``): previews may use ``cap - 2`` edits of a
message; the next change freezes it with one more edit (at the best cut of the text so far), and
the last edit is kept for the final text (under a cap of 3 there is none to spare: the message
keeps its first preview until the final edit). When timeouts used up that last edit, the last
message is deleted and its final text sent anew; an earlier one is left as it is (re-sending it
would break the order), and the write counted as given up.

The end: the final text is ``guard_piece(text)`` (once), formatted, laid out on the same cuts when
the hook left it unchanged (else afresh), with the interrupted marker after a blank line when the
answer was interrupted; surplus drafts are deleted. A refusal edits the first message to the
notice and deletes the others. A hook that cancels the text deletes the drafts.

Failures: ``timeout`` on an edit retries the newest text for that message (the old state is
unknown, so it is not an identical edit), up to ``MAX_ATTEMPTS`` in a row. ``timeout`` on a send
may have landed without our knowing its id: we never send a second draft. Previews stop (we
cannot edit what we cannot address), and at the end the final text is sent as a new message: the
answer is delivered once, and at most a stale preview remains above it. A final send that timed
out is assumed to have landed. ``gone`` (the user deleted the message) makes that slot send a new
message. ``failed`` on a formatted write retries it once plain, then gives that text up.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.delivery.events import DeleteMessage, EditMessage, SendMessage, WriteFailure
from orchestrator.delivery.planning import (
    MAX_ATTEMPTS,
    PARAGRAPH_BREAK,
    Counters,
    Ending,
    PlannedWrite,
    Transcript,
    WriteKind,
    clip_line,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import Chunk, find_cut, measure, render_chunk
from orchestrator.policy.reply import PieceGuard

__all__ = ["MIN_ROOM", "STATUS_ROOM", "DraftPlanner"]

STATUS_ROOM = 100
"""Units a growing draft keeps free for a status line or the interrupted marker (at most a
quarter of the limit)."""

MIN_ROOM = 16
"""``too_long`` shrinks the room by a quarter each time, down to this; then the write is given
up."""


@dataclass(frozen=True, slots=True)
class _Target:
    """What one message should show."""

    text: str
    formatted: bool


@dataclass(eq=False, slots=True)
class _Slot:
    message_id: str | None = None
    shown: str | None = None
    """Rendered form of what the message shows; ``None`` when unknown (an edit timed out)."""
    edits: int = 0
    orphan: bool = False
    """A draft send timed out: the message may exist but we have no id."""
    unconfirmed: bool = False
    """A final send timed out: assumed landed."""
    plain: bool = False
    attempts: int = 0
    abandoned: str | None = None
    """A rendering given up on; tried again only when the desired text changes."""


@dataclass(frozen=True, slots=True)
class _SlotWrite:
    slot: _Slot
    rendered: str


class DraftPlanner:
    """Plans the writes of ``partial`` mode (see the module docstring)."""

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
        self._cuts: list[Chunk] = []
        self._slots: list[_Slot] = []
        self._status: str | None = None
        self._final: list[_Target] | None = None
        self._final_text = ""
        self._final_suffix: str | None = None

    # -- events ---------------------------------------------------------------------------

    def on_text(self) -> None:
        self._status = None  # the next text replaces the status line

    def on_status(self, status: str) -> None:
        # A status line takes at most half a message.
        self._status = clip_line(self._limits, status, self._limits.max_length // 2)

    def on_round_ended(self) -> None:
        return None

    def on_restarted(self) -> None:
        start = self._transcript.round_start
        self._cuts = [chunk for chunk in self._cuts if chunk.cut <= start]
        self._status = None

    def on_end(self, ending: Ending) -> None:
        self._status = None
        if ending.kind == "refused":
            self._final = [_Target(clip_line(self._limits, ending.line, self._max), False)]
            return
        text = self._transcript.text
        body = ""
        if text.strip():
            guarded = self._guard.guard_piece(text)
            body = guarded if guarded is not None and guarded.strip() else ""
        if body != text:
            self._cuts = []  # the hook rewrote it: lay the final text out afresh
        self._final_text = body
        self._final_suffix = ending.line if ending.kind == "interrupted" else None
        self._final = self._layout(body, self._final_suffix, self._max, formatted=True)

    # -- layout ---------------------------------------------------------------------------

    def _tail_start(self) -> tuple[int, Chunk | None]:
        return (self._cuts[-1].cut, self._cuts[-1]) if self._cuts else (0, None)

    def _tail(self, text: str, start: int, last: Chunk | None, suffix: str | None) -> str:
        fence = last.fence if last else None
        tail = ""
        if text[start:].strip():
            tail = render_chunk(text, start, len(text), fence, close=bool(suffix))[0]
        if not suffix:
            return tail
        suffix = clip_line(self._limits, suffix, self._max)
        return tail + PARAGRAPH_BREAK + suffix if tail else suffix

    def _extend_cuts(self, text: str, suffix: str | None, live_room: int) -> None:
        """Freeze the live draft until its text fits in ``live_room`` and, with ``suffix``, in
        the limit."""
        while True:
            start, last = self._tail_start()
            if not text[start:].strip():
                return
            tail = self._tail(text, start, last, None)
            composed = self._tail(text, start, last, suffix) if suffix else tail
            if measure(self._limits, tail) <= live_room and (
                measure(self._limits, composed) <= self._max
            ):
                return
            fence = last.fence if last else None
            self._cuts.append(find_cut(self._limits, text, start, len(text), fence, self._max))

    def _freeze_for_cap(self, text: str, suffix: str | None) -> None:
        """Freeze the live draft when its message has no preview edit left (module docstring)."""
        cap = self._settings.max_edits_per_message
        live = len(self._cuts)
        if cap is None or live >= len(self._slots):
            return
        slot = self._slots[live]
        if cap < 3 or slot.message_id is None or slot.edits < _preview_edits(cap):
            return  # below 3 edits there is none to spare: the preview stays until the end
        start, last = self._tail_start()
        if not text[start:].strip() or self._tail(text, start, last, suffix) == slot.shown:
            return
        if slot.edits == cap - 2:  # one edit to freeze it, one for the final
            fence = last.fence if last else None
            self._cuts.append(find_cut(self._limits, text, start, len(text), fence, self._max))

    def _layout(
        self, text: str, suffix: str | None, live_room: int, *, formatted: bool
    ) -> list[_Target]:
        self._extend_cuts(text, suffix, live_room)
        if not formatted:
            self._freeze_for_cap(text, suffix)
        targets: list[_Target] = []
        start, last = 0, None
        for chunk in self._cuts:
            body, _ = render_chunk(text, start, chunk.cut, last.fence if last else None)
            targets.append(_Target(body, formatted))
            start, last = chunk.cut, chunk
        tail = self._tail(text, start, last, suffix)
        if tail:
            targets.append(_Target(tail, formatted))
        return targets

    def _targets(self) -> tuple[list[_Target], bool]:
        if self._final is not None:
            return self._final, True
        live_room = self._max - min(STATUS_ROOM, self._max // 4)
        return self._layout(self._transcript.text, self._status, live_room, formatted=False), False

    # -- choosing the next write ----------------------------------------------------------

    def _edit_allowed(self, slot: _Slot, live: bool, final: bool) -> bool:
        cap = self._settings.max_edits_per_message
        if cap is None:
            return True
        if live and not final:
            return slot.edits < _preview_edits(cap)
        # A frozen message normally needs one edit (its freezing edit) and keeps one for the
        # final; should retries use that one too, right content beats formatting.
        return slot.edits < cap

    def _next(self) -> PlannedWrite | None:
        targets, final = self._targets()
        for index, target in enumerate(targets):
            if index == len(self._slots):
                self._slots.append(_Slot())
            slot = self._slots[index]
            if slot.orphan and not final:
                return None  # previews stopped: see the module docstring
            formatted = target.formatted and not slot.plain
            text = target.text
            rendered = self._settings.render_formatted(text) if formatted else text
            if rendered == slot.abandoned or (slot.unconfirmed and slot.shown == rendered):
                continue
            write = _SlotWrite(slot, rendered)
            if slot.message_id is None:
                return PlannedWrite(SendMessage(text, formatted), write, final)
            if rendered == slot.shown:
                continue
            if self._edit_allowed(slot, index == len(self._cuts), final):
                return PlannedWrite(EditMessage(slot.message_id, text, formatted), write, final)
            if not final and index == len(self._cuts):
                continue  # the live draft keeps its preview until the final edit
            # No edit left for a frozen message or the final text (timeouts used them up).
            later = self._slots[index + 1 : len(targets)]
            if final and all(other.message_id is None for other in later):
                # The last message: delete it (surplus drafts first), then send the final
                # text anew, so the chat keeps its order.
                for spare in self._slots[len(targets) :]:
                    if spare.message_id is not None:
                        return PlannedWrite(DeleteMessage(spare.message_id), _SlotWrite(spare, ""))
                return PlannedWrite(DeleteMessage(slot.message_id), write, final)
            slot.abandoned = rendered  # re-sending it would put it out of order
            self._counters.writes_given_up += 1
        if final:
            for slot in self._slots[len(targets) :]:
                if slot.message_id is not None:
                    return PlannedWrite(DeleteMessage(slot.message_id), _SlotWrite(slot, ""))
        return None

    def next_kind(self) -> WriteKind | None:
        cuts = list(self._cuts)
        try:
            write = self._next()
        finally:
            self._cuts = cuts  # a peek decides nothing: freeze with the text there is at write time
        return write.kind if write else None

    def plan(self) -> PlannedWrite | None:
        return self._next()

    # -- outcomes -------------------------------------------------------------------------

    def succeeded(self, write: PlannedWrite, message_id: str | None) -> None:
        target = write.target
        assert isinstance(target, _SlotWrite)
        slot = target.slot
        slot.attempts = 0
        if write.kind == "delete":
            self._forget(slot)
            return
        if write.kind == "send":
            slot.message_id, slot.edits, slot.orphan = message_id, 0, False
            slot.unconfirmed = message_id is None
        else:
            slot.edits += 1
        slot.shown = target.rendered

    def failed(self, write: PlannedWrite, reason: WriteFailure) -> None:
        target = write.target
        assert isinstance(target, _SlotWrite)
        slot, kind = target.slot, write.kind
        if kind == "delete":
            if reason in ("gone", "not_modified"):
                self._forget(slot)
            elif reason != "timeout" or self._attempt_failed(slot):
                self._counters.writes_given_up += reason != "timeout"
                self._forget(slot)
            return
        if reason == "not_modified" and kind == "edit":
            slot.shown, slot.attempts = target.rendered, 0  # it shows that already: no edit made
        elif reason == "timeout" and kind == "send":
            self._counters.unconfirmed_sends += 1
            slot.shown = target.rendered
            if write.final:
                slot.unconfirmed = True
            else:
                slot.orphan = True
        elif reason == "timeout":
            slot.edits += 1
            slot.shown = None
            if self._attempt_failed(slot):
                slot.abandoned = target.rendered
        elif reason == "gone" and kind == "edit":
            slot.message_id, slot.shown, slot.edits = None, None, 0
        elif reason == "too_long":
            self._shrink(target, write)
        elif write.action.formatted and not slot.plain:  # type: ignore[union-attr]
            slot.plain = True
            self._counters.plain_fallbacks += 1
        else:
            slot.abandoned = target.rendered
            self._counters.writes_given_up += 1

    def deferred(self, write: PlannedWrite) -> None:
        return None  # the next plan carries the newest text

    def _attempt_failed(self, slot: _Slot) -> bool:
        """Count a timeout; True when the write is given up."""
        slot.attempts += 1
        if slot.attempts < MAX_ATTEMPTS:
            return False
        slot.attempts = 0
        self._counters.writes_given_up += 1
        return True

    def _forget(self, slot: _Slot) -> None:
        slot.message_id, slot.shown = None, None

    def _shrink(self, target: _SlotWrite, write: PlannedWrite) -> None:
        """The platform counted more than we did: lay this message and the next out again with
        a quarter less room."""
        slot = target.slot
        length = measure(self._limits, write.action.text)  # type: ignore[union-attr]
        room = min(self._max, length) * 3 // 4
        if room < MIN_ROOM:
            slot.abandoned = target.rendered
            self._counters.writes_given_up += 1
            return
        self._max = room
        if slot in self._slots:
            index = self._slots.index(slot)
            self._cuts = self._cuts[:index]
        if self._final is not None:
            self._final = self._layout(
                self._final_text, self._final_suffix, self._max, formatted=True
            )


def _preview_edits(cap: int) -> int:
    """Edits of one message previews may use: two are kept, to freeze it and for the final."""
    return cap - 2 if cap >= 3 else 0
