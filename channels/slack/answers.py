"""The Slack channel's side of the answer buttons and approvals (architecture §3 "Buttons"):
the ``answer_*`` calls of :class:`~channels.controls.AnswerControls` and tool approvals,
carried out with Block Kit messages in the answer's thread, and every press handed to the
orchestrator as a :class:`~channels.controls.ControlEvent`.

* **Stop.** The first typing of an answer posts a message with a Stop button in its thread
  (``stop_button``); :meth:`SlackControls.answer_finished` deletes it and stops the answer's
  streams still open — of that thread only, so two threads answered at once in one channel
  keep their own streams.
* **Regenerate.** A delivered answer gets a Regenerate button below it, in its thread; the
  next answer there takes it away. A press asks the same question again (the orchestrator
  replaces the history).
* **Presses.** Acknowledged at once by the transport; a user not in ``allowed_users``, a stale
  button or the orchestrator's refusal (not the asker, not an admin) is told so with
  ``chat.postEphemeral``, visible to that user alone. An approval press the orchestrator takes
  answers the prompt (:meth:`SlackControls._request_approval`).

What each message shows and what a press names is kept in :mod:`channels.slack.buttons`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from channels.base import UNSPACED, WriteSpacing
from channels.controls import AnswerControls, ControlEvent
from channels.slack.buttons import Buttons, Place, Pressed
from channels.slack.controls import (
    NO_LONGER_ACTIVE,
    NOT_ALLOWED,
    OUTCOME,
    approval_blocks,
    regenerate_blocks,
    section,
    stop_blocks,
)
from channels.slack.errors import NETWORK_ERRORS
from channels.slack.format import escape
from channels.slack.inbound import InboundReader
from channels.slack.kind import SlackChannelConfig
from channels.slack.stream import Stream

__all__ = ["SlackControls"]

_LOG = logging.getLogger("channels.slack")


class SlackControls(AnswerControls):
    """Mixed into :class:`~channels.slack.adapter.SlackChannel`, which provides the Web API
    client, the inbound reader and the open streams."""

    config: SlackChannelConfig
    approval_timeout_secs: float
    _web: AsyncWebClient | None
    _reader: InboundReader | None
    _streams: dict[tuple[str, str], Stream]
    _buttons: Buttons
    _presses: set[asyncio.Task[None]]

    if TYPE_CHECKING:  # the adapter's (first in the MRO: no stubs here)

        def _client(self) -> AsyncWebClient: ...

        async def _call(
            self, call: Callable[[], Awaitable[AsyncSlackResponse]], *, length: int = 0
        ) -> AsyncSlackResponse: ...

    # -- answers --------------------------------------------------------------------------

    async def answer_started(self, chat_id: str, thread_id: str | None, asker_id: str) -> None:
        previous = self._buttons.start((chat_id, thread_id), asker_id)
        if previous is not None:
            await self._delete_quietly(chat_id, previous)

    async def _post_stop(self, chat_id: str, thread_id: str | None) -> bool:
        """The Stop button of the live answer in the thread, on its first typing; False when
        there is none to post."""
        place = (chat_id, thread_id)
        if not (self.config.stop_button and thread_id):
            return False
        token = self._buttons.stop_token(place)
        if token is None:
            return False
        web = self._client()
        sent = await self._call(
            lambda: web.chat_postMessage(
                channel=chat_id,
                thread_ts=thread_id,
                text="Stop the answer",
                blocks=stop_blocks(token),
            )
        )
        self._buttons.stop_sent(place, str(sent["ts"]))
        return True

    async def answer_finished(
        self,
        chat_id: str,
        thread_id: str | None,
        *,
        regenerate: bool,
        spacing: WriteSpacing = UNSPACED,
    ) -> None:
        place = (chat_id, thread_id)
        finished = self._buttons.finish(place)
        await self._stop_streams(lambda key, stream: (key[0], stream.thread) == place)
        web = self._web
        if web is None:
            return
        if finished.stop_ts is not None:
            await spacing.next_write()
            await self._delete_quietly(chat_id, finished.stop_ts)
            spacing.landed()
        if not (regenerate and finished.asker and thread_id):
            return
        token = self._buttons.regenerate_token()
        await spacing.next_write()
        try:
            sent = await web.chat_postMessage(
                channel=chat_id, thread_ts=thread_id, text="Regenerate the answer",
                blocks=regenerate_blocks(token),
            )  # fmt: skip
        except NETWORK_ERRORS as exc:
            _LOG.warning("%s: could not offer Regenerate: %s", self.name, exc)
            return
        spacing.landed()
        self._buttons.regenerate_sent(place, token, finished.asker, str(sent["ts"]))

    async def _stop_streams(self, which: Callable[[tuple[str, str], Stream], bool]) -> None:
        """Forget the streams ``which`` selects, stopping those still open."""
        web = self._web
        for key, stream in list(self._streams.items()):
            if not which(key, stream):
                continue
            del self._streams[key]
            if stream.open and web is not None:
                with contextlib.suppress(*NETWORK_ERRORS):
                    await web.chat_stopStream(channel=key[0], ts=key[1])

    async def _delete_quietly(self, chat_id: str, ts: str) -> None:
        web = self._web
        if web is not None:
            with contextlib.suppress(*NETWORK_ERRORS):
                await web.chat_delete(channel=chat_id, ts=ts)

    # -- presses --------------------------------------------------------------------------

    def _block_actions(self, payload: dict[str, Any]) -> None:
        """A ``block_actions`` payload (already acknowledged): each press decided in a task."""
        user = str((payload.get("user") or {}).get("id", ""))
        channel = str((payload.get("channel") or {}).get("id", ""))
        for action in payload.get("actions") or []:
            pressed = self._buttons.pressed(action)
            task = asyncio.create_task(self._press(pressed, user, channel))
            self._presses.add(task)
            task.add_done_callback(self._presses.discard)

    def _allowed(self, user: str) -> bool:
        allowed = {str(entry) for entry in self.config.allowed_users}
        return "*" in allowed or user in allowed

    async def _press(self, pressed: Pressed | None, user: str, channel: str) -> None:
        thread = pressed.thread if pressed is not None else None
        try:
            if pressed is None:
                refusal: str | None = NO_LONGER_ACTIVE
            elif not self._allowed(user):
                refusal = NOT_ALLOWED
            else:
                event = ControlEvent(
                    self.name, pressed.chat, thread, pressed.action, user, asker_id=pressed.asker
                )
                refusal = await self.control(event)
                if refusal is None and pressed.action == "approve":
                    self._buttons.answer_approval(pressed.token, pressed.approve)
            if refusal is not None and channel:
                await self._tell(channel, thread, user, refusal)
        except Exception:
            _LOG.exception("%s: handling a button press failed", self.name)

    async def _tell(self, chat_id: str, thread_id: str | None, user: str, text: str) -> None:
        """One line to ``user`` alone (``chat.postEphemeral``)."""
        web = self._web
        if web is None:
            return
        try:
            await web.chat_postEphemeral(
                channel=chat_id, user=user, text=escape(text), thread_ts=thread_id
            )
        except NETWORK_ERRORS as exc:
            _LOG.warning("%s: could not tell %s: %s", self.name, user, exc)

    # -- approvals ------------------------------------------------------------------------

    async def _request_approval(
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        """Raises ChannelError when the prompt cannot be sent."""
        web = self._client()
        text = escape(prompt)
        place: Place = (chat_id, thread_id)
        asker = self._buttons.asker(place)
        if asker is None and self._reader is not None:
            known = self._reader.asker(chat_id, thread_id)
            asker = known.user if known is not None else None
        token, answer = self._buttons.open_approval(place, asker)
        try:
            sent = await self._call(
                lambda: web.chat_postMessage(
                    channel=chat_id, thread_ts=thread_id, text=text,
                    blocks=approval_blocks(text, token),
                ),
                length=len(text),
            )  # fmt: skip
            spacing.landed()
            try:
                result: bool | None = await asyncio.wait_for(answer, self.approval_timeout_secs)
            except TimeoutError:
                result = None
        finally:
            self._buttons.close_approval(token)
        shown = f"{text}\n\n{OUTCOME[result]}"
        try:  # show the outcome and remove the buttons
            await spacing.next_write()
            await web.chat_update(
                channel=chat_id, ts=str(sent["ts"]), text=shown, blocks=[section(shown)]
            )
            spacing.landed()
        except NETWORK_ERRORS as exc:
            _LOG.warning("%s: could not update the approval prompt: %s", self.name, exc)
        return result
