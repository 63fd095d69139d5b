"""Roles (architecture §5 "Chat controls"): who may change a chat's settings and who may answer
a button, one pure function each.

``admins`` of a channel are user ids or names, matched as ``allowed_users`` is (the id, or the
handle the network verified; never a display name). In a private chat the user acts for their
own chat: they may change its settings, but they are no admin unless listed (limits hold them).
In groups, rooms and servers only admins change settings. A button on an answer (Stop,
Regenerate) and a tool approval are answered by the user who asked, or by an admin.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Presser", "Roles", "may_change_settings", "may_press"]


@dataclass(frozen=True, slots=True)
class Presser:
    """A user acting: their id and the handle the network verified (``None``: none)."""

    user_id: str
    handle: str | None = None


class Roles:
    """The admins of one channel."""

    def __init__(self, admins: Iterable[str | int]) -> None:
        self._admins = {str(a).strip().lstrip("@").lower() for a in admins} - {""}

    def is_admin(self, user: Presser) -> bool:
        names = {user.user_id.lower()}
        if user.handle:
            names.add(user.handle.lstrip("@").lower())
        return bool(names & self._admins)


def may_change_settings(roles: Roles, user: Presser, *, is_direct: bool) -> bool:
    """Whether ``user`` may change the chat's settings (``/model``, ``/system``): anyone in
    their private chat, only admins elsewhere."""
    return is_direct or roles.is_admin(user)


def may_press(roles: Roles, user: Presser, asker_id: str | None) -> bool:
    """Whether ``user`` may press a button of the answer to ``asker_id`` (Stop, Regenerate,
    an approval): the asker or an admin. ``asker_id`` ``None`` (unknown): admins only."""
    return (asker_id is not None and user.user_id == asker_id) or roles.is_admin(user)
