"""What a Discord message or application command becomes for the orchestrator (architecture §3
"Contract", "Access").

:class:`InboundReader` turns discord.py's ``Message`` and ``Interaction`` objects into
:class:`~channels.base.InboundMessage`\\ s, or drops them:

* our own messages, other bots' and webhooks', system messages (pins, thread starts, joins) and
  messages without text;
* a message id seen before (a replayed MESSAGE_CREATE): the last :data:`SEEN_IDS` are kept;
* guild messages outside ``allowed_guilds`` / ``allowed_channels`` (a thread counts as its
  parent channel). DMs are never filtered here; ``allowed_users`` and ``respond_in_groups`` are
  the orchestrator's.

A thread message has ``chat_id`` = the parent channel and ``thread_id`` = the thread. A guild
message ``mentions_bot`` when it @mentions the bot (``@everyone`` does not count) or replies to
one of its messages; a leading mention of the bot is removed from the text (``@bot /stop`` →
``/stop``). A reply carries the message it refers to (``referenced_message``) as ``quoted``.
A guild message from a user that arrives with no content at all means the Message
Content intent is missing: :attr:`InboundReader.content_missing` turns true once.

Message objects: https://discord.com/developers/docs/resources/message
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import discord

from channels.base import InboundMessage, Quoted

__all__ = ["SEEN_IDS", "InboundReader"]

SEEN_IDS = 1024
"""Inbound message ids remembered, to drop a replayed MESSAGE_CREATE."""
_TEXT_TYPES = (discord.MessageType.default, discord.MessageType.reply)


def _sender_name(user: discord.abc.User) -> str:
    # A display name is chosen freely (it may look like "@123"): never passed on with a leading
    # "@", which would read as a verified handle to allowed_users (snowflakes only here).
    return user.display_name.lstrip("@") or str(user.id)


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

    def message(self, message: discord.Message, me: int) -> InboundMessage | None:
        """MESSAGE_CREATE → an inbound message, or None (module docstring). ``me``: our id."""
        author = message.author
        if author.id == me or author.bot or message.webhook_id is not None:
            return None
        if message.type not in _TEXT_TYPES or message.id in self._seen:
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
        if not text:
            return None
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
            update_ids=(message.id,),  # the store answers each message once, across restarts
            quoted=_quoted(resolved, me),
        )

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
