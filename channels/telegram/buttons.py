"""The Telegram channel's answer buttons (architecture §3 "Buttons"): ⏹ Stop as an inline
keyboard on the newest message of a streaming answer, 🔄 Regenerate on the last answer's last
message, and what a press's ``callback_data`` names.

Theory of operation
-------------------
:class:`AnswerButtons` keeps, per conversation (chat, thread), the answer in flight — a token,
its asker, the ids of the messages it sent — and the last answer's Regenerate button. The
adapter asks :meth:`AnswerButtons.markup_for` on every send and edit: a message of a live answer
keeps its Stop keyboard (an edit without ``reply_markup`` would remove it) while it is the
answer's newest; an older one (a frozen draft) loses it with its last edit, and any other
message gets none. Buttons are shown in ``partial`` mode, whose draft is edited anyway. Once
the model work is over (:meth:`AnswerButtons.finishing`) the answer's writes — its final edits,
the stop marker — carry 🔄 Regenerate instead, so a one-message answer needs no write of its own
to swap the buttons; :meth:`AnswerButtons.finish` names the keyboard edits
still needed (Regenerate only on the last message, nothing elsewhere), comparing with what each
message shows. Callback data is ``ctl:stop:TOKEN`` or ``ctl:regen:TOKEN`` (at most 64 bytes,
https://core.telegram.org/bots/api#inlinekeyboardbutton); a token that no longer names a live
answer or the last answer is stale. No I/O here: the adapter writes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from channels.controls import REGENERATE_LABEL, STOP_LABEL, ControlAction

__all__ = ["CONTROL_PREFIX", "AnswerButtons", "Pressed"]

CONTROL_PREFIX = "ctl:"
_ACTIONS: dict[str, ControlAction] = {"stop": "stop", "regen": "regenerate"}

Conversation = tuple[str, str | None]


@dataclass
class _Answer:
    token: str
    asker_id: str
    message_ids: list[str] = field(default_factory=list)
    regenerate: str | None = None  # the Regenerate token, once the model work is over
    shown: dict[str, str | None] = field(default_factory=dict)  # message id → button shown


@dataclass(frozen=True, slots=True)
class _Regenerate:
    token: str
    asker_id: str
    message_id: str


@dataclass(frozen=True, slots=True)
class Pressed:
    """A press that names a live button: its conversation, action and asker."""

    chat_id: str
    thread_id: str | None
    action: ControlAction
    asker_id: str


def _keyboard(label: str, data: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[InlineKeyboardButton(label, callback_data=data)]])


class AnswerButtons:
    """The buttons of every conversation of one Telegram channel."""

    def __init__(self) -> None:
        self._live: dict[Conversation, _Answer] = {}
        self._last: dict[Conversation, _Regenerate] = {}

    def start(self, chat_id: str, thread_id: str | None, asker_id: str) -> str | None:
        """An answer starts; returns the message whose Regenerate button must go (or None)."""
        key = (chat_id, thread_id)
        self._live[key] = _Answer(secrets.token_urlsafe(9), asker_id)
        previous = self._last.pop(key, None)
        return previous.message_id if previous is not None else None

    def finishing(self, chat_id: str, thread_id: str | None) -> None:
        """The answer's model work is over: its writes from now on carry Regenerate."""
        answer = self._live.get((chat_id, thread_id))
        if answer is not None and answer.regenerate is None:
            answer.regenerate = secrets.token_urlsafe(9)

    def _find(self, chat_id: str, thread_id: str | None, message_id: str | None) -> _Answer | None:
        for (chat, thread), answer in self._live.items():
            if chat != chat_id:
                continue
            if (message_id is None and thread == thread_id) or message_id in answer.message_ids:
                return answer
        return None

    def markup_for(
        self, chat_id: str, thread_id: str | None, message_id: str | None
    ) -> InlineKeyboardMarkup | None:
        """The keyboard of a send (``message_id`` None, in the thread) or an edit: the
        answer's newest message has one."""
        answer = self._find(chat_id, thread_id, message_id)
        if answer is None or (message_id is not None and message_id != answer.message_ids[-1]):
            return None
        if answer.regenerate is not None:
            return _keyboard(REGENERATE_LABEL, f"{CONTROL_PREFIX}regen:{answer.regenerate}")
        return _keyboard(STOP_LABEL, f"{CONTROL_PREFIX}stop:{answer.token}")

    def written(self, chat_id: str, thread_id: str | None, message_id: str, *, sent: bool) -> None:
        """A write of the live answer landed with :meth:`markup_for`'s keyboard."""
        answer = self._find(chat_id, thread_id, None if sent else message_id)
        if answer is None:
            return
        if sent:
            answer.message_ids.append(message_id)
        answer.shown[message_id] = REGENERATE_LABEL if answer.regenerate else STOP_LABEL

    def unmarked(self, chat_id: str, message_id: str) -> None:
        """An edit of the answer's message went out without a keyboard."""
        answer = self._find(chat_id, None, message_id)
        if answer is not None:
            answer.shown[message_id] = None

    def deleted(self, chat_id: str, message_id: str) -> None:
        for (chat, _), answer in self._live.items():
            if chat == chat_id and message_id in answer.message_ids:
                answer.message_ids.remove(message_id)

    def finish(
        self, chat_id: str, thread_id: str | None, *, regenerate: bool
    ) -> list[tuple[str, InlineKeyboardMarkup | None]]:
        """The answer ended: the (message id, keyboard) edits to make — no Stop anywhere,
        Regenerate on the last message. Without ``regenerate`` (the answer could not be
        delivered: its chat or topic is gone) nothing is to be written."""
        key = (chat_id, thread_id)
        answer = self._live.pop(key, None)
        if answer is None or not answer.message_ids or not regenerate:
            return []
        token = answer.regenerate or secrets.token_urlsafe(9)
        last = answer.message_ids[-1]
        edits: list[tuple[str, InlineKeyboardMarkup | None]] = []
        for message_id in answer.message_ids:
            wanted = REGENERATE_LABEL if regenerate and message_id == last else None
            if answer.shown.get(message_id) == wanted:
                continue
            keyboard = None
            if wanted is not None:
                keyboard = _keyboard(REGENERATE_LABEL, f"{CONTROL_PREFIX}regen:{token}")
            edits.append((message_id, keyboard))
        if regenerate:
            self._last[key] = _Regenerate(token, answer.asker_id, last)
        return edits

    def pressed(self, data: str) -> Pressed | None:
        """The live button ``data`` names; None when it is stale or not ours."""
        kind, _, token = data.removeprefix(CONTROL_PREFIX).partition(":")
        action = _ACTIONS.get(kind)
        if action == "stop":
            for (chat, thread), answer in self._live.items():
                if answer.token == token:
                    return Pressed(chat, thread, action, answer.asker_id)
        elif action == "regenerate":
            for (chat, thread), last in self._last.items():
                if last.token == token:
                    return Pressed(chat, thread, action, last.asker_id)
            for (chat, thread), answer in self._live.items():
                if answer.regenerate == token:  # shown, the answer's delivery not over yet
                    return Pressed(chat, thread, action, answer.asker_id)
        return None

    def asker(self, chat_id: str, thread_id: str | None) -> str | None:
        """The asker of the conversation's live answer (an approval prompt belongs to it)."""
        answer = self._live.get((chat_id, thread_id))
        return answer.asker_id if answer is not None else None
