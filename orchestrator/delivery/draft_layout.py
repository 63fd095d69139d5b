"""The layout of a ``partial`` reply: where its messages are cut and what each should show.

Theory of operation
-------------------
The reply's visible text (the :class:`~orchestrator.delivery.planning.Transcript`) is laid out
over messages. ``cuts`` are the offsets where a message was *frozen*: message ``i`` holds
``text[cuts[i-1]:cuts[i]]`` (fences balanced by
:func:`~orchestrator.delivery.splitting.render_chunk`, rendered once, when it froze), and the
last message, the *live* draft, holds the rest, followed by the status lines of the round's tool
calls after a blank line (one per call: ``⏳ name…`` while it runs, then its finished line, until
text follows or a new round's lines replace them). Cuts only ever grow, except on ``Restart``
(cuts past the round's start are forgotten) and when the platform counted more than we did
(:func:`shrink`).

The layout is one immutable record, :class:`Layout`; every change is a pure function that returns
the next one (the reply's text, a :class:`~orchestrator.delivery.planning.Transcript`, is read,
never written). It is kept up to date as the text changes, at a cost that does not grow with the
answer: the transcript adds each append's measure to its running
:attr:`~orchestrator.delivery.planning.Transcript.units`, and only when the live draft's measure
(those units less the measure of the text before the live draft, kept in the layout) passes the
room is the live text read and frozen. So the record does not change per delta: whether the
live draft holds text is read from the transcript's ``visible_end``, and the live draft's
*version* (:func:`version`) is the layout's own count of changes with the text's length. Frozen
messages are never laid out again before the end. The live draft's text is composed only when
asked for. The text before the live draft's start (:func:`start`) is no longer read per delta:
the engine settles the transcript there after each step.

Room: the live draft keeps ``STATUS_ROOM`` units free for a status line or the interrupted
marker; when the text, or the text plus the status, does not fit, it is frozen at the best cut
(paragraph, line, word, hard) within the full limit and the rest continues in a new message.

The end: :func:`lay_out_final` lays the final text out on the cuts kept (or afresh),
with the interrupted marker after a blank line; each message is formatted when the channel's
renderer says its formatted form fits in a message, else plain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from orchestrator.delivery.planning import (
    PARAGRAPH_BREAK,
    Transcript,
    clip_line,
    fit_rendering,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import Fence, find_cut, measure, render_chunk, scan_fence

__all__ = [
    "STATUS_ROOM",
    "Frozen",
    "Layout",
    "Target",
    "append",
    "compose",
    "count",
    "end",
    "fence_in",
    "finish_status",
    "freeze_live",
    "lay_out_final",
    "live_has_text",
    "live_text",
    "live_units",
    "new_layout",
    "new_status_round",
    "pin",
    "refuse",
    "restart",
    "set_status",
    "shrink",
    "start",
    "target",
    "version",
]

STATUS_ROOM = 100
"""Units a growing draft keeps free for a status line or the interrupted marker (at most a
quarter of the limit)."""


@dataclass(frozen=True, slots=True)
class Frozen:
    """A frozen message: ``text[previous cut:cut]`` rendered as ``body``; ``fence`` is open at
    ``cut``."""

    cut: int
    fence: Fence | None
    body: str


@dataclass(frozen=True, slots=True)
class Target:
    """What one message should show: ``text`` written ``formatted`` shows ``form``."""

    text: str
    formatted: bool
    form: str

    @classmethod
    def plain(cls, text: str) -> Target:
        return cls(text, False, text)


class Layout(NamedTuple):
    """The cuts, the live draft and the final targets of one ``partial`` reply (see the module
    docstring). Immutable (a ``NamedTuple``, the cheapest record to build).

    Attributes:
        max: the room of one message, in ``limits.unit`` (less after :func:`shrink`).
        cuts: the frozen messages, in order.
        units_before: ``measure`` of the text before the live draft, ``text[:start]`` (the live
            draft's measure is the transcript's ``units`` less this; the reopened fence not
            included).
        version: bumped by every change of what the live draft should show but the text's
            growth (see :func:`version`).
        lines: the status lines of the running round, ``(call, line)`` in the order the calls
            began.
        status: ``lines`` joined and clipped (``None``: no line).
        round_over: a round ended since the last status line.
        final: the final targets, once laid out.
        final_cuts: the cuts of the final layout.
        final_body: what the final layout cut (``None`` for a refusal).
        final_formatted: the final messages may go out formatted.
        suffix: the line after the final text (the interrupted marker), redacted.
    """

    max: int
    cuts: tuple[Frozen, ...] = ()
    units_before: int = 0
    version: int = 0
    lines: tuple[tuple[int, str], ...] = ()
    status: str | None = None
    round_over: bool = False
    final: tuple[Target, ...] | None = None
    final_cuts: tuple[Frozen, ...] = ()
    final_body: str | None = None
    final_formatted: bool = True
    suffix: str | None = None


def new_layout(settings: DeliverySettings) -> Layout:
    """The layout of a reply that has shown nothing yet."""
    return Layout(settings.limits.max_length)


def compose(tail: str, fence: Fence | None, suffix: str | None) -> str:
    """A message's text: ``tail`` (``fence`` reopened; closed when ``suffix`` follows), then
    ``suffix`` after a blank line."""
    if not suffix:  # nothing to close: no need to scan for fences
        return (fence.reopen if fence else "") + tail if tail.strip() else ""
    body = ""
    if tail.strip():
        body = render_chunk(tail, 0, len(tail), fence, close=True)[0]
    return body + PARAGRAPH_BREAK + suffix if body else suffix


# -- queries ----------------------------------------------------------------------------------


def live_room(layout: Layout) -> int:
    return layout.max - min(STATUS_ROOM, layout.max // 4)


def start(layout: Layout) -> int:
    """Where the live draft starts in the text."""
    return layout.cuts[-1].cut if layout.cuts else 0


def fence_in(layout: Layout) -> Fence | None:
    return layout.cuts[-1].fence if layout.cuts else None


def live_units(layout: Layout, text: Transcript) -> int:
    """``measure`` of the live text, ``text[start:]``."""
    return text.units - layout.units_before


def live_has_text(layout: Layout, text: Transcript) -> bool:
    """The live text is not blank."""
    return text.visible_end > start(layout)


def version(layout: Layout, text: Transcript) -> tuple[int, int]:
    """The live draft's version: it changes with every change of what the live draft should
    show (the layout's changes, then the text's growth; a restart, which shortens the text, is
    a change of the layout)."""
    return layout.version, text.length


def live_text(layout: Layout, text: Transcript, settings: DeliverySettings) -> str:
    """The live draft's text."""
    limits = settings.limits
    status = clip_line(limits, layout.status, layout.max) if layout.status else None
    return compose(text.tail(start(layout)), fence_in(layout), status)


