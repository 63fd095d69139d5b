"""The Discord channel's answer buttons (architecture §3 "Buttons"): ⏹ Stop as a button
component on the newest message of a streaming answer, 🔄 Regenerate on the last answer's last
message.

Theory of operation
-------------------
:class:`AnswerButtons` keeps, per conversation (its channel id: the thread's, else the chat's),
the answer in flight — its asker, its messages and what each shows — and the last answer's
Regenerate button. Buttons are shown in ``partial`` mode, whose draft is edited to its final text
anyway. The adapter asks :meth:`AnswerButtons.view_for` on every send and edit: the answer's
newest message gets an :class:`AnswerView` — Stop while the model works, Regenerate once its
model work is over (so its final edit carries it, sparing a write) — and an edit of an older one,
a frozen draft, passes ``view=None`` (an edit without a view would keep the old components).
:meth:`AnswerButtons.finish` names the edits still needed (Regenerate on the last message only,
nothing elsewhere); :meth:`AnswerButtons.start` names the previous answer's message whose
Regenerate must go. A press is answered in its interaction, ephemeral: the orchestrator's
refusal, or "Stopping…" / "Asking again…".

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

from channels.base import UNSPACED, MessageRef, StreamMode, WriteSpacing
from channels.controls import (
    REGENERATE_LABEL,
    STOP_LABEL,
    AnswerControls,
    ControlAction,
    ControlEvent,
)

__all__ = ["AnswerButtons", "AnswerView", "DiscordAnswerButtons", "Press", "Pressed"]

_LOG = logging.getLogger("channels.discord")
_NO_MENTIONS = discord.AllowedMentions.none()
_LABELS: dict[ControlAction, str] = {"stop": STOP_LABEL, "regenerate": REGENERATE_LABEL}
_DONE: dict[ControlAction, str] = {"stop": "Stopping…", "regenerate": "Asking again…"}

Pressed = Callable[[discord.Interaction[Any], str], Awaitable[None]]
"""Called with the interaction and the pressed button's token."""


class AnswerView(discord.ui.View):
    """One button — ⏹ Stop or 🔄 Regenerate — custom id ``ctl:ACTION:TOKEN``; no timeout (the
    adapter takes it away)."""

    def __init__(self, action: ControlAction, token: str, pressed: Pressed) -> None:
        super().__init__(timeout=None)
        self.label = _LABELS[action]
        button: discord.ui.Button[AnswerView] = discord.ui.Button(
            label=self.label, style=discord.ButtonStyle.secondary, custom_id=f"ctl:{action}:{token}"
        )

        async def callback(interaction: discord.Interaction[Any]) -> None:
            await pressed(interaction, token)

        button.callback = callback  # type: ignore[method-assign]
        self.add_item(button)


@dataclass(frozen=True, slots=True)
class Press:
    """A press that names a live button: its conversation, action and asker."""

    chat_id: str
    thread_id: str | None
    action: ControlAction
    asker_id: str


@dataclass
class _Answer:
    chat_id: str
    thread_id: str | None
    asker_id: str
    token: str
    regenerate: str | None = None  # the Regenerate token, once the model work is over
    shown: dict[str, str | None] = field(default_factory=dict)  # message id → label shown
    newest: str | None = None


@dataclass(frozen=True, slots=True)
class _Last:
    chat_id: str
    thread_id: str | None
    asker_id: str
    token: str
    message_id: str


