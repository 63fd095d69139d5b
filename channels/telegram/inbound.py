"""The inbound side of the Telegram channel: updates → :class:`InboundMessage` (architecture §3).

Theory of operation
-------------------
:class:`InboundReader` turns one Bot API ``Message`` into an :class:`InboundMessage`:

* **Text** messages as they are; a **photo** or an **image document** (``mime_type``
  ``image/…``), any other **document**, a **voice** note or an **audio** file with its caption
  as the text (an attachment of kind ``image``, ``document`` or ``audio``; the orchestrator
  decides which types it takes). Of a photo's sizes the largest with both sides at most
  :data:`MAX_PHOTO_SIDE` pixels is taken (the smallest when none fits). Other messages
  (stickers, video, service messages) are not taken.
* ``mentions_bot``: an ``@username`` or text mention of the bot, ``/cmd@bot``, or a reply to the
  bot — in the text or the caption (``/reset@this_bot x`` reaches the orchestrator as
  ``/reset x``).
* **Downloads** (only of messages the orchestrator may answer: private, mentioning the bot,
  or any group message with ``respond_in_groups: all``) go through getFile
  (https://core.telegram.org/bots/api#getfile) and ``{base_file_url}{token}/{file_path}``.
  ``base_file_url`` defaults to the channel's ``base_url`` with its final ``/bot`` replaced by
  ``/file/bot`` (:func:`file_base_url`), so a self-hosted Bot API server serves files too. A
  file announced larger than the bound of its kind (``max_image_bytes``, ``max_document_bytes``,
  ``max_audio_bytes``), or an image of a type no provider takes, is not fetched: it reaches the
  orchestrator without bytes, which refuses the message with one line.
* **Albums** (``media_group_id``): Telegram sends each photo as its own update. They are
  collected per (chat, group) until ``media_group_wait_ms`` pass without another one, then
  form one message (all images, the caption that came with one of them, the first photo's
  ``message_id``, every ``update_id``). The wait runs in a task of the PTB ``Application``,
  which awaits it at stop.
* **Replies**: the replied-to message (``reply_to_message``; only the part the user quoted when
  the message has a ``quote``) becomes ``quoted``, the bot's or a user's.
* ``update_ids`` carry the updates' ids: the orchestrator answers each update once (a webhook
  retry or a poll offered again after a restart is dropped there).

:class:`PollHealth` watches getUpdates through the request object PTB uses for it: an answer
200 is ``ok``; any other answer (409 Conflict while another instance polls, 5xx) or a network
failure is ``degraded`` with the reason, until the next 200.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio
from telegram import Document, Message, MessageEntity, PhotoSize, User
from telegram.constants import ChatType
from telegram.error import BadRequest, TelegramError, TimedOut
from telegram.request import HTTPXRequest

from channels.base import (
    IMAGE_TYPES,
    Attachment,
    AttachmentKind,
    ChannelHealth,
    InboundMessage,
    Quoted,
)

__all__ = [
    "MAX_PHOTO_SIDE",
    "InboundReader",
    "PollHealth",
    "file_base_url",
    "pick_photo",
    "topic_of",
]

_LOG = logging.getLogger("channels.telegram_inbound")

MAX_PHOTO_SIDE = 2048
"""Pixels: the photo size taken is the largest whose width and height are within this."""
CLOUD_DOWNLOAD_LIMIT = 20 * 1024 * 1024
"""Bytes: the largest file the cloud Bot API lets a bot download ("file is too big" above)."""


def file_base_url(base_url: str, base_file_url: str | None) -> str:
    """Where files are downloaded from (the token and the file path are appended).

    >>> file_base_url("https://api.telegram.org/bot", None)
    'https://api.telegram.org/file/bot'
    >>> file_base_url("http://127.0.0.1:8081/bot", "http://files.local/file/bot")
    'http://files.local/file/bot'
    """
    if base_file_url:
        return base_file_url
    base = base_url.rstrip("/")
    if base.endswith("/bot"):
        return base.removesuffix("/bot") + "/file/bot"
    return base + "/file/bot"


def pick_photo(sizes: Sequence[PhotoSize], max_side: int = MAX_PHOTO_SIDE) -> PhotoSize:
    """The largest of ``sizes`` with both sides at most ``max_side`` px, else the smallest.

    Raises:
        ValueError: ``sizes`` is empty.
    """
    if not sizes:
        raise ValueError("a photo without sizes")
    fitting = [s for s in sizes if max(s.width, s.height) <= max_side]
    if fitting:
        return max(fitting, key=lambda s: s.width * s.height)
    return min(sizes, key=lambda s: s.width * s.height)


def topic_of(message: Message) -> str | None:
    """The forum topic of ``message``: ``message_thread_id`` counts only with
    ``is_topic_message`` (elsewhere Telegram sets it for reply threads too)."""
    if message.is_topic_message and message.message_thread_id is not None:
        return str(message.message_thread_id)
    return None


@dataclass(frozen=True)
class _File:
    """A file a message carries: what it is to the orchestrator and what Telegram says of it."""

    kind: AttachmentKind
    file_id: str
    mime_type: str
    size: int | None
    file_name: str | None = None
    duration: float | None = None

    def unfetched(self, size: int | None = None) -> Attachment:
        return Attachment(
            self.mime_type, b"", size or self.size, self.kind, self.file_name, self.duration
        )


def _seconds(duration: int | timedelta) -> float:
    return duration.total_seconds() if isinstance(duration, timedelta) else float(duration)


def _file_of(message: Message) -> _File | None:
    """The message's photo, image document, other document, voice note or audio file."""
    if message.photo:
        photo = pick_photo(message.photo)
        # Telegram re-encodes photos as JPEG
        return _File("image", photo.file_id, "image/jpeg", photo.file_size)
    document: Document | None = message.document
    if document is not None:
        mime = document.mime_type or "application/octet-stream"
        kind: AttachmentKind = "document"
        if mime.startswith("image/"):
            kind = "image"
        elif mime.startswith("audio/"):  # an audio file sent as a file
            kind = "audio"
        return _File(kind, document.file_id, mime, document.file_size, document.file_name)
    if message.voice is not None:
        voice = message.voice
        mime = voice.mime_type or "audio/ogg"
        return _File(
            "audio", voice.file_id, mime, voice.file_size, "voice.ogg", _seconds(voice.duration)
        )
    if message.audio is not None:
        audio = message.audio
        mime = audio.mime_type or "audio/mpeg"
        name = audio.file_name or "audio"
        return _File("audio", audio.file_id, mime, audio.file_size, name, _seconds(audio.duration))
    return None


