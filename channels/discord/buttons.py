"""The Discord channel's Stop button (architecture §3 "Buttons"): a button component on the
newest message of a streaming answer, gone from its final edit.

Theory of operation
-------------------
:class:`StopButtons` keeps, per conversation (its channel id: the thread's, else the chat's),
the answer in flight — its asker, its messages and what each shows. Buttons are shown in
``partial`` mode, whose draft is edited to its final text anyway. The adapter asks
:meth:`StopButtons.view_for` on every send and edit: while the model works, the answer's newest
message gets a :class:`StopView` (an edit without a view would keep the old components, so an
edit of an older one, a frozen draft, passes ``view=None`` and takes it away); once the model
work is over its writes carry none, and :meth:`StopButtons.finish` names the messages whose final
edit did not take the button away (their text was already final: rare). A
press is answered in its interaction: the orchestrator's refusal, ephemeral, or "Stopping…".

Message components: https://discord.com/developers/docs/interactions/message-components
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import discord

from channels.base import UNSPACED, StreamMode, WriteSpacing
from channels.controls import STOP_LABEL, AnswerControls, ControlEvent

__all__ = ["DiscordStopButtons", "Pressed", "StopButtons", "StopView"]

_LOG = logging.getLogger("channels.discord")
_NO_MENTIONS = discord.AllowedMentions.none()

Pressed = Callable[[discord.Interaction[Any], str], Awaitable[None]]
"""Called with the interaction and the pressed answer's token."""


class StopView(discord.ui.View):
    """One ⏹ Stop button, custom id ``ctl:stop:TOKEN``; no timeout (the answer's end removes it)."""

    def __init__(self, token: str, pressed: Pressed) -> None:
        super().__init__(timeout=None)
        button: discord.ui.Button[StopView] = discord.ui.Button(
            label=STOP_LABEL, style=discord.ButtonStyle.secondary, custom_id=f"ctl:stop:{token}"
        )

        async def callback(interaction: discord.Interaction[Any]) -> None:
            await pressed(interaction, token)

        button.callback = callback  # type: ignore[method-assign]
        self.add_item(button)


@dataclass
class _Answer:
    chat_id: str
    thread_id: str | None
    asker_id: str
    token: str
    working: bool = True
    shown: dict[str, bool] = field(default_factory=dict)  # message id → shows the button
    newest: str | None = None


class StopButtons:
    """The Stop buttons of every conversation of one Discord channel."""

    def __init__(self) -> None:
        self._live: dict[str, _Answer] = {}  # by the conversation's Discord channel id

    def start(self, chat_id: str, thread_id: str | None, asker_id: str) -> None:
        """An answer starts (the adapter calls it in ``partial`` mode only)."""
        self._live[thread_id or chat_id] = _Answer(
            chat_id, thread_id, asker_id, secrets.token_urlsafe(9)
        )

    def finishing(self, chat_id: str, thread_id: str | None) -> None:
        answer = self._live.get(thread_id or chat_id)
        if answer is not None:
            answer.working = False

    def view_for(self, target: str, message_id: str | None, pressed: Pressed) -> StopView | None:
        """The view of a send (``message_id`` None) or an edit to ``target``: a Stop button on
        the answer's newest message while the model works."""
        answer = self._live.get(target)
        if answer is None or not answer.working:
            return None
        if message_id is not None and message_id != answer.newest:
            return None
        return StopView(answer.token, pressed)

    def live(self, target: str) -> bool:
        return target in self._live

    def written(self, target: str, message_id: str, *, button: bool, sent: bool) -> None:
        """A write to ``target`` landed, showing the button or not; a send is the newest."""
        answer = self._live.get(target)
        if answer is not None:
            answer.shown[message_id] = button
            if sent:
                answer.newest = message_id

    def finish(self, chat_id: str, thread_id: str | None) -> list[str]:
        """The answer ended: the messages still showing the button."""
        answer = self._live.pop(thread_id or chat_id, None)
        if answer is None:
            return []
        return [message_id for message_id, shown in answer.shown.items() if shown]

    def pressed(self, token: str) -> tuple[str, str | None, str] | None:
        """(chat id, thread id, asker id) of the live answer ``token`` names, or None."""
        for answer in self._live.values():
            if answer.token == token:
                return answer.chat_id, answer.thread_id, answer.asker_id
        return None


class DiscordStopButtons(AnswerControls):
    """The adapter's side of the Stop button, mixed into
    :class:`~channels.discord.adapter.DiscordChannel` (which provides the client and
    ``allowed_users``): the ``answer_*`` calls and a press handed to the orchestrator."""

    _stops: StopButtons
    _client: Any

    @property
    def stream_mode(self) -> StreamMode:
        raise NotImplementedError  # the adapter's (channels.base.Channel)

    def _messageable(self, channel_id: str) -> discord.PartialMessageable:
        raise NotImplementedError

    _askers: dict[str, str]  # the asker of the answer being written, by Discord channel id
    _allowed_users: set[str]

    def _may_answer(self, user_id: int) -> bool:
        """``allowed_users`` for button presses (the orchestrator then decides)."""
        return "*" in self._allowed_users or str(user_id) in self._allowed_users

    async def answer_started(self, chat_id: str, thread_id: str | None, asker_id: str) -> None:
        self._askers[thread_id or chat_id] = asker_id  # an approval prompt belongs to it
        if self.stream_mode == "partial":  # a draft, edited to its final text: no extra write
            self._stops.start(chat_id, thread_id, asker_id)

    async def answer_finishing(self, chat_id: str, thread_id: str | None) -> None:
        self._stops.finishing(chat_id, thread_id)

    async def answer_finished(
        self,
        chat_id: str,
        thread_id: str | None,
        *,
        regenerate: bool,
        spacing: WriteSpacing = UNSPACED,
    ) -> None:
        self._askers.pop(thread_id or chat_id, None)
        buttoned = self._stops.finish(chat_id, thread_id)
        if not regenerate or self._client is None:
            return  # undelivered: the channel or thread is gone
        channel = self._messageable(thread_id or chat_id)
        for message_id in buttoned:
            message = channel.get_partial_message(int(message_id))
            await spacing.next_write()
            try:
                await message.edit(view=None, allowed_mentions=_NO_MENTIONS)
                spacing.landed()
            except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
                _LOG.debug("%s: could not remove the Stop button: %s", self.name, exc)

    async def _on_stop(self, interaction: discord.Interaction[Any], token: str) -> None:
        """A press of Stop: the orchestrator decides; the presser alone reads the outcome."""
        pressed = self._stops.pressed(token)
        if pressed is None:
            reply = "This answer is over."
        elif not self._may_answer(interaction.user.id):
            reply = "You are not allowed to use this button."
        else:
            chat_id, thread_id, asker_id = pressed
            user = interaction.user
            event = ControlEvent(
                self.name, chat_id, thread_id, "stop", str(user.id), user.name, asker_id
            )
            reply = await self.control(event) or "Stopping…"
        try:
            await interaction.response.send_message(reply, ephemeral=True)
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            _LOG.warning("%s: could not answer a Stop press: %s", self.name, exc)

    def _approval_refusal(
        self, chat_id: str, thread_id: str | None
    ) -> Callable[[discord.Interaction[Any]], Awaitable[str | None]]:
        """The orchestrator's word on a press of an approval prompt in the conversation."""
        asker_id = self._askers.get(thread_id or chat_id)

        async def refusal(interaction: discord.Interaction[Any]) -> str | None:
            user = interaction.user
            event = ControlEvent(
                self.name, chat_id, thread_id, "approve", str(user.id), user.name, asker_id
            )
            return await self.control(event)

        return refusal
