"""What a Discord message or application command becomes for the orchestrator (architecture §3
"Contract", "Access").

:class:`InboundReader` turns discord.py's ``Message`` and ``Interaction`` objects into
:class:`~channels.base.InboundMessage`\\ s, or drops them:

* our own messages, other bots' and webhooks', system messages (pins, thread starts, joins) and
  messages without text or files;
* a message id seen before (a replayed MESSAGE_CREATE): the last :data:`SEEN_IDS` are kept;
  a user's edit of its content (a MESSAGE_UPDATE) is read again, marked ``edited``, with the
  snowflake of its ``edited_timestamp`` as its update id (``agent.rerun_edited``);
* guild messages outside ``allowed_guilds`` / ``allowed_channels`` (a thread counts as its
  parent channel). DMs are never filtered here; ``allowed_users`` and ``respond_in_groups`` are
  the orchestrator's.

A thread message has ``chat_id`` = the parent channel and ``thread_id`` = the thread. A guild
message ``mentions_bot`` when it @mentions the bot (``@everyone`` does not count) or replies to
one of its messages; a leading mention of the bot is removed from the text (``@bot /stop`` →
``/stop``). A reply carries the message it refers to (``referenced_message``) as ``quoted``.
Its files are attachments (``image/…`` images, ``audio/…`` and voice messages audio, the rest
documents), downloaded by :meth:`InboundReader.fetch` within the channel's bounds before the
message is handed on.
A guild message from a user that arrives with no content at all means the Message
Content intent is missing: :attr:`InboundReader.content_missing` turns true once.

Message objects: https://discord.com/developers/docs/resources/message
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import replace
from typing import Any

import discord

from channels.base import Attachment, AttachmentKind, InboundMessage, Quoted

__all__ = ["SEEN_IDS", "InboundReader"]

_LOG = logging.getLogger("channels.discord")

SEEN_IDS = 1024
"""Inbound message ids remembered, to drop a replayed MESSAGE_CREATE."""
_TEXT_TYPES = (discord.MessageType.default, discord.MessageType.reply)


def _sender_name(user: discord.abc.User) -> str:
    # A display name is chosen freely (it may look like "@123"): never passed on with a leading
    # "@", which would read as a verified handle to allowed_users (snowflakes only here).
    return user.display_name.lstrip("@") or str(user.id)


def _attachment_of(file: discord.Attachment) -> Attachment:
    """A file of a message, without its bytes yet: an ``image/…`` is an image, an
    ``audio/…`` or a voice message audio, anything else a document."""
    mime = (file.content_type or "application/octet-stream").split(";")[0].strip()
    kind: AttachmentKind = "document"
    if mime.startswith("image/"):
        kind = "image"
    elif mime.startswith("audio/") or file.is_voice_message():
        kind = "audio"
    return Attachment(mime, b"", file.size, kind, file.filename, file.duration)


def _quoted(resolved: object, me: int) -> Quoted | None:
    """The message a reply refers to (``referenced_message``), when Discord sent it."""
    if not isinstance(resolved, discord.Message) or not resolved.content.strip():
        return None
    author = resolved.author
    return Quoted(resolved.content, from_bot=author.id == me, sender_name=_sender_name(author))


class InboundReader:
    """Args: ``channel`` (the config key), ``allowed_guilds`` and ``allowed_channels`` (ids;
    empty = everywhere)."""

    def __init__(
        self, channel: str, allowed_guilds: Collection[int], allowed_channels: Collection[int]
    ) -> None:
        self._channel = channel
        self._guilds = frozenset(allowed_guilds)
        self._channels = frozenset(allowed_channels)
        self._seen: OrderedDict[int, int] = OrderedDict()  # message id -> author id
        self._files: dict[int, list[discord.Attachment]] = {}  # message id -> files to fetch
        self.content_missing = False
        """A guild message arrived without content (the Message Content intent is off)."""

    def author_of(self, message_id: str) -> int | None:
        """The author of a recent inbound message (whom a reply to it may mention)."""
        return self._seen.get(int(message_id)) if message_id.isdigit() else None

    def allowed_place(self, guild_id: int, chat_id: int, channel_id: int) -> bool:
        """``allowed_guilds`` and ``allowed_channels`` (a thread counts as its parent)."""
        if self._guilds and guild_id not in self._guilds:
            return False
        return not self._channels or bool({chat_id, channel_id} & self._channels)

    def message(
        self, message: discord.Message, me: int, *, edited: bool = False
    ) -> InboundMessage | None:
        """MESSAGE_CREATE → an inbound message, or None (module docstring). ``me``: our id.
        ``edited``: a user's edit of its content (a MESSAGE_UPDATE), marked ``edited`` (answered
        again only under ``agent.rerun_edited``), seen once per edit."""
        author = message.author
        if author.id == me or author.bot or message.webhook_id is not None:
            return None
        if message.type not in _TEXT_TYPES or (message.id in self._seen and not edited):
            return None
        self._seen[message.id] = author.id
        while len(self._seen) > SEEN_IDS:
            self._seen.popitem(last=False)
        channel = message.channel
        chat_id, thread_id = channel.id, None
        if isinstance(channel, discord.Thread):
            chat_id, thread_id = channel.parent_id, str(channel.id)
        if message.guild is not None:
            if not (message.content or message.attachments or message.embeds):
                self.content_missing = True
            if not self.allowed_place(message.guild.id, chat_id, channel.id):
                return None
        resolved = message.reference.resolved if message.reference is not None else None
        mentions = any(user.id == me for user in message.mentions) or (
            isinstance(resolved, discord.Message) and resolved.author.id == me
        )
        text = re.sub(rf"^\s*<@!?{me}>\s*", "", message.content).strip()
        files = tuple(_attachment_of(a) for a in message.attachments)
        if not text and not files:
            return None
        if files:
            self._files[message.id] = list(message.attachments)
            while len(self._files) > SEEN_IDS:
                del self._files[next(iter(self._files))]
        return InboundMessage(
            channel=self._channel,
            chat_id=str(chat_id),
            sender_id=str(author.id),
            sender_name=_sender_name(author),
            text=text,
            message_id=str(message.id),
            is_direct=message.guild is None,
            mentions_bot=mentions,
            thread_id=thread_id,
            update_ids=(_update_id(message) if edited else message.id,),  # answered once each
            quoted=_quoted(resolved, me),
            attachments=files,
            edited=edited,
        )

    async def fetch(self, inbound: InboundMessage, bounds: dict[str, int]) -> InboundMessage:
        """``inbound`` with its files' bytes: each downloaded from its URL when within
        ``bounds[kind]`` bytes (else, or when the download failed, without bytes: the
        orchestrator refuses it with one line). Only messages the bot may answer are fetched:
        direct ones and those that mention it."""
        files = self._files.pop(int(inbound.message_id or 0), None)
        if not files or not (inbound.is_direct or inbound.mentions_bot):
            return inbound
        fetched = []
        for attachment, file in zip(inbound.attachments, files, strict=True):
            if attachment.size is not None and attachment.size > bounds[attachment.kind]:
                fetched.append(attachment)
                continue
            try:
                data = await file.read()
            except (discord.HTTPException, discord.DiscordException) as exc:
                _LOG.warning("%s: could not download a file: %s", self._channel, exc)
                fetched.append(attachment)
                continue
            fetched.append(replace(attachment, data=data))
        return replace(inbound, attachments=tuple(fetched))

    def command(self, interaction: discord.Interaction[Any], name: str) -> InboundMessage | None:
        """An application command ``name`` → the text command ``/name``, or None outside
        ``allowed_guilds`` / ``allowed_channels``."""
        channel = interaction.channel
        channel_id = interaction.channel_id or 0
        chat_id, thread_id = channel_id, None
        if isinstance(channel, discord.Thread) and channel.parent_id is not None:
            chat_id, thread_id = channel.parent_id, str(channel.id)
        guild_id = interaction.guild_id
        if guild_id is not None and not self.allowed_place(guild_id, chat_id, channel_id):
            return None
        return InboundMessage(
            channel=self._channel,
            chat_id=str(chat_id),
            sender_id=str(interaction.user.id),
            sender_name=_sender_name(interaction.user),
            text=f"/{name}",
            is_direct=guild_id is None,
            mentions_bot=True,
            thread_id=thread_id,
            update_ids=(interaction.id,),
        )


def _update_id(edit: discord.Message) -> int:
    """The id the store sees an edit by, across restarts: a snowflake of the edit's time."""
    return discord.utils.time_snowflake(edit.edited_at or discord.utils.utcnow())
