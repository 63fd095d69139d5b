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

Pure data: channels import it, and so does the orchestrator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "REGENERATE_LABEL",
    "STOP_LABEL",
    "ControlAction",
    "ControlEvent",
    "ControlHandler",
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
