"""Pieces shared by the delivery engine and its two planners (architecture §3).

The engine (:mod:`orchestrator.delivery.engine`) owns time, the write in flight and the event
table; a *planner* decides the layout of one mode and says which write comes next, by pure
functions on its state (kept in the engine's
:class:`~orchestrator.delivery.reply_state.ReplyState`): :mod:`~orchestrator.delivery.drafts`
for ``partial``, :mod:`~orchestrator.delivery.pieces` for ``off`` and ``multi_message``. Both read
the reply's visible text from one :class:`Transcript`, and both turn a failed write into one
:class:`Effect` by the same table, :data:`FAILURE_EFFECTS` (architecture §3 "Network errors").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Enum
from typing import Literal

from channels.base import ChannelLimits, Rendering
from orchestrator.delivery.events import (
    DeleteMessage,
    EditMessage,
    SendMessage,
    WriteAction,
    WriteFailure,
)
from orchestrator.delivery.splitting import fit_end, measure, scan_fence

__all__ = [
    "COUNTER_NAMES",
    "FAILURE_EFFECTS",
    "MAX_ATTEMPTS",
    "NO_COUNTS",
    "PARAGRAPH_BREAK",
    "REFUSED_BACKOFF_SECS",
    "RESTARTED_NOTICE",
    "WITHHELD_NOTICE",
    "DeliveryStats",
    "Effect",
    "Ending",
    "Transcript",
    "Write",
    "WriteKind",
    "append_line",
    "as_stats",
    "clip_line",
    "counted",
    "fit_rendering",
    "interrupted_marker",
]

PARAGRAPH_BREAK = "\n\n"
"""Put between rounds' texts, and before a status line or the interrupted marker."""

RESTARTED_NOTICE = "(answer restarted)"
"""Sent in ``multi_message`` before a new attempt's first piece when the failed one showed some
(architecture §4 "Restart")."""

WITHHELD_NOTICE = "⚠️ Part of this answer was withheld."
"""What replaces a piece whose hook raised or timed out (architecture §4 "The hook")."""

MAX_ATTEMPTS = 3
"""Tries of one write that timed out or was refused before it is given up (a refused edit: its
text then goes out as a new message)."""

REFUSED_BACKOFF_SECS = (1.0, 3.0)
"""Waits before the 2nd and 3rd try of a refused write, in seconds: with the spacing, three tries
within about 10 s (architecture §3 "Network errors")."""

WriteKind = Literal["send", "edit", "delete"]


def interrupted_marker(cause: str) -> str:
    """The line that follows an interrupted answer (architecture §3 "Interrupted answers")."""
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


def fit_rendering(rendering: Rendering, text: str, room: int) -> tuple[bool, str]:
    """Whether ``text`` goes out formatted, and the form it then shows: formatted when its
    rendering fits in ``room`` units, else plain (one message either way: the caller laid
    ``text`` out to fit plain)."""
    if rendering.length <= room:
        return True, rendering.form
    return False, text


