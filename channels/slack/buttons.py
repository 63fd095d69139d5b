"""The buttons of one Slack channel (:mod:`channels.slack.controls` builds them): the Stop
button of each running answer, the Regenerate button of each thread's last answer and the open
approval prompts, and what a press names. No I/O: the adapter writes
(:mod:`channels.slack.answers`).

Per conversation — a (channel, thread ts) place — :class:`Buttons` keeps the answer in flight
(its asker and its Stop message) between ``answer_started`` and ``answer_finished``, and the
last answer's Regenerate message. Each button's ``value`` is a fresh token, so a press of an
old button names nothing (:meth:`Buttons.pressed` returns ``None``: stale). Who may press is
the orchestrator's decision (:meth:`channels.base.Channel.control`: the asker or an admin).
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from typing import Any

from channels.controls import ControlAction
from channels.slack.controls import APPROVE, DENY, REGENERATE, STOP

__all__ = ["Buttons", "Finished", "Place", "Pressed"]

Place = tuple[str, str | None]
"""(channel id, thread ts)."""


@dataclass
class _Answer:
    asker: str
    token: str
    stop_ts: str | None = None
    stop_posted: bool = False


@dataclass(frozen=True, slots=True)
class _Last:
    token: str
    asker: str
    ts: str


@dataclass(frozen=True, slots=True)
class Pressed:
    """A press of a live button: its place, action, the asker of its answer (``None``:
    unknown, only admins may press) and, for an approval, the prompt's token and choice."""

    chat: str
    thread: str | None
    action: ControlAction
    asker: str | None
    token: str = ""
    approve: bool = False


@dataclass(frozen=True, slots=True)
class Finished:
    """An answer ended: its Stop message to delete (``None``: none was posted) and its
    asker (``None``: no answer was live there)."""

    stop_ts: str | None
    asker: str | None


class Buttons:
    """The answers, Regenerate buttons and approval prompts of one channel."""

    def __init__(self) -> None:
        self._live: dict[Place, _Answer] = {}
        self._last: dict[Place, _Last] = {}
        self._approvals: dict[str, tuple[asyncio.Future[bool], Place, str | None]] = {}

    # -- answers ----------------------------------------------------------------------------

    def start(self, place: Place, asker: str) -> str | None:
        """An answer starts at ``place``; returns the ts of the previous answer's Regenerate
        message there, to delete (or None)."""
        self._live[place] = _Answer(asker, secrets.token_hex(8))
        previous = self._last.pop(place, None)
        return previous.ts if previous is not None else None

    def live(self, place: Place) -> bool:
        """An answer is being written at ``place``."""
        return place in self._live

    def asker(self, place: Place) -> str | None:
        """The asker of the live answer at ``place``."""
        answer = self._live.get(place)
        return answer.asker if answer is not None else None

    def stop_token(self, place: Place) -> str | None:
        """The token of the Stop button to post at ``place``: None when no answer is live
        there or its button was posted already."""
        answer = self._live.get(place)
        if answer is None or answer.stop_posted:
            return None
        answer.stop_posted = True
        return answer.token

    def stop_sent(self, place: Place, ts: str) -> None:
        answer = self._live.get(place)
        if answer is not None:
            answer.stop_ts = ts

    def finish(self, place: Place) -> Finished:
        """The answer at ``place`` is delivered: forget it."""
        answer = self._live.pop(place, None)
        if answer is None:
            return Finished(None, None)
        return Finished(answer.stop_ts, answer.asker)

    def regenerate_token(self) -> str:
        return secrets.token_hex(8)

    def regenerate_sent(self, place: Place, token: str, asker: str, ts: str) -> None:
        """The Regenerate message ``ts`` of the last answer at ``place`` was posted."""
        self._last[place] = _Last(token, asker, ts)

    # -- approvals --------------------------------------------------------------------------

    def open_approval(self, place: Place, asker: str | None) -> tuple[str, asyncio.Future[bool]]:
        """A new prompt's token and the future its accepted press resolves."""
        token = secrets.token_hex(8)
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._approvals[token] = (answer, place, asker)
        return token, answer

    def close_approval(self, token: str) -> None:
        self._approvals.pop(token, None)

    def answer_approval(self, token: str, approve: bool) -> None:
        """An accepted press of the prompt ``token``: its first answer counts."""
        entry = self._approvals.get(token)
        if entry is not None and not entry[0].done():
            entry[0].set_result(approve)

    # -- presses ----------------------------------------------------------------------------

    def pressed(self, action: dict[str, Any]) -> Pressed | None:
        """The live button one action of a ``block_actions`` payload names; None: stale."""
        action_id, token = action.get("action_id"), str(action.get("value", ""))
        if action_id in (APPROVE, DENY) and token in self._approvals:
            _, (chat, thread), asker = self._approvals[token]
            return Pressed(chat, thread, "approve", asker, token, action_id == APPROVE)
        if action_id == STOP:
            for (chat, thread), answer in self._live.items():
                if answer.token == token:
                    return Pressed(chat, thread, "stop", answer.asker)
        if action_id == REGENERATE:
            for (chat, thread), last in self._last.items():
                if last.token == token:
                    return Pressed(chat, thread, "regenerate", last.asker)
        return None

    def cancel(self) -> None:
        """Stopping: every open prompt goes unanswered."""
        for future, _, _ in self._approvals.values():
            future.cancel()