@dataclass
class _Album:
    """Photos of one media group collected so far, and when the last one arrived."""

    messages: list[tuple[int, Message]] = field(default_factory=list)
    last_at: float = 0.0


class InboundReader:
    """Turns messages into :class:`InboundMessage` and delivers them (see the module docstring).

    Args:
        channel: the channel's name.
        deliver: awaited with each message (the channel's inbound handler).
        media_group_wait_ms: an album's collection window, in milliseconds.
        spawn: runs an album's wait as a task owned by the PTB ``Application``.
    """

    def __init__(
        self,
        channel: str,
        deliver: Callable[[InboundMessage], Awaitable[None]],
        *,
        media_group_wait_ms: int,
        spawn: Callable[[Awaitable[None]], object],
        respond_in_groups: str = "mention",
    ) -> None:
        self.channel = channel
        self.me: User | None = None
        self.bot: Any = None
        self.max_image_bytes = 10 * 1024 * 1024
        self.max_document_bytes = 10 * 1024 * 1024
        self.max_audio_bytes = 20 * 1024 * 1024
        self._deliver = deliver
        self._wait_secs = media_group_wait_ms / 1000
        self._spawn = spawn
        self._all_groups = respond_in_groups == "all"
        self._albums: dict[tuple[int, str], _Album] = {}

    # -- addressing ---------------------------------------------------------------------

    def _addressed_to_me(self, name: str) -> bool:
        return self.me is not None and name.lower() == f"@{self.me.username}".lower()

    def _text_and_mention(self, message: Message) -> tuple[str, bool]:
        """The message's text (or caption), commands addressed to us made plain, and whether
        it mentions the bot."""
        assert self.me is not None
        text = message.text if message.text is not None else (message.caption or "")
        entities = message.parse_entities() if message.text is not None else {}
        if message.text is None:
            entities = message.parse_caption_entities()
        mentions = bool(
            message.reply_to_message is not None
            and message.reply_to_message.from_user is not None
            and message.reply_to_message.from_user.id == self.me.id
        )
        for entity, value in entities.items():
            if entity.type == MessageEntity.MENTION and self._addressed_to_me(value):
                mentions = True
            elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
                mentions = mentions or entity.user.id == self.me.id
            elif entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
                command, _, target = value.partition("@")
                if target and self._addressed_to_me(f"@{target}"):
                    mentions = True
                    text = command + text[len(value) :]  # "/reset@this_bot x" -> "/reset x"
        return text, mentions

    def _inbound(
        self,
        message: Message,
        update_ids: tuple[int, ...],
        attachments: tuple[Attachment, ...] = (),
        *,
        text: str | None = None,
        mentions: bool | None = None,
    ) -> InboundMessage | None:
        user = message.from_user
        if user is None or self.me is None:
            return None
        own_text, own_mentions = self._text_and_mention(message)
        return InboundMessage(
            channel=self.channel,
            chat_id=str(message.chat.id),
            sender_id=str(user.id),
            # "@handle" is verified by Telegram and may be matched by allowed_users; a display
            # name is chosen freely by the user and never is.
            sender_name=f"@{user.username}" if user.username else user.full_name,
            sender_handle=user.username or None,
            text=own_text if text is None else text,
            message_id=str(message.message_id),
            is_direct=message.chat.type == ChatType.PRIVATE,
            mentions_bot=own_mentions if mentions is None else mentions,
            thread_id=topic_of(message),
            attachments=attachments,
            update_ids=update_ids,
            quoted=self._quoted(message),
        )

    def _quoted(self, message: Message) -> Quoted | None:
        """The message ``message`` replies to: the part the user quoted (``quote``) or its
        whole text or caption. A forum topic's messages "reply" to the topic's first message:
        that is no reply."""
        replied = message.reply_to_message
        if replied is None or self.me is None:
            return None
        if message.is_topic_message and replied.message_id == message.message_thread_id:
            return None
        quote = message.quote
        text = quote.text if quote is not None else (replied.text or replied.caption or "")
        if not text.strip():
            return None
        author = replied.from_user
        from_bot = author is not None and author.id == self.me.id
        name = ""
        if author is not None:
            name = f"@{author.username}" if author.username else author.full_name
        return Quoted(text, from_bot=from_bot, sender_name=name)

    # -- messages -----------------------------------------------------------------------

    async def on_message(self, message: Message, update_id: int) -> None:
        """Deliver ``message`` (a text or an image), or collect it into its album."""
        if self.me is None or message.from_user is None:
            return
        if message.text is not None:
            inbound = self._inbound(message, (update_id,))
        elif _file_of(message) is None:
            return  # not something the bot answers (see the README)
        elif message.media_group_id is not None:
            self._collect(message, update_id)
            return
        else:
            addressed = self._addressed(message, self._text_and_mention(message)[1])
            image = await (self._fetch if addressed else self._unfetched)(message)
            inbound = self._inbound(message, (update_id,), (image,))
        if inbound is not None:
            await self._deliver(inbound)

    def _addressed(self, message: Message, mentions: bool) -> bool:
        """Whether the orchestrator may answer it: images of group messages it will ignore
        (``respond_in_groups: mention`` without a mention) are never downloaded."""
        return message.chat.type == ChatType.PRIVATE or mentions or self._all_groups

    def _collect(self, message: Message, update_id: int) -> None:
        key = (message.chat.id, str(message.media_group_id))
        album = self._albums.get(key)
        if album is None:
            album = self._albums[key] = _Album()
            self._spawn(self._finish_album(key, album))
        album.messages.append((update_id, message))
        album.last_at = anyio.current_time()

    async def _finish_album(self, key: tuple[int, str], album: _Album) -> None:
        """Once ``media_group_wait_ms`` passed without another photo: one message."""
        # A debounce on the clock: each photo moves the end of the window.
        while (left := album.last_at + self._wait_secs - anyio.current_time()) > 0:  # noqa: ASYNC110
            await anyio.sleep(left)
        del self._albums[key]
        parts = sorted(album.messages, key=lambda item: item[1].message_id)
        first = parts[0][1]
        text, mentions = "", False
        for _, part in parts:
            part_text, part_mentions = self._text_and_mention(part)
            text = text or part_text  # Telegram carries an album's caption on one photo
            mentions = mentions or part_mentions
        fetch = self._fetch if self._addressed(first, mentions) else self._unfetched
        attachments = tuple([await fetch(part) for _, part in parts])
        inbound = self._inbound(
            first,
            tuple(update_id for update_id, _ in parts),
            attachments,
            text=text,
            mentions=mentions,
        )
        if inbound is not None:
            await self._deliver(inbound)

    @staticmethod
    async def _unfetched(message: Message) -> Attachment:
        file = _file_of(message)
        assert file is not None
        return file.unfetched()

    def _bound(self, file: _File) -> int:
        """The most bytes fetched of a file of its kind."""
        if file.kind == "image":
            return self.max_image_bytes
        return self.max_document_bytes if file.kind == "document" else self.max_audio_bytes

    async def _fetch(self, message: Message) -> Attachment:
        """The message's file, downloaded unless too large for its kind or an image of a type no
        provider takes (then without bytes; a failed download too, logged)."""
        file = _file_of(message)
        assert file is not None
        bound = self._bound(file)
        size = file.size
        if (file.kind == "image" and file.mime_type not in IMAGE_TYPES) or (size or 0) > bound:
            return file.unfetched()
        try:
            got = await self.bot.get_file(file.file_id)
            size = got.file_size or size
            if (size or 0) > bound:
                return file.unfetched(size)
            data = bytes(await got.download_as_bytearray())
        except BadRequest as exc:
            if "file is too big" in exc.message.lower():
                return file.unfetched(max(size or 0, CLOUD_DOWNLOAD_LIMIT + 1))
            _LOG.warning("%s: could not download a file: %s", self.channel, exc)
            return file.unfetched(size)
        except TelegramError as exc:
            _LOG.warning("%s: could not download a file: %s", self.channel, exc)
            return file.unfetched(size)
        return Attachment(
            file.mime_type, data, size or len(data), file.kind, file.file_name, file.duration
        )


