"""The buttons the Slack channel is waiting on (:mod:`channels.slack.controls` builds them):
open approval prompts and the Stop buttons of running answers, and what a press does.

Each prompt and each Stop button gets a fresh token as its ``value``; a press is matched by
token, and counts only when ``may_press(user, channel, thread)`` holds (the asker of that
thread). An approval press resolves its prompt's future; a Stop press calls ``on_stop``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

from channels.slack.controls import APPROVE, DENY, STOP

__all__ = ["Buttons"]

Place = tuple[str, str | None]
"""(channel id, thread ts)."""


class Buttons:
    """Open prompts and Stop buttons of one channel."""

    def __init__(
        self,
        may_press: Callable[[str, str, str | None], bool],
        on_stop: Callable[[str, str | None, str], None],
    ) -> None:
        self._may_press = may_press
        self._on_stop = on_stop
        self._approvals: dict[str, tuple[asyncio.Future[bool], Place]] = {}
        self._stops: dict[str, Place] = {}
        self._controls: dict[Place, str | None] = {}
        """Places with a Stop button: its message ts (None while it is being sent)."""

    def open_approval(self, place: Place) -> tuple[str, asyncio.Future[bool]]:
        """A new prompt's token and the future its press resolves."""
        token = secrets.token_hex(8)
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._approvals[token] = (answer, place)
        return token, answer

    def close_approval(self, token: str) -> None:
        self._approvals.pop(token, None)

    def stop_token(self, place: Place) -> str | None:
        """A token for a new Stop button at ``place``; None when it has one already."""
        if place in self._controls:
            return None
        self._controls[place] = None
        token = secrets.token_hex(8)
        self._stops[token] = place
        return token

    def stop_sent(self, place: Place, ts: str) -> None:
        self._controls[place] = ts

    def finished(self, channel: str) -> list[str]:
        """Forget the Stop buttons in ``channel``; returns the ts of those to delete."""
        gone = [place for place, ts in self._controls.items() if place[0] == channel and ts]
        for token in [t for t, place in self._stops.items() if place in gone]:
            del self._stops[token]
        return [ts for place in gone if (ts := self._controls.pop(place))]

    def pressed(self, payload: dict[str, Any]) -> None:
        """A ``block_actions`` payload."""
        user = str((payload.get("user") or {}).get("id", ""))
        for action in payload.get("actions") or []:
            action_id, value = action.get("action_id"), str(action.get("value", ""))
            if action_id in (APPROVE, DENY) and value in self._approvals:
                future, (chat, thread) = self._approvals[value]
                if self._may_press(user, chat, thread) and not future.done():
                    future.set_result(action_id == APPROVE)
            elif action_id == STOP and value in self._stops:
                chat, thread = self._stops[value]
                if self._may_press(user, chat, thread):
                    self._on_stop(chat, thread, user)

    def cancel(self) -> None:
        """Stopping: every open prompt goes unanswered."""
        for future, _ in self._approvals.values():
            future.cancel()
