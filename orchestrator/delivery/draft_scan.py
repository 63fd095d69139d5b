"""Choosing the next write of a ``partial`` reply: one pure scan, read by a query and a command.

Theory of operation
-------------------
Every time a write may start, the first slot whose message does not show its desired form gets
the one write: a send when it has no message, else an edit (retired messages are deleted first,
the last one first; at the end, surplus drafts, then the superseded ones). So a frozen message
gets its freezing edit before the next message is sent, and an edit equal to what is shown is
never sent.

:func:`_walk` finds the steps to that write, in order, from a :class:`~orchestrator.delivery.
draft_state.Drafts` value, and yields each with the value it leaves: *records* of what it found
(``_Clean``: a frozen message shows its text for good; ``_Mark``: the live draft shows the
current version; ``_GiveUp``), applied to the value it carries on with, so the steps after a
record see it; and at most one step naming a write (``_Planned``, ``_Retire``, or ``_Guess``
for a live draft whose version changed). Nothing outside the walk changes: the values are new.

- The query :func:`next_kind` answers the kind of the first step naming a write and keeps
  nothing; it may answer "edit" for a live draft whose text turns out to equal what is shown.
- The command :func:`plan` goes on past a guess (the text is composed: equal, the live draft
  is recorded as shown and nothing is written), retires and looks again after a ``_Retire``, and
  returns the value with the planned write started (one ``plan`` per poll).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from orchestrator.delivery import draft_layout as layouts
from orchestrator.delivery.draft_state import (
    Drafts,
    InFlight,
    assumed_after,
    put,
    retire,
)
from orchestrator.delivery.events import DeleteMessage, EditMessage, SendMessage
from orchestrator.delivery.planning import Transcript, Write, WriteKind
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.slots import Slot, SlotState

__all__ = ["Planned", "next_kind", "plan"]


@dataclass(frozen=True, slots=True)
class _Planned:
    """The next write: ``slot`` ``None`` for a message not sent yet (starting it gives it a
    slot); the rest as :class:`~orchestrator.delivery.draft_state.InFlight`."""

    slot: Slot | None
    form: str
    version: tuple[int, int]
    write: Write
    start: int = 0
    end: int = -1


@dataclass(frozen=True, slots=True)
class _Guess:
    """The live draft changed: ``kind`` unless its text turns out the same as shown (the
    query's answer; the command composes the text and goes on)."""

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
    """Slot ``index`` can no longer be edited: retire it (a send follows)."""

    index: int


_RECORDS = (_Clean, _Mark, _GiveUp)
_GUESS_EDIT = _Guess("edit")
_STOP = _Stop()
_Step = _Planned | _Guess | _Stop | _Clean | _Mark | _GiveUp | _Retire


@dataclass(frozen=True, slots=True)
class Planned:
    """What :func:`plan` did: the new value (the write, if any, in flight), the write, and the
    counters that grow."""

    drafts: Drafts
    write: Write | None
    count: tuple[str, ...] = ()


# -- the walk -------------------------------------------------------------------------------------


def _record(drafts: Drafts, step: _Clean | _Mark | _GiveUp, text: Transcript) -> Drafts:
    """``drafts`` with ``step`` recorded (a ``_GiveUp`` counts a write given up: its caller
    counts it)."""
    match step:
        case _Clean(index=index):
            return drafts._replace(clean=index + 1)
        case _Mark(slot=slot):
            return put(drafts, replace(slot, version=layouts.version(drafts.layout, text)))
        case _GiveUp(slot=slot, form=form):
            return put(drafts, replace(slot, abandoned=form))


def _walk(
    drafts: Drafts, text: Transcript, settings: DeliverySettings
) -> Iterator[tuple[Drafts, _Step]]:
    """The steps to the next write, in order, each with the value it leaves (see the module
    docstring): records, then at most one step that names a write."""
    layout = drafts.layout
    final = layout.final is not None
    if drafts.stale:  # retired messages go first, the last one first (the chat then always
        yield drafts, _delete(drafts, drafts.stale[-1], text)  # shows a prefix)
        return
    if drafts.ended and not final:
        return  # the hook's verdict on the final text is awaited
    count = layouts.count(layout, text)
    for index in range(drafts.clean, count):
        slot = drafts.slots[index] if index < len(drafts.slots) else None
        live = not final and index == len(layout.cuts)
        for step in _slot_steps(drafts, index, slot, live, text, settings):
            if isinstance(step, _RECORDS):
                drafts = _record(drafts, step, text)
            yield drafts, step
            if not isinstance(step, (*_RECORDS, _Guess)):
                return
    if final:
        for spare in drafts.slots[count:]:
            if spare.writable:
                yield drafts, _delete(drafts, spare, text)
                return
        if drafts.superseded and _final_landed(drafts, count):
            for draft in drafts.superseded:
                if draft.writable:
                    yield drafts, _delete(drafts, draft, text)
                    return


def _slot_steps(
    drafts: Drafts,
    index: int,
    slot: Slot | None,
    live: bool,
    text: Transcript,
    settings: DeliverySettings,
) -> Iterator[_Step]:
    """The steps for slot ``index`` (``None``: no message yet): records, then at most one step
    that names a write (see :func:`_walk`); none when it shows what it should."""
    layout = drafts.layout
    final = layout.final is not None
    state = slot.state if slot is not None else SlotState.EMPTY
    if state is SlotState.ASSUMED:
        if index == drafts.clean:
            yield _Clean(index)  # never written again
        return
    if state is SlotState.ORPHANED and not final:
        yield _STOP  # previews stopped: see the drafts module docstring
        return
    if live and slot is not None and state is SlotState.SHOWN:
        if slot.version == layouts.version(layout, text):
            return  # the live draft has not changed since it was written
        # Changed: an edit, unless its text turns out the same (the query does not compose the
        # text to know; the command does, below).
        if _edit_allowed(slot, live, final, settings):
            yield _GUESS_EDIT
    target = layouts.target(layout, index, text, settings)
    formatted = target.formatted and not (slot is not None and slot.plain)
    form = target.form if formatted else target.text
    if slot is not None and form == slot.abandoned:
        if not live and index == drafts.clean:
            yield _Clean(index)  # given up until its target changes (which resets this)
        return
    if state in (SlotState.EMPTY, SlotState.ORPHANED):
        yield _send(drafts, index, slot, live, target, form, text)
        return
    assert slot is not None and slot.message_id is not None
    if form == slot.shown:
        if live:
            yield _Mark(slot)
        elif index == drafts.clean:
            yield _Clean(index)  # a frozen or final message showing its text stays so
        return
    if _edit_allowed(slot, live, final, settings):
        edit = EditMessage(slot.message_id, target.text, formatted)
        yield _Planned(slot, form, layouts.version(layout, text), Write(edit, final))
        return
    if live and not final:
        return  # the live draft keeps its preview until the final edit
    # No edit left for a frozen message or the final text (timeouts used them up): it goes out
    # as a new message, and the messages after it too; not when one assumed landed follows (it
    # cannot be deleted): then it keeps what it shows.
    if assumed_after(drafts, index):
        yield _GiveUp(slot, form)
        return
    yield _Retire(index)


def _send(
    drafts: Drafts,
    index: int,
    slot: Slot | None,
    live: bool,
    target: layouts.Target,
    form: str,
    text: Transcript,
) -> _Planned:
    layout = drafts.layout
    formatted = target.formatted and not (slot is not None and slot.plain)
    send = SendMessage(target.text, formatted)
    if live:
        return _Planned(
            slot,
            form,
            layouts.version(layout, text),
            Write(send),
            layouts.start(layout),
            text.length,
        )
    if layout.final is None:  # a frozen message: it holds text[previous cut:its cut]
        begin = layout.cuts[index - 1].cut if index else 0
        return _Planned(
            slot, form, layouts.version(layout, text), Write(send), begin, layout.cuts[index].cut
        )
    return _Planned(slot, form, layouts.version(layout, text), Write(send, True))


def _edit_allowed(slot: Slot, live: bool, final: bool, settings: DeliverySettings) -> bool:
    cap = settings.max_edits_per_message
    if cap is None:
        return True
    if live and not final:
        return slot.edits < _preview_edits(cap)
    # A frozen message normally needs one edit (its freezing edit) and keeps one for the final;
    # should retries use that one too, right content beats formatting.
    return slot.edits < cap


def _preview_edits(cap: int) -> int:
    """Edits of one message previews may use: two are kept, to freeze it and for the final."""
    return cap - 2 if cap >= 3 else 0


def _final_landed(drafts: Drafts, count: int) -> bool:
    """Every one of the ``count`` final messages was sent (a send that timed out counts: it is
    assumed landed)."""
    landed = (SlotState.SHOWN, SlotState.UNKNOWN, SlotState.ASSUMED)
    slots = drafts.slots
    return len(slots) >= count and all(slot.state in landed for slot in slots[:count])


def _delete(drafts: Drafts, slot: Slot, text: Transcript) -> _Planned:
    assert slot.message_id is not None
    delete = Write(DeleteMessage(slot.message_id))
    return _Planned(slot, "", layouts.version(drafts.layout, text), delete)


# -- the query and the command ------------------------------------------------------------------


def next_kind(drafts: Drafts, text: Transcript, settings: DeliverySettings) -> WriteKind | None:
    """The kind of the next write, or ``None``: a query, it keeps nothing. It may answer
    ``"edit"`` for a live draft whose text turns out to equal what it shows (module
    docstring)."""
    # The walk's most common case, inline (the engine asks on every poll): while the answer
    # runs, nothing to delete, every frozen message clean, the live draft shown and holding
    # text (layouts.live_has_text), it is all the walk would look at.
    layout = drafts.layout
    index = len(layout.cuts)
    if (
        drafts.clean == index
        and not drafts.stale
        and not drafts.ended
        and layout.final is None
        and index < len(drafts.slots)
    ):
        live = drafts.slots[index]
        if live.state is SlotState.SHOWN and (
            layout.status or text.visible_end > (layout.cuts[-1].cut if index else 0)
        ):
            shown = live.version  # == layouts.version(...), without building the tuple
            if shown[0] == layout.version and shown[1] == text.length:
                return None  # the live draft has not changed since it was written
            if settings.max_edits_per_message is None or _edit_allowed(live, True, False, settings):
                return "edit"
    for _, step in _walk(drafts, text, settings):
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
                pass  # a record
    return None


def plan(drafts: Drafts, text: Transcript, settings: DeliverySettings) -> Planned:
    """The next write, started (``write`` ``None``: nothing to write), with the records found on
    the way (what it found shown, given up, retired)."""
    count: list[str] = []
    while True:
        walked = drafts
        for walked, step in _walk(drafts, text, settings):  # each with the value it leaves
            match step:
                case _GiveUp():
                    count.append("writes_given_up")
                case _Retire(index=index):
                    drafts = retire(walked, index, count)
                    break  # the layout of slots changed: look again
                case _Planned():
                    return Planned(_start(walked, step), step.write, tuple(count))
                case _:
                    pass
        else:
            return Planned(walked, None, tuple(count))


def _start(drafts: Drafts, planned: _Planned) -> Drafts:
    slot = planned.slot
    if slot is None:  # a message not sent yet: its slot begins
        slot = Slot(drafts.next_key)
        drafts = drafts._replace(slots=(*drafts.slots, slot), next_key=drafts.next_key + 1)
    flight = InFlight(
        slot, planned.form, planned.version, planned.write, planned.start, planned.end
    )
    return drafts._replace(in_flight=flight)
