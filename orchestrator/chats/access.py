"""Who may talk to the bot (architecture §3 "Access").

A sender who is not in ``allowed_users`` is ignored, but told once (per channel, for the life of
the process) what their own user id is, when they address the bot (a direct chat, a mention or
a reply to it), so the admin can add it; a group chatter who is not talking to the bot is never
answered. At most :data:`TOLD_MAX` senders are remembered per channel: beyond that, new senders
are only logged (a flood of strangers gets no flood of answers).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from channels.base import InboundMessage

__all__ = ["TOLD_MAX", "AccessControl", "not_allowed_notice"]

TOLD_MAX = 10_000
"""Senders told their id, remembered per channel; beyond this number no one new is told."""


def not_allowed_notice(sender_id: str) -> str:
    """What a sender who is not allowed is told, once."""
    return (
        f"Sorry, you are not on this bot's list of allowed users. Your user id is {sender_id}: "
        "send it to the bot's admin, who can add it to allowed_users."
    )


log = logging.getLogger(__name__)


class AccessControl:
    """``allowed_users`` (ids or names, with or without ``@``; ``"*"`` = everyone; empty = nobody)
    and the group rule (``respond_in_groups``: answer only when mentioned or replied to, unless
    ``all``). An unknown sender is logged once."""

    def __init__(self, channel: str, allowed_users: Iterable[str | int], respond_in_groups: str):
        self._channel = channel
        allowed = {str(user).strip().lstrip("@").lower() for user in allowed_users}
        self._everyone = "*" in allowed
        self._allowed = allowed - {"*"}
        self._groups_all = respond_in_groups == "all"
        self._warned: set[str] = set()
        self._told: set[str] = set()
        if not self._everyone and not self._allowed:
            log.warning(
                "channel %s: allowed_users is empty, nobody may use the bot "
                '(list user ids or names, or "*" for everyone)',
                channel,
            )

    def allows(self, message: InboundMessage) -> bool:
        if not self._is_allowed_sender(message):
            if message.sender_id not in self._warned:
                self._warned.add(message.sender_id)
                log.warning(
                    "channel %s: ignoring messages from %s (id %s): not in allowed_users",
                    self._channel,
                    message.sender_name,
                    message.sender_id,
                )
            return False
        return message.is_direct or message.mentions_bot or self._groups_all

    def refusal_notice(self, message: InboundMessage) -> str | None:
        """The notice to send for ``message`` from a sender who is not allowed, when they
        address the bot and were not told yet; None otherwise. A query: :meth:`told` records
        that the notice went out."""
        if self._is_allowed_sender(message) or message.sender_id in self._told:
            return None
        if not (message.is_direct or message.mentions_bot) or len(self._told) >= TOLD_MAX:
            return None
        return not_allowed_notice(message.sender_id)

    def told(self, message: InboundMessage) -> None:
        """Remember that ``message``'s sender was told their id (:meth:`refusal_notice`)."""
        self._told.add(message.sender_id)

    def _is_allowed_sender(self, message: InboundMessage) -> bool:
        if self._everyone:
            return True
        # Only the id and the handle the network verified count: a display name is chosen
        # freely by the user ("alice", "999", even "@alice" must not pass for the user alice or
        # the id 999), so ``sender_name`` is never looked at.
        names = {message.sender_id.lower()}
        if message.sender_handle:
            names.add(message.sender_handle.lstrip("@").lower())
        return bool(names & self._allowed)
