"""The Matrix channel's answer controls by reaction (architecture §3 "Buttons"): ⏹ (or 🛑) on a
message of the answer being written is Stop, 🔁 (or 🔄) on a message of the conversation's last
answer is Regenerate, and an approval answer (✅/❌ or yes/no) is asked of the orchestrator
first.

Theory of operation
-------------------
:class:`MatrixControls` is mixed into :class:`~channels.matrix.adapter.MatrixChannel`. It keeps,
per room, the answer being written (its thread, its asker, the event ids of its messages, noted
by the adapter's sends) and, per conversation, the last answer's; a reaction names an event, so
only a reaction on one of those counts. Each press becomes a
:class:`~channels.controls.ControlEvent` (the presser's MXID, its handle the MXID without
``@``); a refusal — anyone but the asker or an admin — is said in the conversation in one visible
line (Matrix has no message for one user alone), an ``m.notice``, through the adapter's own send.
The bot shows what to press: its own ⏹ reaction on the answer's first message (``partial`` mode),
sent as part of that message's send (so the delivery engine's spacing counts from after it),
and redacted when the answer ends, after the chat's spacing (``answer_finished``).
:meth:`MatrixControls.answer_rerun` (``agent.rerun_edited``) has the next answer's first send
edit the conversation's last answer's last event instead.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.base import UNSPACED, StreamMode, WriteSpacing
from channels.controls import AnswerControls, ControlAction, ControlEvent
from channels.errors import ChannelError
from channels.matrix.client import call
from channels.matrix.inbound import MatrixInbound

__all__ = ["MatrixControls"]

_LOG = logging.getLogger("channels.matrix")

STOP_KEY = "⏹️"
"""The key of the bot's own Stop reaction (U+23F9 with the emoji variation selector)."""

_Answer = tuple[str | None, str, set[str]]
"""(thread id, asker id, the event ids of its messages)."""


