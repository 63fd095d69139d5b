"""Button presses (architecture §3 "Buttons", §5 "Chat controls"): what the orchestrator does
with a :class:`~channels.controls.ControlEvent` from any channel.

Only the user who asked, or an admin, may press an answer's buttons or answer a tool approval
(:func:`orchestrator.chats.roles.may_press`); anyone else gets one polite line. ``stop`` is
``/stop`` (on a shared store the request reaches the instance answering); ``regenerate`` queues
``/regenerate`` from the presser, so it waits behind a running answer like any message and is
held to the same limits; ``approve`` lets the channel take the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from channels.base import Channel, InboundMessage
from channels.controls import ControlEvent
from orchestrator.chats.roles import Presser, Roles, may_press
from orchestrator.store import ConversationStore
from orchestrator.turn.runner import TurnRunner

__all__ = ["NOTHING_RUNS", "NOT_YOURS", "ButtonPresses"]

NOT_YOURS = "Sorry, only the person who asked (or an admin) can use this button."
NOTHING_RUNS = "Nothing to stop."

Submit = Callable[[str, InboundMessage], Awaitable[None]]
"""Hands an inbound message of channel NAME to the daemon, as if it had arrived."""


class ButtonPresses:
    """Decides and carries out presses (one per daemon).

    Args:
        turns: the running turns (``stop``).
        store: the shared store's stop requests.
        submit: queues a message (``regenerate``).
    """

    def __init__(self, turns: TurnRunner, store: ConversationStore, submit: Submit) -> None:
        self._turns = turns
        self._store = store
        self._submit = submit

    async def press(self, channel: Channel, event: ControlEvent) -> str | None:
        """``None`` when the press was taken, else the line for the presser alone."""
        roles = Roles(getattr(channel.config, "admins", ()))
        presser = Presser(event.user_id, event.user_handle)
        if not may_press(roles, presser, event.asker_id):
            return NOT_YOURS
        key = (channel.name, event.chat_id, event.thread_id)
        if event.action == "stop":
            if self._turns.stop(key):
                return None
            if self._store.shared and await self._store.claimed(*key):
                await self._store.request_stop(*key)
                return None
            return NOTHING_RUNS
        if event.action == "regenerate":
            message = InboundMessage(
                channel=channel.name,
                chat_id=event.chat_id,
                sender_id=event.user_id,
                sender_name=f"@{event.user_handle}" if event.user_handle else event.user_id,
                text="/regenerate",
                is_direct=False,
                mentions_bot=True,
                thread_id=event.thread_id,
                sender_handle=event.user_handle,
            )
            await self._submit(channel.name, message)
        return None