def count(layout: Layout, text: Transcript) -> int:
    """How many messages the reply should have now."""
    if layout.final is not None:
        return len(layout.final)
    return len(layout.cuts) + (1 if layout.status or live_has_text(layout, text) else 0)


def target(layout: Layout, index: int, text: Transcript, settings: DeliverySettings) -> Target:
    if layout.final is not None:
        return layout.final[index]
    if index < len(layout.cuts):
        return Target.plain(layout.cuts[index].body)
    return Target.plain(live_text(layout, text, settings))


# -- the live draft -----------------------------------------------------------------------------


def append(layout: Layout, appended: str, text: Transcript, settings: DeliverySettings) -> Layout:
    """Text was appended to the transcript: the status lines go; freeze what outgrew. Nearly
    every input, and it changes nothing while the live draft fits without a status line: then
    ``layout`` itself is returned."""
    if layout.status is not None or layout.lines:
        layout = layout._replace(lines=(), status=None, version=layout.version + 1)
    room, cuts = layout.max, layout.cuts
    fits = text.units - layout.units_before <= room - min(STATUS_ROOM, room // 4)
    if fits and (not cuts or cuts[-1].fence is None):
        return layout  # it fits, with no fence to reopen and no status line (what _extend checks)
    return _extend(layout, text, settings)


def set_status(
    layout: Layout, call: int, status: str, text: Transcript, settings: DeliverySettings
) -> Layout:
    """Tool call ``call`` began: its line goes under the lines of the calls that began before it
    since the last text (one line per call, architecture §3 "Tool status"). The lines take at
    most half a message."""
    lines = () if layout.round_over else layout.lines
    return _show_status(
        layout._replace(round_over=False), _with_line(lines, call, status), text, settings
    )


def finish_status(
    layout: Layout, call: int, status: str, text: Transcript, settings: DeliverySettings
) -> Layout:
    """Tool call ``call`` ended: its line becomes ``status`` (``✓ name 0.4 s``), shown at the
    draft's next edit; nothing when its line is gone (text followed, a new round's lines
    replaced it)."""
    if dict(layout.lines).get(call, status) == status:
        return layout
    return _show_status(layout, _with_line(layout.lines, call, status), text, settings)


def _with_line(
    lines: tuple[tuple[int, str], ...], call: int, status: str
) -> tuple[tuple[int, str], ...]:
    """``lines`` with call ``call``'s line set to ``status`` (in its place, or last)."""
    if any(c == call for c, _ in lines):
        return tuple((c, status if c == call else line) for c, line in lines)
    return (*lines, (call, status))


def _show_status(
    layout: Layout, lines: tuple[tuple[int, str], ...], text: Transcript, settings: DeliverySettings
) -> Layout:
    limits = settings.limits
    joined = "\n".join(line for _, line in lines)
    status = clip_line(limits, joined, limits.max_length // 2)
    return _extend(
        layout._replace(lines=lines, status=status, version=layout.version + 1), text, settings
    )


def new_status_round(layout: Layout) -> Layout:
    """The next status line starts the lines anew (those shown stay until it comes)."""
    return layout if layout.round_over else layout._replace(round_over=True)


def restart(
    layout: Layout, round_start: int, text: Transcript, settings: DeliverySettings
) -> Layout:
    """The round's text is gone: cuts past ``round_start`` are forgotten."""
    cuts = tuple(frozen for frozen in layout.cuts if frozen.cut <= round_start)
    cleared = layout._replace(cuts=cuts, lines=(), status=None)
    return _extend(_reset_live(cleared, text, settings), text, settings)


def end(layout: Layout, suffix: str | None = None) -> Layout:
    """The answer is over; ``suffix`` (redacted: the interrupted marker) goes after the final
    text, after a blank line."""
    return layout._replace(lines=(), status=None, suffix=suffix, version=layout.version + 1)


def freeze_live(layout: Layout, text: Transcript, settings: DeliverySettings) -> Layout:
    """Freeze the live draft at the best cut of its text (its message has no preview edit
    left)."""
    at = start(layout)
    return _freeze(layout, at, text.tail(at), fence_in(layout), settings)


def pin(
    layout: Layout,
    index: int,
    span: tuple[int, int],
    body: str,
    text: Transcript,
    settings: DeliverySettings,
) -> Layout | None:
    """Message ``index`` holds ``text[span[0]:span[1]]`` (shown as ``body``) for good: a
    preview send that timed out, assumed landed. The cuts after it are forgotten and the text
    from ``span[1]`` on is laid out again in the messages after it. ``None`` (nothing changed,
    nothing to pin) when message ``index`` does not start at ``span[0]`` or the span is not in
    the text."""
    begin, stop = span
    cuts = layout.cuts
    if layout.final is not None or index > len(cuts) or not begin < stop:
        return None
    fence = cuts[index - 1].fence if index else None
    if (cuts[index - 1].cut if index else 0) != begin or stop > text.length:
        return None
    if index < len(cuts) and cuts[index].cut == stop:
        return layout  # a frozen message: it holds that text already
    fence_out = scan_fence(text.tail(begin), 0, stop - begin, fence)
    pinned = layout._replace(cuts=(*cuts[:index], Frozen(stop, fence_out, body)))
    return _extend(_reset_live(pinned, text, settings), text, settings)


def _reset_live(layout: Layout, text: Transcript, settings: DeliverySettings) -> Layout:
    """Measure the live text again (after its start moved back)."""
    tail = text.tail(start(layout))
    before = text.units - measure(settings.limits, tail)
    return layout._replace(units_before=before, version=layout.version + 1)


def _extend(layout: Layout, text: Transcript, settings: DeliverySettings) -> Layout:
    """Freeze the live draft until its text fits in the live room and, with the status line, in
    the limit. Costs nothing but a comparison while it fits without a status."""
    limits = settings.limits
    while live_has_text(layout, text):
        fence = fence_in(layout)
        reopen = measure(limits, fence.reopen) if fence else 0
        fits = reopen + live_units(layout, text) <= live_room(layout)
        if fits and layout.status is None:
            return layout
        at = start(layout)
        tail = text.tail(at)
        if fits and layout.status is not None:
            status = clip_line(limits, layout.status, layout.max)
            fits = measure(limits, compose(tail, fence, status)) <= layout.max
        if fits:
            return layout
        layout = _freeze(layout, at, tail, fence, settings)
    return layout


def _freeze(
    layout: Layout, at: int, tail: str, fence: Fence | None, settings: DeliverySettings
) -> Layout:
    limits = settings.limits
    chunk = find_cut(limits, tail, 0, len(tail), fence, layout.max)
    body = render_chunk(tail, 0, chunk.cut, fence)[0]
    return layout._replace(
        cuts=(*layout.cuts, Frozen(at + chunk.cut, chunk.fence, body)),
        units_before=layout.units_before + measure(limits, tail[: chunk.cut]),
        version=layout.version + 1,
    )


# -- the end ------------------------------------------------------------------------------------


def refuse(layout: Layout, line: str, settings: DeliverySettings) -> Layout:
    """The final text is ``line`` alone, plain (a refusal)."""
    notice = Target.plain(clip_line(settings.limits, line, layout.max))
    return layout._replace(final=(notice,), final_body=None)


def lay_out_final(
    layout: Layout,
    body: str,
    settings: DeliverySettings,
    *,
    formatted: bool = True,
    keep: tuple[Frozen, ...] | None = None,
) -> Layout:
    """The final targets: the cuts ``keep`` (default: the preview's cuts) kept, the rest of
    ``body`` cut with the full limit and the suffix given to :func:`end` after it; each message
    formatted where its rendering fits."""
    limits, room = settings.limits, layout.max
    cuts = list(layout.cuts if keep is None else keep)
    at = cuts[-1].cut if cuts else 0
    fence = cuts[-1].fence if cuts else None
    suffix = clip_line(limits, layout.suffix, room) if layout.suffix else None
    content_end = len(body.rstrip())  # the rest holds text while ``at`` is below it
    while at < content_end:
        reopen = fence.reopen if fence else ""
        # A code point is at least one unit: only a rest that may fit is measured.
        if len(reopen) + len(body) - at <= room:
            last = compose(body[at:], fence, suffix)
            if measure(limits, last) <= room:
                break
        # Cut in place (no copy of the rest per message: linear in the body).
        chunk = find_cut(limits, body, at, len(body), fence, room)
        frozen = render_chunk(body, at, chunk.cut, fence)[0]
        cuts.append(Frozen(chunk.cut, chunk.fence, frozen))
        at, fence = chunk.cut, chunk.fence
    texts = [frozen.body for frozen in cuts]
    last = compose(body[at:], fence, suffix)
    if last:
        texts.append(last)
    final = tuple(
        _formatted(text, room, settings) if formatted else Target.plain(text) for text in texts
    )
    return layout._replace(
        final=final, final_cuts=tuple(cuts), final_body=body, final_formatted=formatted
    )


def _formatted(text: str, room: int, settings: DeliverySettings) -> Target:
    formatted, form = fit_rendering(settings.rendering(text), text, room)
    return Target(text, formatted, form)


# -- the platform counted more --------------------------------------------------------------------


def shrink(
    layout: Layout, index: int, room: int, text: Transcript, settings: DeliverySettings
) -> Layout | None:
    """Lay message ``index`` and the next out again in ``room`` units. ``None`` when there is
    nothing to lay out again (a refusal's notice)."""
    if layout.final is not None and layout.final_body is None:
        return None
    narrow = layout._replace(max=room)
    if narrow.final is not None and narrow.final_body is not None:
        keep = narrow.final_cuts[:index]
        formatted = narrow.final_formatted
        return lay_out_final(narrow, narrow.final_body, settings, formatted=formatted, keep=keep)
    cut = narrow._replace(cuts=narrow.cuts[:index])
    return _extend(_reset_live(cut, text, settings), text, settings)
