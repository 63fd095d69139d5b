"""Events fed to the delivery engine and the actions it returns (DESIGN §3, STYLE §2).

Events are facts (nouns or past tense); actions are imperatives. All are frozen dataclasses.
The engine keeps at most one write in flight per chat: after it returns a write action the
caller executes it and feeds back :class:`WriteSucceeded` or :class:`WriteFailed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Action",
    "AnswerEnded",
    "AnswerInterrupted",
    "AnswerRefused",
    "DeleteMessage",
    "DeliveryEvent",
    "EditMessage",
    "Restarted",
    "RoundEnded",
    "SendMessage",
    "SendTyping",
    "SleepUntil",
    "TextEmitted",
    "ToolFinished",
    "ToolStarted",
    "WriteFailed",
    "WriteSucceeded",
]


# -- events --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextEmitted:
    """Visible model text released by the outbound policy's redaction window (already redacted)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool began; ``status`` is the already-redacted status line (e.g. ``⏳ current_time…``)."""

    status: str


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """The running tool ended (its status line goes away when text follows or the answer ends)."""


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """A model turn ended with tool calls: the turn's narration is complete (flush_draft_turn)."""


@dataclass(frozen=True, slots=True)
class Restarted:
    """The round is being served again (DESIGN §2): drop what is held of it (DESIGN §4)."""


@dataclass(frozen=True, slots=True)
class AnswerEnded:
    """The reply is complete; everything the policy released has been fed."""


@dataclass(frozen=True, slots=True)
class AnswerInterrupted:
    """The reply ended without a proper answer; ``cause`` is a few words for the user.
    ``marker`` is the whole line shown after the text instead of ``⚠️ Answer interrupted:
    <cause>`` (``⏹ Stopped.`` when the user stopped it, DESIGN §3 "Stop")."""

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


WriteFailure = Literal["rate_limited", "not_modified", "too_long", "gone", "timeout", "failed"]


@dataclass(frozen=True, slots=True)
class WriteFailed:
    """The write in flight failed. ``retry_after`` (seconds) is set for ``rate_limited``."""

    reason: WriteFailure
    retry_after: float | None = None


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


Action = SendMessage | EditMessage | DeleteMessage | SendTyping | SleepUntil
