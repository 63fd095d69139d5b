"""The state of a ``partial`` reply's messages: one immutable :class:`Drafts` record, and the
pure steps the scan (:mod:`~orchestrator.delivery.draft_scan`) and the transitions
(:mod:`~orchestrator.delivery.drafts`) share.

Theory of operation
-------------------
:class:`Drafts` holds everything the ``partial`` planner knows of one reply: the layout
(:class:`~orchestrator.delivery.draft_layout.Layout`), one slot per chat message
(:class:`~orchestrator.delivery.slots.Slot`, found by its ``key``), the retired messages waiting
to be deleted, the drafts superseded by the final messages (``final_as_new_message``), the write
in flight and the verdict awaited. Every function here takes a value and returns a new one; the
old value is never changed. Counters a step makes grow are appended to the ``count`` list the
caller passes (a local of the caller's own step, returned with its result).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from orchestrator.delivery import draft_layout as layouts
from orchestrator.delivery.draft_layout import Layout
from orchestrator.delivery.events import GuardPiece
from orchestrator.delivery.planning import Transcript, Write
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.slots import Slot, SlotState, advance

__all__ = [
    "DraftStep",
    "Drafts",
    "InFlight",
    "assumed_after",
    "find",
    "forget",
    "freeze_for_cap",
    "give_up",
    "leave_assumed",
    "new_drafts",
    "put",
    "retire",
    "supersede",
    "with_layout",
]


@dataclass(frozen=True, slots=True)
class InFlight:
    """The write in flight: the slot it writes (its value when the write started), the form the
    write shows, the live draft's version it carries; a send of the live draft also carries the
    span of the text it shows, ``text[start:end]`` (``end`` is -1 otherwise)."""

    slot: Slot
    form: str
    version: tuple[int, int]
    write: Write
    start: int = 0
    end: int = -1


class Drafts(NamedTuple):
    """What the ``partial`` planner knows of one reply (an immutable record; a ``NamedTuple``,
    the cheapest record to build).

    Attributes:
        layout: the cuts, the live draft and the final targets.
        slots: one per message of the current layout, in order.
        stale: retired messages, deleted before anything else is written.
        ended: the answer is over.
        guard: the final text's verdict to ask for (``GuardPiece``), not asked yet.
        awaited: the piece whose verdict is awaited.
        next_piece: the id of the next piece to guard.
        in_flight: the write in flight.
        clean: leading frozen messages known to show their text: the scan starts after them.
        superseded: ``final_as_new_message``: the drafts, deleted once the final messages
            landed (``None``: not superseded).
        next_key: the key of the next slot.
    """

    layout: Layout
    slots: tuple[Slot, ...] = ()
    stale: tuple[Slot, ...] = ()
    ended: bool = False
    guard: GuardPiece | None = None
    awaited: int | None = None
    next_piece: int = 1
    in_flight: InFlight | None = None
    clean: int = 0
    superseded: tuple[Slot, ...] | None = None
    next_key: int = 0


@dataclass(frozen=True, slots=True)
class DraftStep:
    """What one input does to :class:`Drafts`: the new value, the names of the
    :class:`~orchestrator.delivery.planning.DeliveryStats` counters that grow by one, and the
    back-off (in seconds) a refused write asks for."""

    drafts: Drafts
    count: tuple[str, ...] = ()
    backoff: float = 0.0


def with_layout(drafts: Drafts, layout: Layout) -> Drafts:
    """``drafts`` with ``layout`` (its first field): nearly every input's step, built without the
    checks of ``_replace`` (which costs three times as much)."""
    return tuple.__new__(Drafts, (layout, *drafts[1:]))


def new_drafts(settings: DeliverySettings) -> Drafts:
    """The state of a reply that has shown nothing yet."""
    return Drafts(layouts.new_layout(settings))


# -- slots by key -------------------------------------------------------------------------------


def _index(slots: tuple[Slot, ...], key: int) -> int:
    for i, slot in enumerate(slots):
        if slot.key == key:
            return i
    return -1


def find(slots: tuple[Slot, ...], slot: Slot) -> int:
    """Where ``slot`` (by its key) is in ``slots``; -1 when it is not there."""
    return _index(slots, slot.key)


def _replaced(slots: tuple[Slot, ...], slot: Slot) -> tuple[Slot, ...] | None:
    i = _index(slots, slot.key)
    return None if i < 0 else (*slots[:i], slot, *slots[i + 1 :])


def put(drafts: Drafts, slot: Slot) -> Drafts:
    """``drafts`` with ``slot``'s new value wherever its key is (the slots, the retired ones or
    the superseded drafts); unchanged when it is in none of them (forgotten)."""
    slots = _replaced(drafts.slots, slot)
    if slots is not None:
        return drafts._replace(slots=slots)
    stale = _replaced(drafts.stale, slot)
    if stale is not None:
        return drafts._replace(stale=stale)
    if drafts.superseded is not None:
        superseded = _replaced(drafts.superseded, slot)
        if superseded is not None:
            return drafts._replace(superseded=superseded)
    return drafts


def current(drafts: Drafts, slot: Slot) -> Slot:
    """The current value of ``slot`` (by its key); ``slot`` itself when it was forgotten."""
    for group in (drafts.slots, drafts.stale, drafts.superseded or ()):
        i = _index(group, slot.key)
        if i >= 0:
            return group[i]
    return slot


# -- shared steps ---------------------------------------------------------------------------------


def freeze_for_cap(drafts: Drafts, text: Transcript, settings: DeliverySettings) -> Drafts:
    """Freeze the live draft when its message has no preview edit left (``drafts`` module
    docstring)."""
    cap = settings.max_edits_per_message
    layout = drafts.layout
    live = len(layout.cuts)
    if cap is None or cap < 3 or drafts.ended or live >= len(drafts.slots):
        return drafts  # below 3 edits there is none to spare: the preview stays until the end
    slot = drafts.slots[live]
    if not slot.writable or slot.edits != cap - 2 or not layouts.live_has_text(layout, text):
        return drafts  # one edit to freeze it, one for the final
    if layouts.live_text(layout, text, settings) != slot.shown:
        return drafts._replace(layout=layouts.freeze_live(layout, text, settings))
    return drafts


def supersede(drafts: Drafts, settings: DeliverySettings) -> Drafts:
    """``final_as_new_message``: the final text goes to new slots; the drafts wait to be
    deleted."""
    if not settings.final_as_new_message or drafts.superseded is not None:
        return drafts
    return drafts._replace(superseded=drafts.slots, slots=(), clean=0)


def leave_assumed(drafts: Drafts, index: int) -> Drafts:
    """Messages from ``index`` on are laid out anew: those assumed landed (no id to edit or
    delete them by) are left as they stand, and the new layout goes below the last of them: the
    messages above it are deleted, since the reply laid out there would end above text it no
    longer holds (a failed attempt's, a rewritten one's)."""
    tail = drafts.slots[index:]
    assumed = [i for i, slot in enumerate(tail) if slot.state is SlotState.ASSUMED]
    if assumed:
        last = assumed[-1]
        stale = (*drafts.stale, *(slot for slot in tail[:last] if slot.writable))
        slots = (*drafts.slots[:index], *tail[last + 1 :])
        drafts = drafts._replace(slots=slots, stale=stale)
    return drafts._replace(clean=min(drafts.clean, index))


def assumed_after(drafts: Drafts, index: int) -> bool:
    """A message assumed landed follows slot ``index``: the messages before it cannot be
    retired, since a new message goes below that one, which cannot be deleted."""
    return any(slot.state is SlotState.ASSUMED for slot in drafts.slots[index + 1 :])


def give_up(drafts: Drafts, slot: Slot, form: str, count: list[str]) -> Drafts:
    """``slot`` keeps what it shows until its target changes."""
    count.append("writes_given_up")
    return put(drafts, replace(slot, abandoned=form))


def retire(drafts: Drafts, index: int, count: list[str]) -> Drafts:
    """Slot ``index`` can no longer be edited: the old messages from it on are deleted, then
    their texts go out as new messages (never with a message assumed landed among them: see
    :func:`assumed_after`; a moved chat aside, where all of them are sent anew)."""
    count.append("resent_as_new")
    stale = (*drafts.stale, *(slot for slot in drafts.slots[index:] if slot.writable))
    return drafts._replace(slots=drafts.slots[:index], stale=stale, clean=min(drafts.clean, index))


def forget(drafts: Drafts, slot: Slot) -> Drafts:
    """``slot``'s message is gone (deleted, or given up): it leaves the retired ones."""
    i = find(drafts.stale, slot)
    if i >= 0:
        drafts = drafts._replace(stale=(*drafts.stale[:i], *drafts.stale[i + 1 :]))
    return put(drafts, advance(slot, "deleted")) if slot.writable else drafts