class MatrixControls(AnswerControls):
    """The ``answer_*`` calls and the reactions' presses (module docstring)."""

    _inbound: MatrixInbound

    def _controls_init(self) -> None:
        self._answers: dict[str, _Answer] = {}
        """Answers being written, by room."""
        self._last_answers: dict[tuple[str, str | None], _Answer] = {}
        """The last answer of each conversation, (room, thread)."""
        self._newest: dict[tuple[str, str | None], str] = {}
        """The last message sent of each conversation's answer, (room, thread)."""
        self._rewrites: dict[tuple[str, str | None], str] = {}
        """The message the next answer's first send edits instead (``agent.rerun_edited``;
        taken by that send, :meth:`_rewrite`)."""
        self._stop_marks: dict[str, str] = {}
        """The bot's own ⏹ reaction on the answer being written, by room."""
        self._inbound.on_control = self._on_control
        self._inbound.may_approve = self._may_approve

    async def _notice(self, room_id: str, text: str, thread_id: str | None) -> None:
        raise NotImplementedError  # the adapter's: one m.notice in the conversation

    def _sent(self, room_id: str, thread_id: str | None, event_id: str) -> None:
        """The adapter sent ``event_id`` to the conversation: a message of its answer."""
        answer = self._answers.get(room_id)
        if answer is not None and answer[0] == thread_id:
            answer[2].add(event_id)
            self._newest[(room_id, thread_id)] = event_id

    @property
    def stream_mode(self) -> StreamMode:
        raise NotImplementedError  # the adapter's (channels.base.Channel)

    async def answer_rerun(self, chat_id: str, thread_id: str | None) -> None:
        """The rerun answer's first send edits the last answer's last message (``partial``
        mode; elsewhere a new message goes below)."""
        last = self._newest.get((chat_id, thread_id))
        if self.stream_mode == "partial" and (chat_id, thread_id) in self._last_answers and last:
            self._rewrites[(chat_id, thread_id)] = last

    def _rewrite(self, room_id: str, thread_id: str | None) -> str | None:
        """The message a send to the conversation edits instead, once (:meth:`answer_rerun`)."""
        return self._rewrites.pop((room_id, thread_id), None)

    def _connected(self) -> Any:
        raise NotImplementedError  # the adapter's: the logged-in client

    async def _room_send(
        self, client: Any, room_id: str, content: Any, kind: str = "m.room.message"
    ) -> Any:
        raise NotImplementedError  # the adapter's: one event, encrypted where the room is

    async def _mark_stop(self, room_id: str, thread_id: str | None, event_id: str) -> None:
        """The answer's first message ``event_id`` gets the bot's own ⏹ reaction (``partial``
        mode; a failure is logged: the user's ⏹ works all the same)."""
        answer = self._answers.get(room_id)
        if self.stream_mode != "partial" or answer is None or answer[0] != thread_id:
            return
        if room_id in self._stop_marks:
            return
        self._stop_marks[room_id] = ""  # one per answer, even while it is being sent
        relation = {"rel_type": "m.annotation", "event_id": event_id, "key": STOP_KEY}
        try:
            sent = await self._room_send(
                self._connected(), room_id, {"m.relates_to": relation}, "m.reaction"
            )
        except ChannelError as exc:
            _LOG.warning("%s: could not add ⏹ to %s: %s", self.name, event_id, exc)
            return
        self._stop_marks[room_id] = sent.event_id

    async def _unmark_stop(self, room_id: str, spacing: WriteSpacing) -> None:
        """Redact the answer's ⏹ reaction, after the chat's spacing."""
        mark = self._stop_marks.pop(room_id, None)
        if not mark:
            return
        await spacing.next_write()
        try:
            await call(self._connected().room_redact(room_id, mark))
        except ChannelError as exc:
            _LOG.warning("%s: could not take ⏹ away in %s: %s", self.name, room_id, exc)
            return
        spacing.landed()

    async def answer_started(self, chat_id: str, thread_id: str | None, asker_id: str) -> None:
        self._answers[chat_id] = (thread_id, asker_id, set())

    async def answer_finished(
        self,
        chat_id: str,
        thread_id: str | None,
        *,
        regenerate: bool,
        spacing: WriteSpacing = UNSPACED,
    ) -> None:
        answer = self._answers.get(chat_id)
        if answer is not None and answer[0] == thread_id:
            del self._answers[chat_id]
            if regenerate and answer[2]:
                self._last_answers[(chat_id, thread_id)] = answer
            await self._unmark_stop(chat_id, spacing)

    def _reacted(self, room_id: str, target: str, action: ControlAction) -> _Answer | None:
        """The answer whose message ``target`` the reaction names: the one being written
        (Stop), the conversation's last (Regenerate); None: no such message."""
        if action == "stop":
            answer = self._answers.get(room_id)
            return answer if answer is not None and target in answer[2] else None
        for (room, _), last in self._last_answers.items():
            if room == room_id and target in last[2]:
                return last
        return None

    async def _on_control(
        self, room_id: str, sender: str, target: str, action: ControlAction
    ) -> None:
        answer = self._reacted(room_id, target, action)
        if answer is None:
            return  # a reaction on another message
        thread_id, asker_id, _ = answer
        handle = sender.removeprefix("@")
        event = ControlEvent(self.name, room_id, thread_id, action, sender, handle, asker_id)
        refusal = await self.control(event)
        if refusal is not None:
            _LOG.info("%s: a %s reaction by %s refused: %s", self.name, action, sender, refusal)
            await self._refuse(room_id, thread_id, refusal)

    async def _may_approve(self, room_id: str, sender: str) -> bool:
        """An approval answer by ``sender`` in the room of the answer being written."""
        answer = self._answers.get(room_id)
        thread_id, asker_id = (answer[0], answer[1]) if answer is not None else (None, None)
        handle = sender.removeprefix("@")
        event = ControlEvent(self.name, room_id, thread_id, "approve", sender, handle, asker_id)
        refusal = await self.control(event)
        if refusal is None:
            return True
        await self._refuse(room_id, thread_id, refusal)
        return False

    async def _refuse(self, room_id: str, thread_id: str | None, refusal: str) -> None:
        try:
            await self._notice(room_id, refusal, thread_id)
        except ChannelError as exc:
            _LOG.warning("%s: could not say a refusal in %s: %s", self.name, room_id, exc)
