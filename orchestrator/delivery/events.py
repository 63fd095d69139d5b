"""Events fed to the delivery engine and the actions it returns (architecture §3).

Events are facts (nouns or past tense); actions are imperatives. All are frozen dataclasses.
The engine keeps at most one write in flight per chat: after it returns a write action the
caller executes it and feeds back :class:`WriteSucceeded` or :class:`WriteFailed`. Where it needs
the ``on_message_sending`` hook's verdict on a piece it returns :class:`GuardPiece` and takes the
verdict back as :class:`PieceGuarded` or :class:`PieceWithheld` (like an h11 event): the engine
never calls user code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Action",
    "AnswerEnded",
    "AnswerInterrupted",
    "AnswerRefused",
    "DeleteMessage",
    "DeliveryEvent",
    "EditMessage",
    "GuardPiece",
    "PieceGuarded",
    "PieceWithheld",
    "Restarted",
    "RoundEnded",
    "SendMessage",
    "SendTyping",
    "SleepUntil",
    "TextEmitted",
    "ToolFinished",
    "ToolStarted",
    "WriteAction",
    "WriteFailed",
    "WriteFailure",
    "WriteSucceeded",
    "WrittenElsewhere",
]


# -- events --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextEmitted:
    """Visible model text released by the outbound policy's redaction window (already redacted)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call began. ``call`` identifies it within the reply (the caller numbers the
    calls; no two of one reply share a number); ``status`` is its already-redacted status line
    (``⏳ current_time…``, architecture §3 "Tool status")."""

    call: int
    status: str


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """Tool call ``call`` ended; ``status`` is its finished line, already redacted
    (``✓ current_time 0.4 s`` or ``✗ lookup: timed out``). It replaces the call's ``⏳`` line
    where that still shows; a call never started, or whose line is gone, is ignored."""

    call: int
    status: str


@dataclass(frozen=True, slots=True)
class WrittenElsewhere:
    """A write to this reply's chat not made by the engine completed (an approval prompt, or
    its outcome edit): the next write keeps the spacing from it (architecture §3 "Spacing").
    ``sent``: it was a send (``multi_message_delay_ms`` counts from it too)."""

    sent: bool = True


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """A model turn ended with tool calls: the turn's narration is complete (flush_draft_turn)."""


@dataclass(frozen=True, slots=True)
class Restarted:
    """The round is being served again (architecture §2): drop what is held of it (architecture
    §4)."""


@dataclass(frozen=True, slots=True)
class AnswerEnded:
    """The reply is complete; everything the policy released has been fed."""


@dataclass(frozen=True, slots=True)
class AnswerInterrupted:
    """The reply ended without a proper answer; ``cause`` is a few words for the user.
    ``marker`` is the whole line shown after the text instead of ``⚠️ Answer interrupted:
    <cause>`` (``⏹ Stopped.`` when the user stopped it, architecture §3 "Stop")."""

    cause: str
    marker: str | None = None


@dataclass(frozen=True, slots=True)
class AnswerRefused:
    """A guardrail refused the reply: what was shown is replaced by ``notice``."""

    notice: str


@dataclass(frozen=True, slots=True)
class WriteSucceeded:
    """The write in flight landed. ``message_id`` is set for a send."""

    message_id: str | None = None


WriteFailure = Literal[
    "rate_limited",
    "not_modified",
    "too_long",
    "gone",
    "timeout",
    "refused",
    "failed",
    "moved",
    "unreachable",
]
"""Why a write failed, by error class (architecture §3 "Network errors"):

- ``rate_limited``: wait ``retry_after`` seconds; ``not_modified``: the edit shows that already;
- ``too_long``: the platform counted more than the renderer did;
- ``gone``: the message to edit or delete does not exist (deleted, or not found);
- ``timeout``: no answer in time, the write may have landed;
- ``refused``: refused outright (5xx, connection refused): it did not land;
- ``failed``: any other rejection (a 4xx such as "can't parse entities");
- ``moved``: the chat has a new id (the caller writes there from now on); the write did not
  land, and messages in the old chat can no longer be edited;
- ``unreachable``: the chat or thread no longer exists (a deleted forum topic): nothing more
  of the reply can be written.
"""


@dataclass(frozen=True, slots=True)
class WriteFailed:
    """The write in flight failed. ``retry_after`` (seconds) is set for ``rate_limited``."""

    reason: WriteFailure
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class PieceGuarded:
    """The hook's verdict on piece ``piece_id``, redacted again by the policy: the text to send,
    or ``None`` when the hook cancelled the piece."""

    piece_id: int
    text: str | None


@dataclass(frozen=True, slots=True)
class PieceWithheld:
    """The hook raised or timed out on piece ``piece_id``: it fails closed (architecture §4 "The
    hook"), and the piece is replaced by :data:`~orchestrator.delivery.planning.WITHHELD_NOTICE`."""

    piece_id: int


DeliveryEvent = (
    TextEmitted
    | ToolStarted
    | ToolFinished
    | RoundEnded
    | Restarted
    | AnswerEnded
    | AnswerInterrupted
    | AnswerRefused
    | WriteSucceeded
    | WriteFailed
    | PieceGuarded
    | PieceWithheld
    | WrittenElsewhere
)


# -- actions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendMessage:
    text: str
    formatted: bool = False


@dataclass(frozen=True, slots=True)
class EditMessage:
    message_id: str
    text: str
    formatted: bool = False


@dataclass(frozen=True, slots=True)
class DeleteMessage:
    message_id: str


@dataclass(frozen=True, slots=True)
class SendTyping:
    pass


@dataclass(frozen=True, slots=True)
class SleepUntil:
    """Nothing to do before ``deadline`` (monotonic seconds) unless a new event arrives."""

    deadline: float


@dataclass(frozen=True, slots=True)
class GuardPiece:
    """Run the ``on_message_sending`` hook on ``text`` and feed back :class:`PieceGuarded` (its
    output, redacted again) or :class:`PieceWithheld` (it raised or timed out) with the same
    ``piece_id``. Needs no spacing; the engine asks for one verdict at a time.

    ``span`` is where the piece lies in the text the policy emitted (all of the reply's
    ``TextEmitted`` joined, without the blank lines delivery puts between rounds), as
    ``(start, end)`` code-point offsets: the policy reads what was delivered between the last
    piece and this one there, instead of finding the piece again. ``None``: not known. Not
    part of a piece's identity (equality)."""

    piece_id: int
    text: str
    span: tuple[int, int] | None = field(default=None, compare=False)


WriteAction = SendMessage | EditMessage | DeleteMessage
"""The actions that write to the chat: exactly one platform write each."""

Action = SendMessage | EditMessage | DeleteMessage | SendTyping | SleepUntil | GuardPiece
