"""The web chat (``kind: web``): a chat page served by the ops server (architecture §3, §7
"Metrics").

Theory of operation: each conversation of a browser is a chat (its id the ``chat_id``); a
message typed on the page is handed to the orchestrator like any chat message, so access,
queueing, tools, the outbound policy and the delivery engine's drafts and spacing
(``draft_update_interval_ms``, default 100) are those of every channel. Each write the engine
makes (send, edit, delete) is one event pushed to the pages that show that conversation, over
Server-Sent Events (:mod:`channels.web.routes`), and kept in its transcript
(:mod:`channels.web.conversations`). The page renders the Markdown with markdown-it and
sanitises it with DOMPurify (both vendored under ``static/vendor``). Stop is ``/stop`` of the
conversation; an approval is a prompt with two buttons, answered by a POST.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Any

import anyio
from aiohttp import web

from channels.base import (
    UNSPACED,
    Channel,
    InboundHandler,
    InboundMessage,
    MessageRef,
    StreamMode,
    WriteSpacing,
)
from channels.web.conversations import Conversations, new_id
from channels.web.kind import KIND, WebChannelConfig
from channels.web.routes import WebRoutes

__all__ = ["FEED_EVENTS", "WebChannel"]

log = logging.getLogger(__name__)

FEED_EVENTS = 1000
"""Events a page's feed may hold unsent; a page that falls this far behind is disconnected
(it reloads the transcript when it reconnects)."""


class WebChannel(Channel):
    """The chat page and its API on the ops server."""

    limits = KIND.limits
    config: WebChannelConfig

    def __init__(self, name: str, config: WebChannelConfig, on_inbound: InboundHandler):
        super().__init__(name, config, on_inbound)
        self._ids = itertools.count(1)
        self._feeds: dict[str, set[asyncio.Queue[dict[str, Any] | None]]] = {}
        self._open_messages: dict[str, int] = {}  # per chat: messages handed on, not finished
        self._approvals: dict[str, tuple[str, asyncio.Future[bool]]] = {}
        self._deleted: set[str] = set()  # conversations deleted since start: nothing is kept
        self.conversations = Conversations(None)
        self._routes = WebRoutes(self)

    @property
    def stream_mode(self) -> StreamMode:
        return "partial"

    @property
    def http_prefix(self) -> str:
        return self.config.served_prefix()

    async def start(self) -> None:
        self.conversations = Conversations(self.state)

    async def stop(self) -> None:
        for feeds in self._feeds.values():
            for feed in feeds:
                with contextlib.suppress(asyncio.QueueFull):  # a page that fell behind
                    feed.put_nowait(None)  # ends the page's event stream
        for _, future in self._approvals.values():
            if not future.done():
                future.cancel()

    async def serve_http(self, request: web.Request) -> web.StreamResponse:
        return await self._routes.serve(request)

    # -- what the routes call ----------------------------------------------------------------

    def busy(self, chat_id: str) -> bool:
        return self._open_messages.get(chat_id, 0) > 0

    def subscribe(self, chat_id: str) -> asyncio.Queue[dict[str, Any] | None]:
        """A page's feed of ``chat_id``'s events (``None`` ends it); :meth:`unsubscribe` it."""
        feed: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(FEED_EVENTS)
        self._feeds.setdefault(chat_id, set()).add(feed)
        return feed

    def unsubscribe(self, chat_id: str, feed: asyncio.Queue[dict[str, Any] | None]) -> None:
        feeds = self._feeds.get(chat_id)
        if feeds is not None:
            feeds.discard(feed)
            if not feeds:
                del self._feeds[chat_id]

    def publish(self, chat_id: str, event: dict[str, Any]) -> None:
        for feed in list(self._feeds.get(chat_id, ())):
            try:
                feed.put_nowait(event)
            except asyncio.QueueFull:
                log.info("%s: a page fell behind; disconnecting it", self.name)
                self.unsubscribe(chat_id, feed)

    async def hand_on(self, message: InboundMessage) -> None:
        """A message typed on the page: shown to its other pages, kept, handed on."""
        chat_id = message.chat_id
        if message.text.strip().lower() != "/stop":
            transcript = await self.conversations.transcript(chat_id)
            message_id = f"u{new_id()}"
            transcript.write(message_id, "user", message.text)
            self.publish(chat_id, {"type": "user", "id": message_id, "text": message.text})
        self._open_messages[chat_id] = self._open_messages.get(chat_id, 0) + 1
        self.publish(chat_id, {"type": "busy", "busy": True})
        await self._on_inbound(message)

    async def forget(self, browser: str, chat_id: str, user: str) -> None:
        """Delete a conversation (not busy): out of the browser's list, its transcript gone,
        and the model's history too (``/reset``, whose reply is not kept)."""
        self._deleted.add(chat_id)
        await self.conversations.forget(browser, chat_id)
        self._open_messages[chat_id] = self._open_messages.get(chat_id, 0) + 1
        await self._on_inbound(
            InboundMessage(
                channel=self.name, chat_id=chat_id, sender_id=user, sender_name=user, text="/reset"
            )
        )

    def approval_chat(self, approval_id: str) -> str | None:
        """The conversation prompt ``approval_id`` was asked in, while it is open."""
        entry = self._approvals.get(approval_id)
        return None if entry is None or entry[1].done() else entry[0]

    def answer_approval(self, approval_id: str, approved: bool) -> bool:
        """The page's answer to prompt ``approval_id``; False when it is not open."""
        entry = self._approvals.get(approval_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(approved)
        return True

    # -- the engine's writes ------------------------------------------------------------------

    async def _write(self, chat_id: str, message_id: str, text: str, kind: str) -> None:
        if chat_id in self._deleted:
            return
        transcript = await self.conversations.transcript(chat_id)
        transcript.write(message_id, "bot", text)
        self.publish(chat_id, {"type": kind, "id": message_id, "text": text})

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        message_id = f"b{next(self._ids)}-{new_id()}"
        await self._write(chat_id, message_id, text, "send")
        return MessageRef(chat_id, message_id)

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        await self._write(ref.chat_id, ref.message_id, text, "edit")

    async def _delete_message(self, ref: MessageRef) -> None:
        if ref.chat_id in self._deleted:
            return
        (await self.conversations.transcript(ref.chat_id)).remove(ref.message_id)
        self.publish(ref.chat_id, {"type": "delete", "id": ref.message_id})

    async def _request_approval(
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        approval_id = new_id()
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._approvals[approval_id] = (chat_id, future)
        self.publish(chat_id, {"type": "approval", "id": approval_id, "text": prompt})
        try:
            with anyio.move_on_after(self.approval_timeout_secs):
                return await future
            return None
        finally:
            del self._approvals[approval_id]
            answer = future.result() if future.done() and not future.cancelled() else None
            self.publish(chat_id, {"type": "approved", "id": approval_id, "approved": answer})

    async def reply_finished(self, chat_id: str) -> None:
        left = self._open_messages.get(chat_id, 1) - 1
        if left > 0:
            self._open_messages[chat_id] = left
            return
        self._open_messages.pop(chat_id, None)
        if chat_id in self._deleted:
            return
        await self.conversations.save(chat_id)
        self.publish(chat_id, {"type": "busy", "busy": False})
