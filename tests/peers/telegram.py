"""A local Telegram Bot API server for tests (architecture §8), speaking the real HTTP API.

Theory of operation
-------------------
An aiohttp server on 127.0.0.1 (port 0) serves ``/bot<token>/<method>`` as the Bot API does
(https://core.telegram.org/bots/api#making-requests): parameters come as a query string,
``application/x-www-form-urlencoded``, multipart or JSON (python-telegram-bot posts a form whose
non-string values are JSON-encoded), and every answer is ``{"ok": true, "result": ...}`` or
``{"ok": false, "error_code": N, "description": "...", "parameters": {...}}`` with Telegram's
exact descriptions (:mod:`tests.peers.telegram_wire`, which also holds :class:`ApiError`,
:class:`Call` and :class:`BotMessage`, re-exported here). Point the client's
``base_url`` at :attr:`TelegramBotApiServer.base_url` (the token is appended to it).

Methods: getMe, logOut, close, setWebhook, deleteWebhook, getWebhookInfo, getUpdates, getFile,
sendMessage, editMessageText, editMessageReplyMarkup, deleteMessage, sendChatAction,
answerCallbackQuery, setMyCommands, getMyCommands, deleteMyCommands. Anything else is 404
"Not Found"; a wrong token is 401 "Unauthorized" (python-telegram-bot raises ``InvalidToken``
for both).

Semantics kept from Telegram:

* ``getUpdates`` long-polls: it answers at once when updates are pending, else when one arrives,
  when ``timeout`` (seconds) runs out, or when the server stops. ``offset`` confirms every
  update below it. While a webhook is set it answers 409, and updates are POSTed to the webhook
  URL instead (with ``X-Telegram-Bot-Api-Secret-Token`` when a secret was set).
* Writes check, in order: chat known ("chat not found"), markup (``parse_mode=HTML`` or
  ``entities``; see :mod:`tests.peers.telegram_markup`; "can't parse entities: ..."), visible
  text not empty ("message text is empty"), at most ``max_text_utf16`` UTF-16 code units of
  visible text ("message is too long"). An edit needs an existing message ("message to edit not
  found") sent by the bot ("message can't be edited") and a change of text, entities or reply
  markup ("message is not modified: ..."); an edit without ``reply_markup`` removes the
  keyboard. Deleting a missing message is "message to delete not found".
* Files (:mod:`tests.peers.telegram_files`): getFile answers a ``file_path`` (400 "file is too
  big" over 20 MB, as the cloud server), and the bytes are served at
  ``/file/bot<token>/<file_path>``; :attr:`files` records every download.
* A group migrated by :meth:`~TelegramBotApiServer.migrate_chat` answers every write (send,
  edit, delete, chat action) with 400 "group chat was upgraded to a supergroup chat" and
  ``parameters.migrate_to_chat_id``, the new supergroup's id; the supergroup is a new chat
  (its message ids start again). A forum topic removed by :meth:`delete_topic` answers every
  write to it, and every edit or delete of a message in it, with 400 "message thread not
  found".
* While :attr:`competing` is set, getUpdates answers 409 "Conflict: terminated by other
  getUpdates request; ..." (another instance polls the bot).
* A load balancer in front of several instances: with :attr:`webhook_targets` set, each update
  is POSTed to ``webhook_copies`` different targets in turn (round-robin: update *n* goes to
  targets *n*, *n+1*, …), one after the other, instead of to the webhook URL, and counts as
  delivered when one of them answered 2xx.
* Not emulated: Telegram trims whitespace around a text and auto-detects links in bot messages;
  the peer keeps texts as sent.

Test hooks (all synchronous unless marked async):

* :meth:`~TelegramBotApiServer.open_chat` registers a chat; :meth:`inject_message` delivers a
  user's text message (private or group; a ``@username`` mention and a leading ``/command`` get
  their entities as Telegram adds them; ``reply_to_message_id`` makes it a reply) and returns
  the Message object; :meth:`inject_photo`, :meth:`inject_document` and :meth:`inject_album`
  send images and files (with a caption, whose mentions get ``caption_entities``),
  :meth:`inject_media` with ``{"voice": files.voice(...)}`` a voice note; ``sendVoice``
  stores a bot message with a ``voice`` (the uploaded bytes are its call's ``voice`` param);
  :meth:`offer_again` offers every update again (a restart that lost its confirmation) and
  ``await`` :meth:`post_again` POSTs an update to the webhook once more (Telegram's retry);
  :meth:`inject_callback_query` presses an inline button of a bot message
  and returns the query id.
* :meth:`fail` (``method``, ``call=N``, an :class:`ApiError`) makes the N-th call of that method
  (1-based, counted over all chats) fail without being applied, e.g.
  ``server.fail("editMessageText", call=3, error=ApiError.flood(9))``; :meth:`delay` makes the
  N-th call be applied first and answered ``seconds`` later (a client with a shorter read
  timeout times out while the write has landed). :meth:`fail_first` fails the first later
  call of a method whose decoded parameters match a predicate (e.g. the first formatted edit);
  :meth:`fail_every` fails every later one (a server that keeps answering 500).
* Observation: :attr:`calls` (every request as a :class:`Call`: method, decoded params,
  ``at``/``answered_at`` from ``time.monotonic()``, status, result or error),
  :meth:`calls_to`, :meth:`messages` (the bot messages a user now sees in a chat),
  :meth:`texts`, :meth:`states` (the visible texts of the bot's messages after every applied
  write to that chat: every state a user could have seen), :attr:`commands`, and
  ``await``-able :meth:`wait_for` (a predicate, re-checked on every change).

Example::

    async with TelegramBotApiServer() as server:
        server.open_chat(111)
        ...  # a bot with token=server.token, base_url=server.base_url
        server.inject_message(111, "hello")
        await server.wait_for(lambda: server.texts(111) == ["Hi!"])
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

from tests.peers.telegram_files import FileStore, photo_sizes
from tests.peers.telegram_markup import (
    MarkupError,
    Parsed,
    parse_entities,
    parse_html,
    utf16_len,
)
from tests.peers.telegram_wire import (
    BOT_USER,
    CANT_BE_EDITED,
    CHAT_NOT_FOUND,
    DEFAULT_TOKEN,
    DELETE_NOT_FOUND,
    EDIT_NOT_FOUND,
    NOT_FOUND,
    NOT_MODIFIED,
    POLLING_CONFLICT,
    QUERY_INVALID,
    TEXT_EMPTY,
    THREAD_NOT_FOUND,
    TOO_LONG,
    UNAUTHORIZED,
    WEBHOOK_CONFLICT,
    ApiError,
    BotMessage,
    Call,
    read_params,
)

__all__ = [
    "BOT_USER",
    "DEFAULT_TOKEN",
    "ApiError",
    "BotMessage",
    "Call",
    "TelegramBotApiServer",
]


@dataclass(frozen=True)
class _Fault:
    error: ApiError | None = None
    delay_secs: float = 0.0


@dataclass
class _Chat:
    obj: dict[str, Any]
    messages: dict[int, BotMessage] = field(default_factory=dict)
    next_id: int = 1  # message ids are never reused, as on Telegram


_CHAT_ACTIONS = frozenset(
    {"typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice"}
)
_COMMAND_RE = re.compile(r"^[a-z0-9_]{1,32}$")
_MENTION_RE = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{4,32}")
_LEADING_COMMAND_RE = re.compile(r"^/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?")


class TelegramBotApiServer:
    """The local Bot API server; see the module docstring for its API.

    Args:
        token: the only token accepted (``bot<token>`` in the path).
        max_text_utf16: the text limit, in UTF-16 code units of visible text.
        port: the port to listen on (0: a free one), e.g. to come up where a bot was told the
            server is, after it started.
    """

    def __init__(
        self, *, token: str = DEFAULT_TOKEN, max_text_utf16: int = 4096, port: int = 0
    ) -> None:
        self.token = token
        self._port = port
        self.max_text_utf16 = max_text_utf16
        self.calls: list[Call] = []
        self.commands: list[dict[str, Any]] = []
        self.answered_callbacks: dict[str, dict[str, Any]] = {}
        self.webhook_url = ""
        self._webhook_secret: str | None = None
        self._chats: dict[int, _Chat] = {}
        self._migrated: dict[int, int] = {}  # group id -> its supergroup's id
        self._deleted_topics: set[tuple[int, int]] = set()
        self._states: dict[int, list[tuple[str, ...]]] = {}
        self._updates: list[dict[str, Any]] = []
        self._confirmed = 0  # every update_id below this was confirmed
        self._update_ids = itertools.count(1000)
        self._callback_ids = itertools.count(1)
        self._open_callbacks: set[str] = set()
        self._faults: dict[tuple[str, int], _Fault] = {}
        self._matching_faults: list[tuple[str, Callable[[dict[str, Any]], bool], _Fault]] = []
        self._lasting_faults: list[tuple[str, Callable[[dict[str, Any]], bool], _Fault]] = []
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._delivery: asyncio.Task[None] | None = None
        self.url = ""
        self.files = FileStore()
        self.competing = False
        """While True, getUpdates answers 409 as when another instance polls the bot."""
        self.webhook_targets: list[str] = []
        """When set, updates go round-robin to these URLs instead (see the module docstring)."""
        self.webhook_copies = 1
        self._rotation = itertools.count()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, shutdown_timeout=1.0, handler_cancellation=True, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._delivery = asyncio.create_task(self._deliver_webhooks())

    async def stop(self) -> None:
        """Wake every long poll, stop webhook delivery and close the server."""
        self._closing.set()
        self._notify()
        if self._delivery is not None:
            self._delivery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._delivery
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> TelegramBotApiServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """The ``base_url`` for python-telegram-bot (it appends the token)."""
        return f"{self.url}/bot"

    # -- test hooks ---------------------------------------------------------------------------

    def open_chat(
        self, chat_id: int, *, chat_type: str | None = None, title: str | None = None
    ) -> dict[str, Any]:
        """Register a chat (idempotent); private when ``chat_id`` > 0 unless ``chat_type``."""
        if chat_id not in self._chats:
            kind = chat_type or ("private" if chat_id > 0 else "group")
            obj: dict[str, Any] = {"id": chat_id, "type": kind}
            if kind == "private":
                obj.update(first_name="Tester", username=f"user{chat_id}")
            else:
                obj["title"] = title or f"Group {chat_id}"
            self._chats[chat_id] = _Chat(obj)
        return self._chats[chat_id].obj

    def migrate_chat(self, chat_id: int, new_chat_id: int) -> None:
        """Group ``chat_id`` becomes supergroup ``new_chat_id``: writes to the group are
        refused with ``migrate_to_chat_id`` from now on."""
        self.open_chat(new_chat_id, chat_type="supergroup", title=f"Supergroup {new_chat_id}")
        self._migrated[chat_id] = new_chat_id
        self._notify()

    def delete_topic(self, chat_id: int, topic_id: int) -> None:
        """Forum topic ``topic_id`` of ``chat_id`` is deleted: writes to it are refused."""
        self._deleted_topics.add((chat_id, topic_id))
        self._notify()

    def inject_message(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int = 111,
        username: str | None = "alice",
        first_name: str = "Alice",
        chat_type: str | None = None,
        reply_to_message_id: int | None = None,
        topic_id: int | None = None,
        quote: str | None = None,
    ) -> dict[str, Any]:
        """A user sends ``text``; returns the Message object that the update carries.
        ``topic_id`` writes it in that forum topic (``message_thread_id`` with
        ``is_topic_message``, as Telegram sends it); ``quote`` is the part of the replied-to
        message the user selected (a ``TextQuote``)."""
        self.open_chat(chat_id, chat_type=chat_type)
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            sender["username"] = username
        entities = [
            {"type": "mention", "offset": utf16_len(text[: m.start()]), "length": len(m[0])}
            for m in _MENTION_RE.finditer(text)
        ]
        if m := _LEADING_COMMAND_RE.match(text):
            entities.insert(0, {"type": "bot_command", "offset": 0, "length": len(m[0])})
        msg = self._store(chat_id, text, from_bot=False, sender=sender, entities=tuple(entities))
        if quote is not None:
            replied = self._chats[chat_id].messages[reply_to_message_id or 0].text
            msg.raw["quote"] = {
                "text": quote,
                "position": utf16_len(replied[: replied.find(quote)]),
            }
        self._push_user_message(msg, reply_to_message_id, topic_id)
        return msg.raw

    def _push_user_message(
        self, msg: BotMessage, reply_to_message_id: int | None, topic_id: int | None
    ) -> None:
        chat_id = msg.chat_id
        if reply_to_message_id is not None:
            msg.raw["reply_to_message"] = self._chats[chat_id].messages[reply_to_message_id].raw
        if topic_id is not None:
            msg.raw.update(message_thread_id=topic_id, is_topic_message=True)
        self._push_update({"message": msg.raw})

    def inject_media(
        self,
        chat_id: int,
        media: dict[str, Any],
        *,
        caption: str | None = None,
        media_group_id: str | None = None,
        user_id: int = 111,
        username: str | None = "alice",
        chat_type: str | None = None,
        reply_to_message_id: int | None = None,
        topic_id: int | None = None,
    ) -> dict[str, Any]:
        """A user sends a message carrying ``media`` (``{"photo": [...]}`` or
        ``{"document": {...}}``, from :attr:`files`), with ``caption`` (its mentions and a
        leading command as ``caption_entities``); returns the Message object."""
        self.open_chat(chat_id, chat_type=chat_type)
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": "Alice"}
        if username:
            sender["username"] = username
        msg = self._store(chat_id, "", from_bot=False, sender=sender)
        del msg.raw["text"]
        msg.raw.update(media)
        if caption:
            msg.text = caption
            msg.raw["caption"] = caption
            entities = [
                {"type": "mention", "offset": utf16_len(caption[: m.start()]), "length": len(m[0])}
                for m in _MENTION_RE.finditer(caption)
            ]
            if entities:
                msg.raw["caption_entities"] = entities
        if media_group_id is not None:
            msg.raw["media_group_id"] = media_group_id
        self._push_user_message(msg, reply_to_message_id, topic_id)
        return msg.raw

    def inject_photo(
        self,
        chat_id: int,
        sizes: list[tuple[int, int, bytes]] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """A user sends a photo: ``sizes`` as ``(width, height, bytes)`` per resolution
        (default :func:`~tests.peers.telegram_files.photo_sizes`); ``kwargs`` as
        :meth:`inject_media`."""
        photo = self.files.photo(sizes if sizes is not None else photo_sizes(b"photo"))
        return self.inject_media(chat_id, {"photo": photo}, **kwargs)

    def inject_document(
        self,
        chat_id: int,
        data: bytes,
        *,
        mime_type: str,
        file_name: str,
        size: int | None = None,
        announce: bool = True,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """A user sends a file as a document (``size`` overrides its size; ``announce=False``
        leaves ``file_size`` out of the Document)."""
        document = self.files.document(
            data, mime_type=mime_type, file_name=file_name, size=size, announce=announce
        )
        return self.inject_media(chat_id, {"document": document}, **kwargs)

    def inject_album(
        self, chat_id: int, pictures: list[bytes], *, caption: str | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """A user sends ``pictures`` as one album: one update per photo, one
        ``media_group_id``, the caption on the first (as Telegram sends it)."""
        group = f"album{next(self._update_ids)}"
        return [
            self.inject_photo(
                chat_id,
                photo_sizes(picture, (320, 1280)),
                caption=caption if index == 0 else None,
                media_group_id=group,
                **kwargs,
            )
            for index, picture in enumerate(pictures)
        ]

    def offer_again(self) -> None:
        """Offer every update again, as after a restart whose last confirmation never
        reached Telegram (getUpdates confirms an update only by a later call's ``offset``)."""
        self._confirmed = 0
        self._notify()

    async def post_again(self, update_id: int) -> int:
        """POST update ``update_id`` to the webhook once more (Telegram's retry after a
        failed or slow delivery); returns the webhook's HTTP status."""
        update = next(u for u in self._updates if u["update_id"] == update_id)
        headers = {}
        if self._webhook_secret:
            headers["X-Telegram-Bot-Api-Secret-Token"] = self._webhook_secret
        async with ClientSession(timeout=ClientTimeout(total=5)) as session:
            async with session.post(self.webhook_url, json=update, headers=headers) as response:
                return response.status

    @property
    def updates(self) -> list[dict[str, Any]]:
        """Every update pushed so far, in order."""
        return list(self._updates)

    def inject_callback_query(
        self,
        chat_id: int,
        message_id: int,
        data: str,
        *,
        user_id: int = 111,
        username: str | None = "alice",
    ) -> str:
        """A user presses the inline button carrying ``data`` under a bot message."""
        msg = self._chats[chat_id].messages[message_id]
        if not msg.from_bot:
            raise ValueError("callback queries come from bot messages")
        query_id = str(next(self._callback_ids))
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": "Alice"}
        if username:
            sender["username"] = username
        self._open_callbacks.add(query_id)
        self._push_update(
            {
                "callback_query": {
                    "id": query_id,
                    "from": sender,
                    "message": msg.raw,
                    "chat_instance": f"ci{chat_id}",
                    "data": data,
                }
            }
        )
        return query_id

    def fail(self, method: str, *, call: int, error: ApiError) -> None:
        """The ``call``-th request (1-based) of ``method`` fails with ``error``, unapplied."""
        self._faults[(method.lower(), call)] = _Fault(error=error)

    def fail_first(
        self, method: str, *, where: Callable[[dict[str, Any]], bool], error: ApiError
    ) -> None:
        """The first later request of ``method`` whose decoded parameters satisfy ``where``
        fails with ``error``, unapplied."""
        self._matching_faults.append((method.lower(), where, _Fault(error=error)))

    def fail_every(
        self,
        method: str,
        *,
        error: ApiError,
        where: Callable[[dict[str, Any]], bool] = lambda params: True,
    ) -> None:
        """Every later request of ``method`` whose decoded parameters satisfy ``where`` fails
        with ``error``, unapplied."""
        self._lasting_faults.append((method.lower(), where, _Fault(error=error)))

    def delay(self, method: str, *, call: int, seconds: float) -> None:
        """The ``call``-th request of ``method`` is applied, then answered after ``seconds``."""
        self._faults[(method.lower(), call)] = _Fault(delay_secs=seconds)

    def calls_to(self, method: str, chat_id: int | None = None) -> list[Call]:
        """Recorded calls of ``method`` (case-insensitive), optionally to one chat."""
        return [
            c
            for c in self.calls
            if c.method.lower() == method.lower() and (chat_id is None or c.chat_id == chat_id)
        ]

    def messages(self, chat_id: int) -> list[BotMessage]:
        """The bot's messages a user now sees in ``chat_id``, oldest first."""
        chat = self._chats.get(chat_id)
        return [m for m in chat.messages.values() if m.from_bot] if chat else []

    def texts(self, chat_id: int) -> list[str]:
        return [m.text for m in self.messages(chat_id)]

    def states(self, chat_id: int) -> list[tuple[str, ...]]:
        """The bot messages' visible texts after each applied write (send, edit, delete)."""
        return list(self._states.get(chat_id, []))

    async def wait_for(self, predicate: Callable[[], bool], within: float = 5.0) -> None:
        """Return once ``predicate()`` holds (checked after every change).

        Raises:
            TimeoutError: it did not hold within ``within`` seconds.
        """
        async with asyncio.timeout(within):
            while not predicate():
                await self._changed.wait()

    # -- internals ---------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _push_update(self, payload: dict[str, Any]) -> None:
        self._updates.append({"update_id": next(self._update_ids), **payload})
        self._notify()

    def _pending(self) -> list[dict[str, Any]]:
        return [u for u in self._updates if u["update_id"] >= self._confirmed]

    def _store(
        self,
        chat_id: int,
        text: str,
        *,
        from_bot: bool,
        sender: dict[str, Any],
        entities: tuple[dict[str, Any], ...] = (),
        reply_markup: dict[str, Any] | None = None,
    ) -> BotMessage:
        chat = self._chats[chat_id]
        message_id, chat.next_id = chat.next_id, chat.next_id + 1
        msg = BotMessage(chat_id, message_id, text, from_bot, entities, reply_markup)
        msg.raw = {"message_id": message_id, "date": int(time.time()), "chat": chat.obj}
        msg.raw["from"] = sender
        self._render(msg)
        chat.messages[message_id] = msg
        return msg

    @staticmethod
    def _render(msg: BotMessage) -> None:
        msg.raw["text"] = msg.text
        for key, value in (("entities", list(msg.entities)), ("reply_markup", msg.reply_markup)):
            if value:
                msg.raw[key] = value
            else:
                msg.raw.pop(key, None)

    def _record_state(self, chat_id: int) -> None:
        self._states.setdefault(chat_id, []).append(tuple(self.texts(chat_id)))

    async def _sleep(self, seconds: float) -> None:
        """Sleep, cut short when the server stops."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._closing.wait()

    async def _handle(self, request: web.Request) -> web.Response:
        download = re.fullmatch(r"(.*)/file/bot([^/]+)/(.+)", request.path)
        if download is not None:
            return self._download(*download.groups())
        match = re.fullmatch(r"/bot([^/]+)/([A-Za-z]+)", request.path)
        if match is None:
            return web.json_response(NOT_FOUND.body(), status=404)
        token, method = match.groups()
        call = Call(method, await read_params(request), time.monotonic())
        self.calls.append(call)
        self._notify()
        nth = len(self.calls_to(method))
        fault = self._faults.pop((method.lower(), nth), None) or self._matching_fault(call)
        try:
            if token != self.token:
                outcome: ApiError | Any = UNAUTHORIZED
            elif fault.error is not None:
                outcome = fault.error
            else:
                try:
                    outcome = await self._dispatch(method.lower(), call.params)
                except _Rejection as exc:
                    outcome = exc.error
            if fault.delay_secs:
                await self._sleep(fault.delay_secs)
        except asyncio.CancelledError:
            call.abandoned = True
            self._notify()
            raise
        call.answered_at = time.monotonic()
        if isinstance(outcome, ApiError):
            call.status, call.error = outcome.status, outcome.description
            body = outcome.body()
        else:
            call.status, call.result = 200, outcome
            body = {"ok": True, "result": outcome}
        self._notify()
        return web.json_response(body, status=call.status)

    def _download(self, prefix: str, token: str, path: str) -> web.Response:
        """``[prefix]/file/bot<token>/<file_path>``: the bytes, or 404 as Telegram answers."""
        data = self.files.download(path, prefix) if token == self.token else None
        self._notify()
        if data is None:
            return web.json_response(NOT_FOUND.body(), status=404)
        return web.Response(body=data, content_type="application/octet-stream")

    def _matching_fault(self, call: Call) -> _Fault:
        for index, (method, where, fault) in enumerate(self._matching_faults):
            if method == call.method.lower() and where(call.params):
                del self._matching_faults[index]
                return fault
        for method, where, fault in self._lasting_faults:
            if method == call.method.lower() and where(call.params):
                return fault
        return _Fault()

    async def _dispatch(self, method: str, params: dict[str, Any]) -> Any:
        handler = _METHODS.get(method)
        if handler is None:
            raise _Rejection(NOT_FOUND)
        result = handler(self, params)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    # -- methods -------------------------------------------------------------------------------

    def _chat(self, params: dict[str, Any]) -> _Chat:
        chat_id = params.get("chat_id")
        if chat_id in self._migrated:
            raise _Rejection(ApiError.migrated(self._migrated[chat_id]))  # type: ignore[index]
        chat = self._chats.get(chat_id)  # type: ignore[arg-type]
        if chat is None:
            raise _Rejection(CHAT_NOT_FOUND)
        topic = params.get("message_thread_id")
        if topic is None and params.get("message_id") is not None:
            target = chat.messages.get(params["message_id"])
            topic = target.raw.get("message_thread_id") if target is not None else None
        if topic is not None and (chat.obj["id"], int(topic)) in self._deleted_topics:
            raise _Rejection(THREAD_NOT_FOUND)
        return chat

    def _markup(self, params: dict[str, Any]) -> tuple[str, tuple[dict[str, Any], ...]]:
        text = params.get("text")
        if not isinstance(text, str) or not text:
            raise _Rejection(TEXT_EMPTY)
        try:
            if params.get("parse_mode") is not None:
                if str(params["parse_mode"]).lower() != "html":
                    raise _Rejection(ApiError.bad_request("unsupported parse_mode"))
                parsed = parse_html(text)
            elif params.get("entities") is not None:
                parsed = parse_entities(text, params["entities"])
            else:
                parsed = Parsed(text, ())
        except MarkupError as exc:
            raise _Rejection(ApiError.cant_parse(str(exc))) from None
        if not parsed.text.strip():
            raise _Rejection(TEXT_EMPTY)
        return parsed.text, parsed.entities

    def _check_length(self, text: str) -> None:
        if utf16_len(text) > self.max_text_utf16:
            raise _Rejection(TOO_LONG)

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params)
        text, entities = self._markup(params)
        self._check_length(text)
        reply = params.get("reply_parameters")
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        if reply_to is not None and reply_to not in chat.messages:
            if not (isinstance(reply, dict) and reply.get("allow_sending_without_reply")):
                raise _Rejection(ApiError.bad_request("message to be replied not found"))
            reply_to = None
        markup = params.get("reply_markup")
        msg = self._store(
            chat.obj["id"],
            text,
            from_bot=True,
            sender=BOT_USER,
            entities=entities,
            reply_markup=markup if isinstance(markup, dict) else None,
        )
        if reply_to is not None:
            msg.raw["reply_to_message"] = chat.messages[reply_to].raw
        if params.get("message_thread_id") is not None:
            topic = int(params["message_thread_id"])
            msg.raw.update(message_thread_id=topic, is_topic_message=True)
        self._record_state(chat.obj["id"])
        return msg.raw

    def _send_voice(self, params: dict[str, Any]) -> dict[str, Any]:
        """sendVoice: a bot message carrying a ``voice`` whose bytes are the upload."""
        chat = self._chat(params)
        data = params.get("voice")
        if not isinstance(data, bytes):
            raise _Rejection(ApiError.bad_request("there is no voice in the request"))
        msg = self._store(chat.obj["id"], "", from_bot=True, sender=BOT_USER)
        del msg.raw["text"]
        msg.raw["voice"] = self.files.voice(data, duration=0)
        self._record_state(chat.obj["id"])
        return msg.raw

    def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        if "inline_message_id" in params:
            raise _Rejection(ApiError.bad_request("inline messages are not supported here"))
        chat = self._chat(params)
        msg = chat.messages.get(params.get("message_id"))  # type: ignore[arg-type]
        if msg is None:
            raise _Rejection(EDIT_NOT_FOUND)
        if not msg.from_bot:
            raise _Rejection(CANT_BE_EDITED)
        text, entities = self._markup(params)
        self._check_length(text)
        markup = params.get("reply_markup")
        markup = markup if isinstance(markup, dict) else None
        if (text, entities, markup) == (msg.text, msg.entities, msg.reply_markup):
            raise _Rejection(NOT_MODIFIED)
        msg.text, msg.entities, msg.reply_markup = text, entities, markup
        msg.edit_count += 1
        msg.raw["edit_date"] = int(time.time())
        self._render(msg)
        self._record_state(chat.obj["id"])
        return msg.raw

    def _edit_message_reply_markup(self, params: dict[str, Any]) -> dict[str, Any]:
        """Replace (or, without ``reply_markup``, remove) a bot message's inline keyboard."""
        chat = self._chat(params)
        msg = chat.messages.get(params.get("message_id"))  # type: ignore[arg-type]
        if msg is None:
            raise _Rejection(EDIT_NOT_FOUND)
        if not msg.from_bot:
            raise _Rejection(CANT_BE_EDITED)
        markup = params.get("reply_markup")
        markup = markup if isinstance(markup, dict) and markup.get("inline_keyboard") else None
        if markup == msg.reply_markup:
            raise _Rejection(NOT_MODIFIED)
        msg.reply_markup = markup
        self._render(msg)
        return msg.raw

    def _delete_message(self, params: dict[str, Any]) -> bool:
        chat = self._chat(params)
        msg = chat.messages.pop(params.get("message_id"), None)  # type: ignore[arg-type]
        if msg is None:
            raise _Rejection(DELETE_NOT_FOUND)
        if msg.from_bot:
            self._record_state(chat.obj["id"])
        return True

    def _send_chat_action(self, params: dict[str, Any]) -> bool:
        self._chat(params)
        if params.get("action") not in _CHAT_ACTIONS:
            raise _Rejection(ApiError.bad_request("wrong parameter action in request"))
        return True

    def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        query_id = str(params.get("callback_query_id"))
        if query_id not in self._open_callbacks:
            raise _Rejection(QUERY_INVALID)
        self._open_callbacks.discard(query_id)
        self.answered_callbacks[query_id] = params
        return True

    def _set_my_commands(self, params: dict[str, Any]) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list) or not all(
            isinstance(c, dict)
            and _COMMAND_RE.match(str(c.get("command", "")))
            and 1 <= len(str(c.get("description", ""))) <= 256
            for c in commands
        ):
            raise _Rejection(ApiError.bad_request("BOT_COMMAND_INVALID"))
        self.commands = commands
        return True

    def _delete_my_commands(self, params: dict[str, Any]) -> bool:
        self.commands = []
        return True

    def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        answer = self.files.get_file(params)
        if isinstance(answer, ApiError):
            raise _Rejection(answer)
        return answer

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook_url:
            raise _Rejection(WEBHOOK_CONFLICT)
        if self.competing:
            raise _Rejection(POLLING_CONFLICT)
        offset = params.get("offset")
        if isinstance(offset, int) and offset > 0:
            self._confirmed = max(self._confirmed, offset)
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(params.get("timeout") or 0)
        while True:
            pending = self._pending()
            remaining = deadline - loop.time()
            if pending or remaining <= 0 or self._closing.is_set():
                return pending[:limit]
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await changed.wait()

    def _set_webhook(self, params: dict[str, Any]) -> bool:
        self.webhook_url = str(params.get("url") or "")
        self._webhook_secret = params.get("secret_token")
        if params.get("drop_pending_updates"):
            self._confirmed = next(self._update_ids)
        self._notify()
        return True

    def _delete_webhook(self, params: dict[str, Any]) -> bool:
        self.webhook_url = ""
        if params.get("drop_pending_updates"):
            self._confirmed = next(self._update_ids)
        return True

    def _get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._pending()),
        }

    def _targets(self) -> list[str]:
        """Where the next update goes: the webhook, or its share of :attr:`webhook_targets`."""
        targets = self.webhook_targets
        if not targets:
            return [self.webhook_url]
        first = next(self._rotation)
        copies = min(self.webhook_copies, len(targets))
        return [targets[(first + i) % len(targets)] for i in range(copies)]

    async def _deliver_webhooks(self) -> None:
        """POST pending updates, in order, to the webhook while one is set."""
        async with ClientSession(timeout=ClientTimeout(total=5)) as session:
            while True:
                changed = self._changed
                pending = self._pending()
                if not (self.webhook_url and pending):
                    await changed.wait()
                    continue
                headers = {}
                if self._webhook_secret:
                    headers["X-Telegram-Bot-Api-Secret-Token"] = self._webhook_secret
                delivered = False
                for url in self._targets():
                    try:
                        async with session.post(url, json=pending[0], headers=headers) as response:
                            delivered = response.status < 300 or delivered
                    except (OSError, TimeoutError):
                        pass
                if delivered:
                    self._confirmed = pending[0]["update_id"] + 1
                    self._notify()
                else:
                    await asyncio.sleep(0.1)


class _Rejection(Exception):
    """Carries an :class:`ApiError` out of a method handler."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.description)
        self.error = error


_S = TelegramBotApiServer
_METHODS: dict[str, Callable[[_S, dict[str, Any]], Any]] = {
    "getme": lambda self, params: BOT_USER,
    "logout": lambda self, params: True,
    "close": lambda self, params: True,
    "setwebhook": _S._set_webhook,
    "deletewebhook": _S._delete_webhook,
    "getwebhookinfo": _S._get_webhook_info,
    "getupdates": _S._get_updates,
    "getfile": _S._get_file,
    "sendmessage": _S._send_message,
    "sendvoice": _S._send_voice,
    "editmessagetext": _S._edit_message_text,
    "editmessagereplymarkup": _S._edit_message_reply_markup,
    "deletemessage": _S._delete_message,
    "sendchataction": _S._send_chat_action,
    "answercallbackquery": _S._answer_callback_query,
    "setmycommands": _S._set_my_commands,
    "getmycommands": lambda self, params: self.commands,
    "deletemycommands": _S._delete_my_commands,
}
