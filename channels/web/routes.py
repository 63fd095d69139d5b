"""The web chat's HTTP side (aiohttp handlers on the ops server): the page, its static files,
and the JSON API the page's script calls.

Routes (all under the channel's ``path``, ``/`` by default; ``{c}`` is a conversation id of the
caller's browser):

| route | what |
| --- | --- |
| ``GET /``, ``GET /static/…`` | the page, its script and style, the vendored renderer |
| ``GET /api/session`` | who the caller is and their conversations (sets the browser cookie) |
| ``POST /api/conversations`` | a new conversation (the page's "New chat" and ``/new``) |
| ``GET /api/conversations/{c}`` | its transcript and whether an answer runs |
| ``GET /api/conversations/{c}/events`` | its events as Server-Sent Events (WHATWG HTML §9.2) |
| ``POST /api/conversations/{c}/messages`` | JSON ``{"text"}``, or multipart ``text``, ``file``s |
| ``POST /api/conversations/{c}/stop`` | ``/stop`` of its running answer |
| ``DELETE /api/conversations/{c}`` | delete it: list, transcript and history (409 while busy) |
| ``POST /api/approvals/{id}`` | ``{"approved": true|false}``: the answer to an approval prompt |

Access (architecture §3 "Access"): ``auth: none`` (loopback only: the request's ``Host`` must
name a loopback address too, against DNS rebinding), ``tokens`` (``Authorization: Bearer``) or
``trusted_user_header``. Every API request must carry ``X-Relaybot: 1``: a page of another site
cannot send that header without a CORS preflight, which is never granted (against cross-site
requests to a loopback page).
"""

from __future__ import annotations

import asyncio
import json
import logging
from importlib import resources
from typing import Any, Protocol

from aiohttp import BodyPartReader, web

from channels.base import IMAGE_TYPES, Attachment, AttachmentKind, InboundMessage
from channels.web.access import bearer_token, is_loopback, token_identity, token_index
from channels.web.conversations import Conversations, new_id
from channels.web.kind import WebChannelConfig

__all__ = ["BROWSER_COOKIE", "KEEPALIVE_SECS", "WebChat", "WebRoutes"]

log = logging.getLogger(__name__)

BROWSER_COOKIE = "relaybot_browser"
KEEPALIVE_SECS = 15.0
"""An SSE comment line this often keeps proxies from closing an idle event stream, in seconds."""
MAX_TEXT_CHARS = 32_000
"""The longest message the page may send, in characters."""

