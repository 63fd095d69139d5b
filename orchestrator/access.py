"""Who may talk to the bot (architecture §3 "Access")."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from channels.base import InboundMessage

__all__ = ["AccessControl"]

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
