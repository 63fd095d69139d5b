"""Pieces shared by the delivery engine and its two planners (DESIGN §3).

The engine (:mod:`orchestrator.delivery.engine`) owns time, the write in flight and the event
table; a *planner* owns the layout of one mode and says which write comes next:
:class:`~orchestrator.delivery.drafts.DraftPlanner` for ``partial``,
:class:`~orchestrator.delivery.pieces.QueuePlanner` for ``off`` and ``multi_message``. Both read
the reply's visible text from one :class:`Transcript`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from channels.base import ChannelLimits
from orchestrator.delivery.events import DeleteMessage, EditMessage, SendMessage, WriteFailure
from orchestrator.delivery.splitting import fit_end, measure, scan_fence

__all__ = [
    "MAX_ATTEMPTS",
    "PARAGRAPH_BREAK",
    "RESTARTED_NOTICE",
    "Counters",
    "Ending",
    "PlannedWrite",
    "Planner",
    "Transcript",
    "WriteKind",
    "append_line",
    "clip_line",
    "interrupted_marker",
]

PARAGRAPH_BREAK = "\n\n"
"""Put between rounds' texts, and before a status line or the interrupted marker."""

RESTARTED_NOTICE = "(answer restarted)"
"""Sent in ``multi_message`` before a new attempt's first piece when the failed one showed some
(DESIGN §4 "Restart")."""

MAX_ATTEMPTS = 3
"""Consecutive timeouts of one message's write before it is given up (counted in stats)."""

WriteKind = Literal["send", "edit", "delete"]


def interrupted_marker(cause: str) -> str:
    """The line that follows an interrupted answer (DESIGN §3 "Interrupted answers")."""
    return f"⚠️ Answer interrupted: {cause}"


def append_line(text: str, line: str) -> str:
    """``text``, then ``line`` after a blank line (a code fence left open is closed first, so
    the line does not render as code); ``line`` alone when ``text`` is blank."""
    if not text.strip():
        return line
    fence = scan_fence(text, 0, len(text), None)
    if fence is not None:
        text += ("" if text.endswith("\n") else "\n") + fence.marker
    return text + PARAGRAPH_BREAK + line


def clip_line(limits: ChannelLimits, line: str, room: int) -> str:
    """``line`` cut with an ellipsis to at most ``room`` units (status lines, notices)."""
    if measure(limits, line) <= room:
        return line
    return line[: fit_end(limits, line, 0, len(line), max(room - 1, 0))] + "…"


class Transcript:
    """The reply's visible text: every round's emitted text, later rounds after a blank line.

    ``round_start`` is the length of the text before the current round (its separator not
    included), where :meth:`restart` cuts back to (DESIGN §4 "Restart").
    """

    def __init__(self) -> None:
        self.text = ""
        self.round_start = 0
        self._separator_due = False
        self._round_has_separator = False

    def append(self, text: str) -> None:
        """Add emitted text; a new round's first text is preceded by ``PARAGRAPH_BREAK`` when
        earlier rounds showed any text."""
        if not text:
            return
        if self._separator_due:
            if self.text:
                self.text += PARAGRAPH_BREAK
            self._separator_due = False
        self.text += text

    def end_round(self) -> None:
        self.round_start = len(self.text)
        self._separator_due = self._round_has_separator = True

    def restart(self) -> None:
        """Forget the current round's text."""
        self.text = self.text[: self.round_start]
        self._separator_due = self._round_has_separator


@dataclass(frozen=True, slots=True)
class Ending:
    """How the answer ended: ``ended``, ``interrupted`` (with its marker line, redacted) or
    ``refused`` (with its notice, redacted)."""

    kind: Literal["ended", "interrupted", "refused"]
    line: str = ""


@dataclass(slots=True)
class Counters:
    """Running totals kept by the engine and its planner (see ``DeliveryStats``)."""

    writes_sent: int = 0
    messages_created: int = 0
    edits_sent: int = 0
    deletes_sent: int = 0
    rate_limited: int = 0
    writes_given_up: int = 0
    unconfirmed_sends: int = 0
    plain_fallbacks: int = 0


@dataclass(slots=True)
class PlannedWrite:
    """A write a planner chose, with the planner's own handle on what it writes."""

    action: SendMessage | EditMessage | DeleteMessage
    target: object
    final: bool = False

    @property
    def kind(self) -> WriteKind:
        if isinstance(self.action, SendMessage):
            return "send"
        return "edit" if isinstance(self.action, EditMessage) else "delete"


class Planner(Protocol):
    """What the engine asks of a mode's planner.

    The engine calls :meth:`plan` only when a write may start now, and starts what it returns;
    :meth:`next_kind` peeks without committing. Exactly one of :meth:`succeeded` /
    :meth:`failed` (every outcome but a rate limit; ``not_modified`` on an edit means it shows
    that text already) / :meth:`deferred` (rate limited) follows each planned write.
    """

    def on_text(self) -> None: ...
    def on_status(self, status: str) -> None: ...
    def on_round_ended(self) -> None: ...
    def on_restarted(self) -> None: ...
    def on_end(self, ending: Ending) -> None: ...
    def next_kind(self) -> WriteKind | None: ...
    def plan(self) -> PlannedWrite | None: ...
    def succeeded(self, write: PlannedWrite, message_id: str | None) -> None: ...
    def failed(self, write: PlannedWrite, reason: WriteFailure) -> None: ...
    def deferred(self, write: PlannedWrite) -> None: ...