_STATIC_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".txt": "text/plain",
}
_SECURITY_HEADERS = {
    # The page runs only its own scripts; rendered Markdown is sanitised besides.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
    "style-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _static(name: str) -> bytes | None:
    """A file of ``channels/web/static`` (package data); None when absent or outside it."""
    if ".." in name or name.startswith("/"):
        return None
    path = resources.files("channels.web").joinpath("static")
    for part in name.split("/"):
        path = path.joinpath(part)
    return path.read_bytes() if path.is_file() else None


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class WebChat(Protocol):
    """What the routes need of the channel (:class:`channels.web.adapter.WebChannel`)."""

    name: str
    config: WebChannelConfig
    conversations: Conversations
    max_image_bytes: int
    max_document_bytes: int
    max_audio_bytes: int

    def busy(self, chat_id: str) -> bool: ...

    def subscribe(self, chat_id: str) -> asyncio.Queue[dict[str, Any] | None]: ...

    def unsubscribe(self, chat_id: str, feed: asyncio.Queue[dict[str, Any] | None]) -> None: ...

    async def hand_on(self, message: InboundMessage) -> None: ...

    async def forget(self, browser: str, chat_id: str, user: str) -> None: ...

    def approval_chat(self, approval_id: str) -> str | None: ...

    def answer_approval(self, approval_id: str, approved: bool) -> bool: ...


class WebRoutes:
    """The HTTP handlers of one web channel."""

    def __init__(self, channel: WebChat) -> None:
        self._channel = channel

    async def serve(self, request: web.Request) -> web.StreamResponse:
        path = request.path[len(self._channel.config.served_prefix()) - 1 :]  # from its "/"
        if request.method == "GET" and (path == "/" or path.startswith("/static/")):
            name = "index.html" if path == "/" else path.removeprefix("/static/")
            return self._file(name)
        if not path.startswith("/api/"):
            return _error(404, "not found")
        config = self._channel.config
        host = request.host.rpartition(":")[0] if request.host.count(":") else request.host
        if config.auth == "none" and not is_loopback(host):
            return _error(403, "this page answers only at a loopback address")
        if request.headers.get("X-Relaybot") != "1":
            return _error(403, "missing X-Relaybot: 1")
        user = self._user(request)
        if user is None:
            return _error(401, "sign in: this page needs an access token")
        return await self._api(request, path.removeprefix("/api/").split("/"), user)

    def _file(self, name: str) -> web.Response:
        body = _static(name)
        if body is None:
            return _error(404, "not found")
        if name == "index.html":
            title = self._channel.config.title.replace("&", "&amp;").replace("<", "&lt;")
            body = body.replace(b"{{title}}", title.encode())
        suffix = name[name.rfind(".") :]
        return web.Response(
            body=body,
            content_type=_STATIC_TYPES.get(suffix, "application/octet-stream"),
            headers={**_SECURITY_HEADERS, "Cache-Control": "no-cache"},
        )

    def _user(self, request: web.Request) -> str | None:
        """The caller's user id, or None when they did not pass the channel's access."""
        config = self._channel.config
        if config.auth == "tokens":
            index = token_index(bearer_token(request.headers.get("Authorization")), config.tokens)
            return None if index is None else token_identity(config.tokens[index])
        if config.auth == "trusted_user_header":
            assert config.trusted_user_header is not None
            return request.headers.get(config.trusted_user_header) or None
        return "local"

    async def _api(self, request: web.Request, parts: list[str], user: str) -> web.StreamResponse:
        browser = request.cookies.get(BROWSER_COOKIE) or ""
        conversations = self._channel.conversations
        method = request.method
        if parts == ["session"] and method == "GET":
            response = web.json_response({"user": user, "auth": self._channel.config.auth})
            if not browser:
                browser = new_id()
                response.set_cookie(
                    BROWSER_COOKIE,
                    browser,
                    max_age=10 * 365 * 86400,
                    httponly=True,
                    samesite="Strict",
                )
            body = {
                "user": user,
                "auth": self._channel.config.auth,
                "title": self._channel.config.title,
                "conversations": await conversations.listed(f"{user}/{browser}"),
            }
            response.text = json.dumps(body)
            return response
        if not browser:
            return _error(400, "no browser cookie: load /api/session first")
        owner = f"{user}/{browser}"
        if parts == ["conversations"] and method == "POST":
            return web.json_response({"id": await conversations.create(owner)})
        if parts[0] == "approvals" and len(parts) == 2 and method == "POST":
            answer = await self._json(request)
            asked_in = self._channel.approval_chat(parts[1])
            if asked_in is None or not await conversations.owns(owner, asked_in):
                return _error(404, "this prompt is closed")
            if not self._channel.answer_approval(parts[1], answer.get("approved") is True):
                return _error(404, "this prompt is closed")
            return web.json_response({"ok": True})
        if parts[0] != "conversations" or len(parts) < 2:
            return _error(404, "not found")
        conversation = parts[1]
        if not await conversations.owns(owner, conversation):
            return _error(404, "no such conversation in this browser")
        route = (method, tuple(parts[2:]))
        if route == ("GET", ()):
            transcript = await conversations.transcript(conversation)
            return web.json_response(
                {"messages": transcript.messages, "busy": self._channel.busy(conversation)}
            )
        if route == ("DELETE", ()):
            if self._channel.busy(conversation):
                return _error(409, "an answer is running here: stop it first")
            await self._channel.forget(owner, conversation, user)
            return web.json_response({"ok": True})
        if route == ("GET", ("events",)):
            return await self._events(request, conversation)
        if route == ("POST", ("messages",)):
            return await self._message(request, owner, conversation, user)
        if route == ("POST", ("stop",)):
            await self._channel.hand_on(self._inbound(conversation, user, "/stop"))
            return web.json_response({"ok": True})
        return _error(404, "not found")

    @staticmethod
    async def _json(request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {}
        return body if isinstance(body, dict) else {}

    def _inbound(
        self, conversation: str, user: str, text: str, attachments: tuple[Attachment, ...] = ()
    ) -> InboundMessage:
        return InboundMessage(
            channel=self._channel.name,
            chat_id=conversation,
            sender_id=user,
            sender_name=user,
            text=text,
            message_id=None,
            attachments=attachments,
        )

    async def _message(
        self, request: web.Request, owner: str, conversation: str, user: str
    ) -> web.Response:
        attachments: list[Attachment] = []
        if request.content_type.startswith("multipart/"):
            text = ""
            reader = await request.multipart()
            channel = self._channel
            bounds: dict[AttachmentKind, int] = {
                "image": channel.max_image_bytes,
                "document": channel.max_document_bytes,
                "audio": channel.max_audio_bytes,
            }
            async for part in reader:
                if not isinstance(part, BodyPartReader):
                    continue
                if part.name == "text":
                    text = (await part.read(decode=True)).decode("utf-8", "replace")
                elif part.name == "file":
                    attachments.append(await _attachment(part, bounds))
        else:
            text = str((await self._json(request)).get("text") or "")
        text = text[:MAX_TEXT_CHARS]
        if not text.strip() and not attachments:
            return _error(400, "an empty message")
        await self._channel.conversations.titled(owner, conversation, text)
        await self._channel.hand_on(self._inbound(conversation, user, text, tuple(attachments)))
        return web.json_response({"ok": True})

    async def _events(self, request: web.Request, conversation: str) -> web.StreamResponse:
        """The conversation's events, one SSE ``data:`` line of JSON each, until the page goes
        away or the channel stops."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        feed = self._channel.subscribe(conversation)
        try:
            await response.write(b": open\n\n")
            while True:
                try:
                    event = await asyncio.wait_for(feed.get(), KEEPALIVE_SECS)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
                    continue
                if event is None:
                    break
                data = json.dumps(event, ensure_ascii=False)
                await response.write(f"data: {data}\n\n".encode())
        except ConnectionError:
            pass  # the page went away
        finally:
            self._channel.unsubscribe(conversation, feed)
        return response


async def _attachment(part: BodyPartReader, bounds: dict[AttachmentKind, int]) -> Attachment:
    """An uploaded file: an ``image/…`` is an image, an ``audio/…`` audio, anything else a
    document (as the chat networks' files are); its bytes within its kind's bound, else only
    its type and size (the orchestrator then says in one line why it is not read)."""
    mime = (part.headers.get("Content-Type") or "application/octet-stream").split(";")[0]
    kind: AttachmentKind = "document"
    if mime.startswith("image/"):
        kind = "image"
    elif mime.startswith("audio/"):
        kind = "audio"
    data = bytearray()
    while chunk := await part.read_chunk(65536):
        data += chunk
        if len(data) > bounds[kind]:
            while await part.read_chunk(65536):
                pass
            return Attachment(mime, b"", len(data), kind, part.filename)
    if kind == "image" and mime not in IMAGE_TYPES:
        return Attachment(mime, b"", len(data), kind, part.filename)
    return Attachment(mime, bytes(data), len(data), kind, part.filename)