class Transcript:
    """The reply's visible text: every round's emitted text, later rounds after a blank line.

    ``round_start`` is the length of the text before the current round (its separator not
    included), where :meth:`restart` cuts back to (architecture §4 "Restart").

    Appending costs the length of the appended text, whatever the length of the whole: the text
    before :attr:`base` (moved forward by :meth:`settle` once a planner no longer reads it) is
    kept in parts and joined only when :attr:`text` is read; :meth:`tail` from ``base`` on joins
    only what follows it.

    Given ``measure`` (the length of a text in the channel's unit: ``partial``'s and
    ``multi_message``'s planners read it), it also keeps :attr:`units`, the measure of the whole
    text, and, with ``visible`` (``partial``), :attr:`visible_end`, where its last character that
    is not whitespace ends, as each append comes (so the planners' immutable records do not
    change per delta: they hold offsets and measures).
    """

    def __init__(
        self, measure: Callable[[str], int] | None = None, *, visible: bool = True
    ) -> None:
        self._measure = measure
        self._visible = visible and measure is not None
        self.units = 0
        """The measure of the whole text (0 without ``measure``)."""
        self.visible_end = 0
        """The offset just after the last character that is not whitespace (0: none; kept only
        with ``measure`` and ``visible``)."""
        self._settled: list[str] = []
        self._base = 0
        self._live: list[str] = []
        self._live_length = 0
        self._live_joined: str | None = ""
        self.round_start = 0
        self._separator_due = False
        self._round_has_separator = False
        self._separators: list[int] = []
        """Where a ``PARAGRAPH_BREAK`` between rounds was put (offsets into the text)."""

    @property
    def length(self) -> int:
        """Length of the text in code points."""
        return self._base + self._live_length

    @property
    def base(self) -> int:
        return self._base

    @property
    def text(self) -> str:
        """The whole text (joins it: costs its length)."""
        return "".join(self._settled) + self._live_text()

    def _live_text(self) -> str:
        if self._live_joined is None:
            self._live_joined = "".join(self._live)
            self._live = [self._live_joined] if self._live_joined else []
        return self._live_joined

    def tail(self, start: int) -> str:
        """``text[start:]``; costs the length of that tail when ``start >= base``."""
        if start >= self._base:
            return self._live_text()[start - self._base :]
        return self.text[start:]

    def settle(self, offset: int) -> None:
        """The text before ``offset`` (clamped to the length) is no longer read per delta."""
        offset = min(offset, self.length)
        if offset <= self._base:
            return
        live = self._live_text()
        cut = offset - self._base
        self._settled.append(live[:cut])
        self._set_live(live[cut:], offset)

    def rebase(self, offset: int) -> None:
        """Read per delta from ``offset`` on again (a planner's start moved back: a restart, a
        message laid out again); costs the length of the text once."""
        if offset >= self._base:
            self.settle(offset)
            return
        whole = self.text
        self._settled = [whole[:offset]]
        self._set_live(whole[offset:], offset)

    def _set_live(self, live: str, base: int) -> None:
        self._base = base
        self._live = [live] if live else []
        self._live_length = len(live)
        self._live_joined = live

    def emitted_offset(self, offset: int) -> int:
        """``offset`` into the text as an offset into what the policy emitted: the text without
        the blank lines put between rounds (a pure query)."""
        size = len(PARAGRAPH_BREAK)
        return offset - sum(min(offset - at, size) for at in self._separators if at < offset)

    def append(self, text: str) -> str:
        """Add emitted text; a new round's first text is preceded by ``PARAGRAPH_BREAK`` when
        earlier rounds showed any text. Returns what was appended (the separator included)."""
        if not text:
            return ""
        if self._separator_due:
            if self.length:
                self._separators.append(self.length)
                text = PARAGRAPH_BREAK + text
            self._separator_due = False
        self._live.append(text)
        self._live_length += len(text)
        self._live_joined = None
        if self._measure is not None:
            self.units += self._measure(text)
            if self._visible:
                kept = text.rstrip()
                if kept:
                    self.visible_end = self._base + self._live_length - (len(text) - len(kept))
        return text

    def end_round(self) -> None:
        self.round_start = self.length
        self._separator_due = self._round_has_separator = True

    def restart(self) -> None:
        """Forget the current round's text (costs the length of the text once)."""
        whole = self.text[: self.round_start]
        self._separators = [at for at in self._separators if at < self.round_start]
        self._settled = []
        self._set_live(whole, 0)
        self._separator_due = self._round_has_separator
        if self._measure is not None:
            self.units = self._measure(whole)
            self.visible_end = len(whole.rstrip())


@dataclass(frozen=True, slots=True)
class Ending:
    """How the answer ended: ``ended``, ``interrupted`` (with its marker line, redacted) or
    ``refused`` (with its notice, redacted)."""

    kind: Literal["ended", "interrupted", "refused"]
    line: str = ""


@dataclass(frozen=True, slots=True)
class DeliveryStats:
    """What one reply's delivery did.

    Attributes:
        writes_sent: sends, edits and deletes started (typing not counted).
        messages_created: sends that returned a message id.
        edits_sent: edits started.
        deletes_sent: deletes started.
        rate_limited: writes answered with a rate limit.
        writes_given_up: writes abandoned after failing (logged by the driver).
        unconfirmed_sends: sends that timed out (assumed landed, never re-sent).
        plain_fallbacks: formatted writes retried as plain text after failing.
        writes_refused: writes refused outright (5xx, connection refused), retried.
        resent_as_new: messages whose edits kept failing, their text sent as a new message.
        pieces_withheld: pieces replaced by the withheld notice (the hook failed).
        unreachable: 1 when a write found the chat or thread gone (the rest was not written).
    """

    writes_sent: int = 0
    messages_created: int = 0
    edits_sent: int = 0
    deletes_sent: int = 0
    rate_limited: int = 0
    writes_given_up: int = 0
    unconfirmed_sends: int = 0
    plain_fallbacks: int = 0
    writes_refused: int = 0
    resent_as_new: int = 0
    pieces_withheld: int = 0
    unreachable: int = 0


