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
(:meth:`DraftLayout.shrink`).

The layout is kept up to date as the text changes, at a cost that does not grow with the answer:
an append adds its length to the live draft's measure; only when that passes the room is the
live text read and frozen. Frozen messages are never laid out again before the end. The live
draft carries a *version*, bumped by every change of what it should show; its text is composed
only when asked for (once per version).

Room: the live draft keeps ``STATUS_ROOM`` units free for a status line or the interrupted
marker; when the text, or the text plus the status, does not fit, it is frozen at the best cut
(paragraph, line, word, hard) within the full limit and the rest continues in a new message.

The end: :meth:`DraftLayout.lay_out_final` lays the final text out on the cuts kept (or afresh),
with the interrupted marker after a blank line; each message is formatted when the channel's
renderer says its formatted form fits in a message, else plain.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.delivery.planning import (
    PARAGRAPH_BREAK,
    Transcript,
    clip_line,
    fit_rendering,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import Fence, find_cut, measure, render_chunk, scan_fence

__all__ = ["STATUS_ROOM", "DraftLayout", "Frozen", "Target", "compose"]

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


def compose(tail: str, fence: Fence | None, suffix: str | None) -> str:
    """A message's text: ``tail`` (``fence`` reopened; closed when ``suffix`` follows), then
    ``suffix`` after a blank line."""
    if not suffix:  # nothing to close: no need to scan for fences
        return (fence.reopen if fence else "") + tail if tail.strip() else ""
    body = ""
    if tail.strip():
        body = render_chunk(tail, 0, len(tail), fence, close=True)[0]
    return body + PARAGRAPH_BREAK + suffix if body else suffix


class DraftLayout:
    """The cuts, the live draft and the final targets of one ``partial`` reply (see the module
    docstring).

    Attributes:
        max: the room of one message, in ``limits.unit`` (less after :meth:`shrink`).
        cuts: the frozen messages, in order.
        version: bumped by every change of what the live draft should show.
        final: the final targets, once laid out.
    """

    def __init__(self, settings: DeliverySettings, transcript: Transcript) -> None:
        self._settings = settings
        self._limits = settings.limits
        self._transcript = transcript
        self.max = settings.limits.max_length
        self.cuts: list[Frozen] = []
        self._live_units = 0
        """``measure`` of the live text, ``text[start:]`` (the reopened fence not included)."""
        self._live_has_text = False
        self.version = 0
        self._memo: tuple[int, str] = (-1, "")
        self._lines: dict[int, str] = {}
        """The status lines of the running round, by call, in the order they began."""
        self.status: str | None = None
        """``_lines`` joined and clipped (``None``: no line)."""
        self._status_round_over = False  # a round ended since the last status line
        self.final: list[Target] | None = None
        self._final_cuts: list[Frozen] = []
        self._final_body: str | None = None
        """What the final layout cut (``None`` for a refusal)."""
        self._final_formatted = True
        self._suffix: str | None = None
        """The line after the final text (the interrupted marker), redacted."""

    # -- the live draft -----------------------------------------------------------------------

    @property
    def live_room(self) -> int:
        return self.max - min(STATUS_ROOM, self.max // 4)

    @property
    def live_has_text(self) -> bool:
        return self._live_has_text

    def start(self) -> int:
        """Where the live draft starts in the text."""
        return self.cuts[-1].cut if self.cuts else 0

    def fence_in(self) -> Fence | None:
        return self.cuts[-1].fence if self.cuts else None

    def live_text(self) -> str:
        """The live draft's text (composed once per version)."""
        version, text = self._memo
        if version != self.version:
            status = clip_line(self._limits, self.status, self.max) if self.status else None
            text = compose(self._transcript.tail(self.start()), self.fence_in(), status)
            self._memo = (self.version, text)
        return text

    def append(self, appended: str) -> None:
        """Text was appended to the transcript: the status lines go; freeze what outgrew."""
        self._clear_status()
        self._live_units += measure(self._limits, appended)
        self._live_has_text = self._live_has_text or bool(appended.strip())
        self.version += 1
        self._extend()

    def set_status(self, call: int, status: str) -> None:
        """Tool call ``call`` began: its line goes under the lines of the calls that began
        before it since the last text (one line per call, architecture §3 "Tool status"). The
        lines take at most half a message."""
        if self._status_round_over:
            self._lines = {}
        self._status_round_over = False
        self._lines[call] = status
        self._show_status()

    def finish_status(self, call: int, status: str) -> None:
        """Tool call ``call`` ended: its line becomes ``status`` (``✓ name 0.4 s``), shown at
        the draft's next edit; nothing when its line is gone (text followed, a new round's
        lines replaced it)."""
        if self._lines.get(call, status) == status:
            return
        self._lines[call] = status
        self._show_status()

    def _show_status(self) -> None:
        lines = "\n".join(self._lines.values())
        self.status = clip_line(self._limits, lines, self._limits.max_length // 2)
        self.version += 1
        self._extend()

    def _clear_status(self) -> None:
        self._lines = {}
        self.status = None

    def new_status_round(self) -> None:
        """The next status line starts the lines anew (those shown stay until it comes)."""
        self._status_round_over = True

    def restart(self, round_start: int) -> None:
        """The round's text is gone: cuts past ``round_start`` are forgotten."""
        self.cuts = [frozen for frozen in self.cuts if frozen.cut <= round_start]
        self._clear_status()
        self._reset_live()
        self._extend()

    def end(self, suffix: str | None = None) -> None:
        """The answer is over; ``suffix`` (redacted: the interrupted marker) goes after the
        final text, after a blank line."""
        self._clear_status()
        self._suffix = suffix
        self.version += 1

    def freeze_live(self) -> None:
        """Freeze the live draft at the best cut of its text (its message has no preview edit
        left)."""
        start = self.start()
        self._freeze(start, self._transcript.tail(start), self.fence_in())

    def pin(self, index: int, start: int, end: int, body: str) -> bool:
        """Message ``index`` holds ``text[start:end]`` (shown as ``body``) for good: a preview
        send that timed out, assumed landed. The cuts after it are forgotten and the text from
        ``end`` on is laid out again in the messages after it. False (nothing changed) when
        message ``index`` does not start at ``start`` or the span is not in the text."""
        if self.final is not None or index > len(self.cuts) or not start < end:
            return False
        fence_in = self.cuts[index - 1].fence if index else None
        if (self.cuts[index - 1].cut if index else 0) != start or end > self._transcript.length:
            return False
        if index < len(self.cuts) and self.cuts[index].cut == end:
            return True  # a frozen message: it holds that text already
        self._transcript.rebase(start)
        tail = self._transcript.tail(start)
        fence = scan_fence(tail, 0, end - start, fence_in)
        self.cuts = [*self.cuts[:index], Frozen(end, fence, body)]
        self._reset_live()
        self._extend()
        return True

    def _reset_live(self) -> None:
        """Measure the live text again (after its start moved back)."""
        self._transcript.rebase(self.start())
        tail = self._transcript.tail(self.start())
        self._live_units = measure(self._limits, tail)
        self._live_has_text = bool(tail.strip())
        self.version += 1

    def _extend(self) -> None:
        """Freeze the live draft until its text fits in the live room and, with the status
        line, in the limit. Costs nothing but a comparison while it fits without a status."""
        while self._live_has_text:
            fence = self.fence_in()
            reopen = measure(self._limits, fence.reopen) if fence else 0
            fits = reopen + self._live_units <= self.live_room
            if fits and self.status is None:
                return
            start = self.start()
            tail = self._transcript.tail(start)
            if fits and self.status is not None:
                status = clip_line(self._limits, self.status, self.max)
                fits = measure(self._limits, compose(tail, fence, status)) <= self.max
            if fits:
                return
            self._freeze(start, tail, fence)

    def _freeze(self, start: int, tail: str, fence: Fence | None) -> None:
        chunk = find_cut(self._limits, tail, 0, len(tail), fence, self.max)
        body = render_chunk(tail, 0, chunk.cut, fence)[0]
        self.cuts.append(Frozen(start + chunk.cut, chunk.fence, body))
        rest = tail[chunk.cut :]
        self._live_units = measure(self._limits, rest)
        self._live_has_text = bool(rest.strip())
        self.version += 1
        self._transcript.settle(start + chunk.cut)

    # -- targets ------------------------------------------------------------------------------

    def count(self) -> int:
        """How many messages the reply should have now."""
        if self.final is not None:
            return len(self.final)
        return len(self.cuts) + (1 if self._live_has_text or self.status else 0)

    def target(self, index: int) -> Target:
        if self.final is not None:
            return self.final[index]
        if index < len(self.cuts):
            return Target.plain(self.cuts[index].body)
        return Target.plain(self.live_text())

    # -- the end ------------------------------------------------------------------------------

    def refuse(self, line: str) -> None:
        """The final text is ``line`` alone, plain (a refusal)."""
        self.final, self._final_body = [Target.plain(clip_line(self._limits, line, self.max))], None

    def lay_out_final(
        self, body: str, *, formatted: bool = True, keep: list[Frozen] | None = None
    ) -> None:
        """The final targets: the cuts ``keep`` (default: the preview's cuts) kept, the rest of
        ``body`` cut with the full limit and the suffix given to :meth:`end` after it; each
        message formatted where its rendering fits."""
        cuts = list(self.cuts if keep is None else keep)
        start = cuts[-1].cut if cuts else 0
        fence = cuts[-1].fence if cuts else None
        suffix = clip_line(self._limits, self._suffix, self.max) if self._suffix else None
        content_end = len(body.rstrip())  # the rest holds text while start is below it
        while start < content_end:
            reopen = fence.reopen if fence else ""
            # A code point is at least one unit: only a rest that may fit is measured.
            if len(reopen) + len(body) - start <= self.max:
                last = compose(body[start:], fence, suffix)
                if measure(self._limits, last) <= self.max:
                    break
            # Cut in place (no copy of the rest per message: linear in the body).
            chunk = find_cut(self._limits, body, start, len(body), fence, self.max)
            frozen = render_chunk(body, start, chunk.cut, fence)[0]
            cuts.append(Frozen(chunk.cut, chunk.fence, frozen))
            start, fence = chunk.cut, chunk.fence
        texts = [frozen.body for frozen in cuts]
        last = compose(body[start:], fence, suffix)
        if last:
            texts.append(last)
        self._final_cuts, self._final_body, self._final_formatted = cuts, body, formatted
        self.final = [self._formatted(text) if formatted else Target.plain(text) for text in texts]

    def _formatted(self, text: str) -> Target:
        formatted, form = fit_rendering(self._settings.rendering(text), text, self.max)
        return Target(text, formatted, form)

    # -- the platform counted more ------------------------------------------------------------

    def shrink(self, index: int, room: int) -> bool:
        """Lay message ``index`` and the next out again in ``room`` units. False when there is
        nothing to lay out again (a refusal's notice)."""
        if self.final is not None and self._final_body is None:
            return False
        self.max = room
        if self.final is not None and self._final_body is not None:
            keep = self._final_cuts[:index]
            self.lay_out_final(self._final_body, formatted=self._final_formatted, keep=keep)
            return True
        self.cuts = self.cuts[:index]
        self._reset_live()
        self._extend()
        return True