class AnswerButtons:
    """The answer buttons of every conversation of one Discord channel."""

    def __init__(self) -> None:
        self._live: dict[str, _Answer] = {}  # by the conversation's Discord channel id
        self._last: dict[str, _Last] = {}
        self._rewrites: dict[str, str] = {}  # agent.rerun_edited, by Discord channel id

    def rerun(self, target: str) -> None:
        """The next answer in ``target`` answers its last question again: its first send
        edits the last answer's last message instead (if there is one)."""
        last = self._last.get(target)
        if last is not None:
            self._rewrites[target] = last.message_id

    def rewrite(self, target: str) -> str | None:
        """The message a send to ``target`` edits instead, once (see :meth:`rerun`)."""
        return self._rewrites.pop(target, None)

    def start(self, chat_id: str, thread_id: str | None, asker_id: str) -> str | None:
        """An answer starts (``partial`` mode only); returns the message whose Regenerate
        button must go (or None; not the message a rerun writes into, see :meth:`rerun`)."""
        target = thread_id or chat_id
        self._live[target] = _Answer(chat_id, thread_id, asker_id, secrets.token_urlsafe(9))
        previous = self._last.pop(target, None)
        if previous is None or self._rewrites.get(target) == previous.message_id:
            return None
        return previous.message_id

    def finishing(self, chat_id: str, thread_id: str | None) -> None:
        """The answer's model work is over: its newest message's writes carry Regenerate."""
        answer = self._live.get(thread_id or chat_id)
        if answer is not None and answer.regenerate is None:
            answer.regenerate = secrets.token_urlsafe(9)

    def view_for(self, target: str, message_id: str | None, pressed: Pressed) -> AnswerView | None:
        """The view of a send (``message_id`` None) or an edit to ``target``: a button on the
        answer's newest message only."""
        answer = self._live.get(target)
        if answer is None or (message_id is not None and message_id != answer.newest):
            return None
        if answer.regenerate is not None:
            return AnswerView("regenerate", answer.regenerate, pressed)
        return AnswerView("stop", answer.token, pressed)

    def live(self, target: str) -> bool:
        return target in self._live

    def written(self, target: str, message_id: str, view: AnswerView | None, *, sent: bool) -> None:
        """A write to ``target`` landed, showing ``view``; a send is the newest message."""
        answer = self._live.get(target)
        if answer is not None:
            answer.shown[message_id] = view.label if view is not None else None
            if sent:
                answer.newest = message_id

    def finish(
        self, chat_id: str, thread_id: str | None, *, regenerate: bool
    ) -> list[tuple[str, str | None]]:
        """The answer is delivered: the edits still needed, ``(message id, Regenerate token or
        None for no button)`` — Regenerate on the last message only. Without ``regenerate``
        (undelivered) none."""
        target = thread_id or chat_id
        answer = self._live.pop(target, None)
        if answer is None or answer.newest is None or not regenerate:
            return []
        token = answer.regenerate or secrets.token_urlsafe(9)
        edits: list[tuple[str, str | None]] = []
        for message_id, shown in answer.shown.items():
            wanted = REGENERATE_LABEL if message_id == answer.newest else None
            if shown != wanted:
                edits.append((message_id, token if wanted else None))
        self._last[target] = _Last(chat_id, thread_id, answer.asker_id, token, answer.newest)
        return edits

    def pressed(self, token: str) -> Press | None:
        """The live button ``token`` names, or None (stale)."""
        for answer in self._live.values():
            if token == answer.token:
                return Press(answer.chat_id, answer.thread_id, "stop", answer.asker_id)
            if token == answer.regenerate:  # shown, its delivery not over yet
                return Press(answer.chat_id, answer.thread_id, "regenerate", answer.asker_id)
        for last in self._last.values():
            if token == last.token:
                return Press(last.chat_id, last.thread_id, "regenerate", last.asker_id)
        return None


class DiscordAnswerButtons(AnswerControls):
    """The adapter's side of the answer buttons, mixed into
    :class:`~channels.discord.adapter.DiscordChannel` (which provides the client and
    ``allowed_users``): the ``answer_*`` calls and a press handed to the orchestrator."""

    _buttons: AnswerButtons
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

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        raise NotImplementedError  # the adapter's

    async def answer_rerun(self, chat_id: str, thread_id: str | None) -> None:
        """The rerun answer's first send edits the last answer's last message (known in
        ``partial`` mode, where it carries Regenerate; elsewhere a new message goes below)."""
        if self.stream_mode == "partial":
            self._buttons.rerun(thread_id or chat_id)

    async def _rewrite(self, ref: MessageRef, text: str, *, formatted: bool) -> MessageRef:
        """A send written into the last answer's message ``ref`` instead: it becomes the
        answer's newest message, carrying its button."""
        self._buttons.written(ref.chat_id, ref.message_id, None, sent=True)
        await self._edit_message(ref, text, formatted=formatted)
        return ref

    async def answer_started(self, chat_id: str, thread_id: str | None, asker_id: str) -> None:
        self._askers[thread_id or chat_id] = asker_id  # an approval prompt belongs to it
        if self.stream_mode != "partial":  # a draft, edited to its final text: no extra write
            return
        previous = self._buttons.start(chat_id, thread_id, asker_id)
        if previous is not None:
            await self._set_view(thread_id or chat_id, previous, None)

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
        self._askers.pop(thread_id or chat_id, None)
        edits = self._buttons.finish(chat_id, thread_id, regenerate=regenerate)
        for message_id, token in edits:
            view = None if token is None else AnswerView("regenerate", token, self._on_press)
            await spacing.next_write()
            if await self._set_view(thread_id or chat_id, message_id, view):
                spacing.landed()

    async def _set_view(self, target: str, message_id: str, view: AnswerView | None) -> bool:
        """Replace a message's button; a message gone is left as it is. True: it landed."""
        if self._client is None:
            return False
        message = self._messageable(target).get_partial_message(int(message_id))
        try:
            await message.edit(view=view, allowed_mentions=_NO_MENTIONS)
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            _LOG.debug("%s: could not change the buttons of %s: %s", self.name, message_id, exc)
            return False
        return True

    async def _on_press(self, interaction: discord.Interaction[Any], token: str) -> None:
        """A press of Stop or Regenerate: the orchestrator decides; the presser alone reads
        the outcome."""
        press = self._buttons.pressed(token)
        if press is None:
            reply = "This answer is over."
        elif not self._may_answer(interaction.user.id):
            reply = "You are not allowed to use this button."
        else:
            user = interaction.user
            event = ControlEvent(
                self.name,
                press.chat_id,
                press.thread_id,
                press.action,
                str(user.id),
                user.name,
                press.asker_id,
            )
            reply = await self.control(event) or _DONE[press.action]
        try:
            await interaction.response.send_message(reply, ephemeral=True)
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            _LOG.warning("%s: could not answer a button press: %s", self.name, exc)

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