COUNTER_NAMES = tuple(field.name for field in fields(DeliveryStats))
"""The counters of :class:`DeliveryStats`, in the order of a counts tuple."""
_COUNTER_INDEX = {name: i for i, name in enumerate(COUNTER_NAMES)}
NO_COUNTS = (0,) * len(COUNTER_NAMES)
"""The counts of a reply that did nothing yet."""


def counted(counts: tuple[int, ...], names: tuple[str, ...]) -> tuple[int, ...]:
    """``counts`` (in :data:`COUNTER_NAMES` order) with each counter named in ``names`` one
    more (a name may come twice). A tuple, not a :class:`DeliveryStats`: it is built per write."""
    if not names:
        return counts
    grown = list(counts)
    for name in names:
        grown[_COUNTER_INDEX[name]] += 1
    return tuple(grown)


def as_stats(counts: tuple[int, ...]) -> DeliveryStats:
    return DeliveryStats(*counts)


@dataclass(frozen=True, slots=True)
class Write:
    """A write a planner chose: the action and whether it carries final text (not a preview)."""

    action: WriteAction
    final: bool = False

    @property
    def kind(self) -> WriteKind:
        match self.action:
            case SendMessage():
                return "send"
            case EditMessage():
                return "edit"
            case DeleteMessage():
                return "delete"

    @property
    def text(self) -> str:
        """The text written (``""`` for a delete)."""
        return "" if isinstance(self.action, DeleteMessage) else self.action.text

    @property
    def formatted(self) -> bool:
        return not isinstance(self.action, DeleteMessage) and self.action.formatted


class Effect(Enum):
    """What a failed write means for what it wrote (the value of :data:`FAILURE_EFFECTS`)."""

    SHOWN = "shown"
    """It shows that already (an edit "not modified"; a delete of what is gone)."""
    UNCONFIRMED = "unconfirmed"
    """It may have landed (timed out): a send is assumed landed and never re-sent; an edit is
    retried with the newest text (not an identical edit), up to ``MAX_ATTEMPTS``."""
    RETRY = "retry"
    """It did not land (refused): back off, retry; after ``MAX_ATTEMPTS`` an edit's text goes
    out as a new message, a send is given up."""
    SHRINK = "shrink"
    """Too long for the platform: laid out again with a quarter less room."""
    PLAIN = "plain"
    """Rejected: a formatted write is retried once plain; a plain one is given up."""
    MOVED = "moved"
    """The chat moved (a group became a supergroup): a send goes again, to the new chat, at
    once; a message in the old chat can no longer be edited, so its text goes out as a new
    message; a delete there is moot."""


FAILURE_EFFECTS: dict[tuple[WriteKind, WriteFailure], Effect] = {
    ("send", "not_modified"): Effect.PLAIN,
    ("send", "too_long"): Effect.SHRINK,
    ("send", "gone"): Effect.RETRY,
    ("send", "timeout"): Effect.UNCONFIRMED,
    ("send", "refused"): Effect.RETRY,
    ("send", "failed"): Effect.PLAIN,
    ("edit", "not_modified"): Effect.SHOWN,
    ("edit", "too_long"): Effect.SHRINK,
    ("edit", "gone"): Effect.RETRY,
    ("edit", "timeout"): Effect.UNCONFIRMED,
    ("edit", "refused"): Effect.RETRY,
    ("edit", "failed"): Effect.PLAIN,
    ("delete", "not_modified"): Effect.SHOWN,
    ("delete", "too_long"): Effect.PLAIN,
    ("delete", "gone"): Effect.SHOWN,
    ("delete", "timeout"): Effect.UNCONFIRMED,
    ("delete", "refused"): Effect.RETRY,
    ("delete", "failed"): Effect.PLAIN,
    ("send", "moved"): Effect.MOVED,
    ("edit", "moved"): Effect.MOVED,
    ("delete", "moved"): Effect.MOVED,
}
"""By kind of write and error class (architecture §3 "Network errors"). ``rate_limited`` and
``unreachable`` are not here: the engine waits the first out (the planner writes its newest state
then) and stops the reply's writes on the second."""
