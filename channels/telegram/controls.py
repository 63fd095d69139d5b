"""The Telegram channel's side of the answer buttons (architecture §3 "Buttons"): the
``answer_*`` calls of :class:`~channels.controls.AnswerControls`, carried out with
editMessageReplyMarkup, and a press of Stop or Regenerate handed to the orchestrator and answered
(answerCallbackQuery); a press of an approval prompt's ✅/❌ is asked the same way before it is
taken. What each message shows is decided in :mod:`channels.telegram.buttons`.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import CallbackQuery, InlineKeyboardMarkup, User
from telegram.error import TelegramError

from channels.base import UNSPACED, StreamMode, WriteSpacing
from channels.controls import AnswerControls, ControlEvent
from channels.telegram.buttons import CONTROL_PREFIX, AnswerButtons

__all__ = ["APPROVAL_PREFIX", "TelegramButtons"]

APPROVAL_PREFIX = "approve:"

_LOG = logging.getLogger("channels.telegram")


class TelegramButtons(AnswerControls):
    """Mixed into :class:`~channels.telegram.adapter.TelegramChannel`, which provides the
    application, the buttons' state and ``allowed_users``."""

    _app: Any
    _buttons: AnswerButtons

    @property
    def stream_mode(self) -> StreamMode:
        raise NotImplementedError  # the adapter's (channels.base.Channel)

    _approvals: dict[str, Any]  # open approval prompts by token

    def _allowed(self, user: User) -> bool:
        raise NotImplementedError

    async def _on_callback(self, query: CallbackQuery) -> None:
        if (query.data or "").startswith(CONTROL_PREFIX):
            await self._on_button(query)
            return
        token, _, choice = (query.data or "").removeprefix(APPROVAL_PREFIX).rpartition(":")
        approval = self._approvals.get(token)
        chat = query.message.chat.id if query.message is not None else None
        refusal = None
        if approval is not None and self._allowed(query.from_user):
            thread = approval.thread_id
            asker = self._buttons.asker(approval.chat_id, thread)
            event = self._event(query, approval.chat_id, thread, action="approve", asker_id=asker)
            refusal = await self.control(event)
        if approval is None or approval.answered.is_set() or str(chat) != approval.chat_id:
            reply = "This request is no longer open."
        elif not self._allowed(query.from_user):
            reply = "You are not allowed to answer this request."
        elif refusal is not None:
            reply = refusal
        else:
            approval.answer = choice == "y"
            approval.answered.set()
            reply = "Approved." if approval.answer else "Denied."
        await self._answer_query(query, reply)

    def _event(
        self, query: CallbackQuery, chat: str, thread: str | None, **kw: Any
    ) -> ControlEvent:
        user = query.from_user
        return ControlEvent(
            self.name, chat, thread, user_id=str(user.id), user_handle=user.username, **kw
        )

    async def _on_button(self, query: CallbackQuery) -> None:
        """A press of Stop or Regenerate: the orchestrator decides."""
        pressed = self._buttons.pressed(query.data or "")
        if pressed is None:
            reply = "This button is no longer active."
        elif not self._allowed(query.from_user):
            reply = "You are not allowed to use this button."
        else:
            event = self._event(
                query,
                pressed.chat_id,
                pressed.thread_id,
                action=pressed.action,
                asker_id=pressed.asker_id,
            )
            refusal = await self.control(event)
            done = "Stopping…" if pressed.action == "stop" else "Asking again…"
            reply = refusal if refusal is not None else done
        await self._answer_query(query, reply)

    async def _answer_query(self, query: CallbackQuery, reply: str) -> None:
        try:
            await query.answer(reply)
        except TelegramError as exc:
            _LOG.warning("%s: answerCallbackQuery failed: %s", self.name, exc)

    async def answer_started(self, chat_id: str, thread_id: str | None, asker_id: str) -> None:
        if self.stream_mode != "partial":  # buttons on a draft, edited to its final text anyway
            return
        previous = self._buttons.start(chat_id, thread_id, asker_id)
        if previous is not None:
            await self._set_keyboard(chat_id, previous, None)

    async def answer_finishing(self, chat_id: str, thread_id: str | None) -> None:
        self._buttons.finishing(chat_id, thread_id)

    async def answer_finished(
        self,
        chat_id: str,
        thread_id: str | None,
        *,
        regenerate: bool,
        spacing: WriteSpacing = UNSPACED,
    ) -> None:
        edits = self._buttons.finish(chat_id, thread_id, regenerate=regenerate)
        for message_id, keyboard in edits:
            await spacing.next_write()
            await self._set_keyboard(chat_id, message_id, keyboard)
            spacing.landed()

    async def _set_keyboard(
        self, chat_id: str, message_id: str, keyboard: InlineKeyboardMarkup | None
    ) -> None:
        """Replace a message's keyboard; a message gone or already so is left as it is."""
        if self._app is None:
            return
        try:
            await self._app.bot.edit_message_reply_markup(
                chat_id, int(message_id), reply_markup=keyboard
            )
        except TelegramError as exc:
            _LOG.debug("%s: could not change the buttons of %s: %s", self.name, message_id, exc)
