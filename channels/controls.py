"""The control seam (architecture §3 "Buttons"): what a chat network's buttons and reactions
become for the orchestrator, whatever the network.

A channel shows answer buttons — ⏹ Stop while an answer streams, 🔄 Regenerate on the last
answer — as its network allows (a Telegram inline keyboard, a Discord button component, a
Matrix reaction), between :meth:`~channels.base.Channel.answer_started` and
:meth:`~channels.base.Channel.answer_finished`, which the orchestrator calls around each answer.
A press becomes a :class:`ControlEvent` handed to :meth:`~channels.base.Channel.control`: the
orchestrator decides (one pure role function: the asker or an admin) and acts — ``stop`` is
``/stop``, ``regenerate`` asks the last question again — and returns ``None``, or the one line
refusing the presser, which the channel shows to that user alone where it can. A tool approval's
press is asked the same way (``approve``) before the channel takes its answer.

:class:`AnswerControls` holds the channel's side of it (defaults: no buttons), a base of
:class:`channels.base.Channel`; :data:`COMMAND_MENU` is what a network's command menu lists.
No I/O: channels import it, and so does the orchestrator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, final

__all__ = [
    "COMMAND_MENU",
    "REGENERATE_LABEL",
    "STOP_LABEL",
    "UNSPACED",
    "AnswerControls",
    "ControlAction",
    "ControlEvent",
    "ControlHandler",
    "WriteSpacing",
]

ControlAction = Literal["stop", "regenerate", "approve"]

STOP_LABEL = "⏹ Stop"
REGENERATE_LABEL = "🔄 Regenerate"


@dataclass(frozen=True, slots=True)
class ControlEvent:
    """A user pressed ``action`` on an answer (or an approval prompt) in the conversation
    (``chat_id``, ``thread_id``) of channel ``channel``.

    ``user_id`` and ``user_handle`` are the presser's (the handle the network verified, or
    ``None``); ``asker_id`` is the sender of the message the answer answers, as the channel
    recorded it when the answer started (``None``: unknown — only admins may press)."""

    channel: str
    chat_id: str
    thread_id: str | None
    action: ControlAction
    user_id: str
    user_handle: str | None = None
    asker_id: str | None = None


ControlHandler = Callable[[ControlEvent], Awaitable[str | None]]
"""The orchestrator's answer to a press: ``None`` (accepted, acted on), or the one line that
refuses it, for the presser alone."""


COMMAND_MENU: tuple[tuple[str, str, str | None], ...] = (
    ("new", "Start a new conversation", None),
    ("stop", "Stop the answer being written", None),
    ("model", "List the models, or switch: /model NAME", "name"),
    ("system", "Set this chat's system prompt, or /system reset", "text"),
    ("settings", "Show this chat's model and system prompt", None),
    ("status", "Model, context fill and tokens today", None),
    ("usage", "Your and this chat's tokens and cost", None),
    ("reset", "Forget this conversation (as /new)", None),
    ("help", "List the commands", None),
)
"""The commands a network's menu offers (Telegram ``setMyCommands``, Discord slash commands):
``(name, description, argument)``; ``argument`` names the one optional free-text argument
(``None``: none). Every one reaches the orchestrator as the text ``/name argument``."""


class WriteSpacing(Protocol):
    """The chat's spacing for writes an adapter makes on its own (architecture §3 "Spacing"):
    the outcome edit of an approval prompt. The adapter never sleeps itself: it says when a
    write landed and awaits :meth:`next_write` before the next one."""

    def landed(self) -> None:
        """A write to the chat just completed."""

    async def next_write(self) -> None:
        """Return once the chat's spacing allows the next write."""


class _Unspaced:
    def landed(self) -> None:
        return None

    async def next_write(self) -> None:
        return None


UNSPACED: WriteSpacing = _Unspaced()
"""No spacing: every write may start at once."""


class AnswerControls:
    """The answer buttons of a channel (module docstring); :class:`~channels.base.Channel`
    derives from it, an adapter overrides the three ``answer_*`` methods."""

    name: str

    on_control: ControlHandler | None = None
    """Set by the daemon: decides a press; ``None``: every press an allowed user makes is
    taken."""

    @final
    async def control(self, event: ControlEvent) -> str | None:
        """Hand a press to the orchestrator: ``None`` when it was taken, else the one line that
        refuses it (show it to the presser alone)."""
        if self.on_control is None:
            return None
        return await self.on_control(event)

    async def answer_started(self, chat_id: str, thread_id: str | None, asker_id: str) -> None:
        """An answer to ``asker_id`` starts in the conversation: show a Stop button on its
        messages until :meth:`answer_finished` (default: the network has none)."""
        return None

    async def answer_finishing(self, chat_id: str, thread_id: str | None) -> None:
        """The answer's model work is over; its last writes follow (its final text, or the
        stop marker): they may carry Regenerate instead of Stop, which spares a write of their
        own. Must not wait: called between two events of the answer's delivery (default:
        nothing)."""
        return None

    async def answer_finished(
        self,
        chat_id: str,
        thread_id: str | None,
        *,
        regenerate: bool,
        spacing: WriteSpacing = UNSPACED,
    ) -> None:
        """The answer is delivered: remove its Stop button and offer Regenerate on its last
        message, taking it from the previous answer; each write waits for ``spacing`` (the
        chat's, after the reply's last write). ``regenerate`` False: it could not be delivered
        (the chat or thread is gone): write nothing (default: nothing)."""
        return None