class PollHealth:
    """The state of getUpdates (see the module docstring); :meth:`request` builds the request
    object PTB polls through."""

    def __init__(self) -> None:
        self.state = ChannelHealth()

    def request(self, **kwargs: Any) -> HTTPXRequest:
        """An ``HTTPXRequest`` (``kwargs`` are its arguments) that reports to this watch."""
        return _ObservedRequest(self, connection_pool_size=1, **kwargs)

    def answered(self, code: int, payload: bytes) -> None:
        if 200 <= code < 300:
            if self.state.state != "ok":
                _LOG.info("getUpdates answers again")
            self.state = ChannelHealth()
            return
        description = _description(payload) or f"HTTP {code}"
        if code == 409 and "other getupdates" in description.lower():
            reason = f"another instance is polling this bot (getUpdates: {code} {description})"
        else:
            reason = f"getUpdates answered {code} {description}"
        self.state = ChannelHealth("degraded", reason)

    def failed(self, exc: BaseException) -> None:
        if isinstance(exc, TimedOut):
            reason = "the Bot API server did not answer getUpdates in time"
        else:
            reason = f"cannot reach the Bot API server: {exc}"
        self.state = ChannelHealth("degraded", reason)


def _description(payload: bytes) -> str | None:
    try:
        body = json.loads(payload)
    except ValueError:
        return None
    value = body.get("description") if isinstance(body, dict) else None
    return value if isinstance(value, str) else None


class _ObservedRequest(HTTPXRequest):
    """PTB's HTTPX request, telling a :class:`PollHealth` how each getUpdates call went."""

    def __init__(self, health: PollHealth, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._health = health

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        try:
            code, payload = await super().do_request(*args, **kwargs)
        except asyncio.CancelledError:
            raise
        except TelegramError as exc:
            self._health.failed(exc)
            raise
        self._health.answered(code, payload)
        return code, payload
