"""The local Discord peer's world: users, guilds, channels, threads and messages.

Every change that Discord announces goes out through ``dispatch`` (the gateway's):
CHANNEL_CREATE, THREAD_CREATE, MESSAGE_CREATE / UPDATE / DELETE (for the bot's own writes too).
Validation raises :class:`~tests.peers.discord_wire.Refused` with Discord's codes; who a
message pings follows ``allowed_mentions``
(https://discord.com/developers/docs/resources/message#allowed-mentions-object).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.peers.discord_gateway import DIRECT_MESSAGES, GUILD_MESSAGES, GUILDS
from tests.peers.discord_objects import (
    DM,
    EPHEMERAL,
    dm_channel_object,
    guild_object,
    text_channel_object,
    thread_object,
)
from tests.peers.discord_wire import (
    BOT_ID,
    EMPTY_MESSAGE,
    NOT_AUTHOR,
    UNKNOWN_CHANNEL,
    UNKNOWN_MESSAGE,
    UNKNOWN_REFERENCE,
    ApiError,
    Refused,
    StoredMessage,
    now_iso,
    snowflakes,
    user_object,
)

__all__ = ["World"]

_MENTION_RE = re.compile(r"<@!?(\d+)>")
_EVERYONE_RE = re.compile(r"@(everyone|here)\b")

Dispatch = Callable[..., None]


@dataclass
class _Guild:
    obj: dict[str, Any]
    member_ids: list[int] = field(default_factory=list)
    channel_ids: list[int] = field(default_factory=list)
    thread_ids: list[int] = field(default_factory=list)
    joined_at: str = field(default_factory=now_iso)


class World:
    """See the module docstring. ``max_content`` is the ``content`` limit in characters;
    ``dispatch`` is :meth:`Gateway.dispatch`; ``changed`` is called after every change."""

    def __init__(
        self,
        *,
        max_content: int,
        dispatch: Dispatch,
        changed: Callable[[], None],
    ) -> None:
        self.max_content = max_content
        self.dispatch = dispatch
        self.changed = changed
        self.bot_user = user_object(BOT_ID, "Relay", bot=True)
        self.users: dict[int, dict[str, Any]] = {BOT_ID: self.bot_user}
        self.guilds: dict[int, _Guild] = {}
        self.channels: dict[int, dict[str, Any]] = {}
        self.messages_by_id: dict[int, StoredMessage] = {}
        self.channel_messages: dict[int, list[int]] = {}
        self.states: dict[int, list[tuple[str, ...]]] = {}
        self.guild_id = self.add_guild("Test Guild")
        self.user_id = self.add_user("Alice")
        self.channel_id = self.add_channel("general")
        self.dm_channel_id = self.open_dm(self.user_id)

    # -- building the world ----------------------------------------------------------------------

    def add_guild(self, name: str) -> int:
        guild_id = snowflakes()
        obj = guild_object(guild_id, name)
        self.guilds[guild_id] = _Guild(obj, member_ids=[BOT_ID])
        return guild_id

    def add_user(self, name: str, *, guild_id: int | None = None) -> int:
        user_id = snowflakes()
        self.users[user_id] = user_object(user_id, name)
        self.guilds[guild_id or self.guild_id].member_ids.append(user_id)
        return user_id

    def add_channel(self, name: str, *, guild_id: int | None = None) -> int:
        guild = self.guilds[guild_id or self.guild_id]
        channel_id = snowflakes()
        obj = text_channel_object(channel_id, int(guild.obj["id"]), name, len(guild.channel_ids))
        self.channels[channel_id] = obj
        guild.channel_ids.append(channel_id)
        self.dispatch("CHANNEL_CREATE", obj, intent=GUILDS)
        return channel_id

    def add_thread(self, parent_id: int, name: str) -> int:
        parent = self.channel(parent_id)
        guild = self.guilds[int(parent["guild_id"])]
        thread_id = snowflakes()
        obj = thread_object(thread_id, parent, name, owner_id=self.user_id)
        self.channels[thread_id] = obj
        guild.thread_ids.append(thread_id)
        self.dispatch("THREAD_CREATE", {**obj, "newly_created": True}, intent=GUILDS)
        return thread_id

    def open_dm(self, user_id: int) -> int:
        for channel_id, obj in self.channels.items():
            if obj["type"] == DM and obj["recipients"][0]["id"] == str(user_id):
                return channel_id
        channel_id = snowflakes()
        self.channels[channel_id] = dm_channel_object(channel_id, self.users[user_id])
        return channel_id

    def channel(self, channel_id: int) -> dict[str, Any]:
        try:
            return self.channels[channel_id]
        except KeyError:
            raise Refused(UNKNOWN_CHANNEL) from None

    def guild_of(self, channel_id: int) -> int | None:
        guild_id = self.channel(channel_id).get("guild_id")
        return int(guild_id) if guild_id else None

    def member(self, guild_id: int, user_id: int, *, with_user: bool) -> dict[str, Any]:
        member: dict[str, Any] = {
            "roles": [],
            "joined_at": self.guilds[guild_id].joined_at,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "nick": None,
        }
        if with_user:
            member["user"] = self.users[user_id]
        return member

    def members(self, guild_id: int) -> list[dict[str, Any]]:
        guild = self.guilds[guild_id]
        return [self.member(guild_id, uid, with_user=True) for uid in guild.member_ids]

    def guild_objects(self) -> list[dict[str, Any]]:
        """GUILD_CREATE ``d`` for every guild (``member_count`` equals the members sent, so
        discord.py sees each guild chunked and does not ask for members)."""
        out = []
        for guild_id, guild in self.guilds.items():
            members = self.members(guild_id)
            out.append(
                {
                    **guild.obj,
                    "joined_at": guild.joined_at,
                    "member_count": len(members),
                    "members": members,
                    "channels": [self.channels[c] for c in guild.channel_ids],
                    "threads": [self.channels[t] for t in guild.thread_ids],
                    "presences": [],
                    "voice_states": [],
                    "stage_instances": [],
                    "guild_scheduled_events": [],
                    "soundboard_sounds": [],
                }
            )
        return out

    # -- messages ------------------------------------------------------------------------------

    def visible(self, channel_id: int, *, bot_only: bool) -> list[StoredMessage]:
        out = []
        for message_id in self.channel_messages.get(channel_id, []):
            msg = self.messages_by_id[message_id]
            if not msg.deleted and not msg.ephemeral and (msg.from_bot or not bot_only):
                out.append(msg)
        return out

    def get_message(self, channel_id: int, message_id: int) -> StoredMessage:
        self.channel(channel_id)
        msg = self.messages_by_id.get(message_id)
        if msg is None or msg.deleted or msg.channel_id != channel_id:
            raise Refused(UNKNOWN_MESSAGE)
        return msg

    def user_message(
        self,
        channel_id: int,
        content: str,
        *,
        author_id: int | None,
        reply_to: int | None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        author = author_id or self.user_id
        body = {"content": content, "attachments": attachments or []}
        msg = self.store(channel_id, body, author=author, reply_to=reply_to, allowed=None)
        mentions_bot = BOT_ID in msg.pinged_users
        self.announce("MESSAGE_CREATE", msg, gated=not mentions_bot)
        return msg.payload

    def user_edit(self, message_id: int, content: str) -> dict[str, Any]:
        """The author of user message ``message_id`` edits its content: MESSAGE_UPDATE."""
        msg = self.messages_by_id[message_id]
        msg.payload["content"] = content
        msg.payload["edited_timestamp"] = now_iso()
        msg.edits += 1
        self.changed()
        self.announce("MESSAGE_UPDATE", msg, gated=BOT_ID not in msg.pinged_users)
        return msg.payload

    def bot_send(self, channel_id: int, body: dict[str, Any]) -> dict[str, Any]:
        """POST /channels/{id}/messages. Raises ApiError (10003, 50035, 50006)."""
        self.channel(channel_id)
        self.validate(body, creating=True)
        reply_to = None
        ref = body.get("message_reference")
        if ref and ref.get("message_id"):
            reply_to = int(ref["message_id"])
            target = self.messages_by_id.get(reply_to)
            if target is None or target.deleted:
                if ref.get("fail_if_not_exists", True):
                    raise Refused(UNKNOWN_REFERENCE)
                reply_to = None
        msg = self.store(
            channel_id, body, author=BOT_ID, reply_to=reply_to, allowed=body.get("allowed_mentions")
        )
        self.announce("MESSAGE_CREATE", msg, gated=False)
        return msg.payload

    def bot_edit(self, channel_id: int, message_id: int, body: dict[str, Any]) -> dict[str, Any]:
        """PATCH a message. Raises ApiError (10003, 10008, 50005, 50035)."""
        msg = self.get_message(channel_id, message_id)
        if not msg.from_bot:
            raise Refused(NOT_AUTHOR)
        self.validate(body, creating=False)
        return self.apply_edit(msg, body)

    def bot_delete(self, channel_id: int, message_id: int) -> None:
        msg = self.get_message(channel_id, message_id)
        msg.deleted = True
        self._record_state(channel_id)
        d: dict[str, Any] = {"id": str(message_id), "channel_id": str(channel_id)}
        if (guild_id := self.guild_of(channel_id)) is not None:
            d["guild_id"] = str(guild_id)
        self.dispatch("MESSAGE_DELETE", d, intent=self._intent(channel_id))

    def validate(self, body: dict[str, Any], *, creating: bool) -> None:
        content = body.get("content")
        if content is not None and len(str(content)) > self.max_content:
            raise Refused(ApiError.too_long(self.max_content))
        if creating and not (
            content
            or body.get("embeds")
            or body.get("components")
            or body.get("attachments")
            or body.get("sticker_ids")
        ):
            raise Refused(EMPTY_MESSAGE)

    def apply_edit(self, msg: StoredMessage, body: dict[str, Any]) -> dict[str, Any]:
        for key in ("content", "embeds", "components", "flags"):
            if key in body and body[key] is not None:
                msg.payload[key] = body[key]
        msg.payload["edited_timestamp"] = now_iso()
        msg.edits += 1
        if "allowed_mentions" in body:
            reply_author = self._reply_author(msg.reference_id)
            users, everyone = _pings(msg.content, body["allowed_mentions"], reply_author)
            # an edit never pings again; it only decides how the mentions render
            msg.payload["mentions"] = [self.users[u] for u in users if u in self.users]
            msg.payload["mention_everyone"] = everyone
        self._record_state(msg.channel_id)
        self.announce("MESSAGE_UPDATE", msg, gated=False)
        return msg.payload

    def _reply_author(self, reply_to: int | None) -> int | None:
        target = self.messages_by_id.get(reply_to) if reply_to is not None else None
        return int(target.payload["author"]["id"]) if target is not None else None

    def store(
        self,
        channel_id: int,
        body: dict[str, Any],
        *,
        author: int,
        reply_to: int | None,
        allowed: dict[str, Any] | None,
        flags: int = 0,
    ) -> StoredMessage:
        channel = self.channel(channel_id)
        content = str(body.get("content") or "")
        users, everyone = _pings(content, allowed, self._reply_author(reply_to))
        message_id = snowflakes()
        payload: dict[str, Any] = {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "author": self.users[author],
            "content": content,
            "timestamp": now_iso(),
            "edited_timestamp": None,
            "tts": bool(body.get("tts", False)),
            "mention_everyone": everyone,
            "mentions": [self.users[u] for u in sorted(users) if u in self.users],
            "mention_roles": [],
            "attachments": body.get("attachments", []) if author != BOT_ID else [],
            "embeds": body.get("embeds") or [],
            "components": body.get("components") or [],
            "pinned": False,
            "type": 19 if reply_to is not None else 0,
            "flags": flags | body.get("flags", 0),
        }
        if body.get("nonce") is not None:
            payload["nonce"] = body["nonce"]
        if reply_to is not None:
            target = self.messages_by_id[reply_to]
            payload["message_reference"] = {
                "type": 0,
                "message_id": str(reply_to),
                "channel_id": str(target.channel_id),
            }
            if channel.get("guild_id"):
                payload["message_reference"]["guild_id"] = channel["guild_id"]
            payload["referenced_message"] = dict(target.payload)
        msg = StoredMessage(
            payload,
            from_bot=author == BOT_ID,
            pinged_users=frozenset(users),
            pinged_everyone=everyone,
            ephemeral=bool(payload["flags"] & EPHEMERAL),
        )
        self.messages_by_id[message_id] = msg
        self.channel_messages.setdefault(channel_id, []).append(message_id)
        channel["last_message_id"] = str(message_id)
        if msg.from_bot:
            self._record_state(channel_id)
        self.changed()
        return msg

    def _intent(self, channel_id: int) -> int:
        return GUILD_MESSAGES if self.guild_of(channel_id) is not None else DIRECT_MESSAGES

    def announce(self, event: str, msg: StoredMessage, *, gated: bool) -> None:
        if msg.ephemeral:
            return
        d = dict(msg.payload)
        guild_id = self.guild_of(msg.channel_id)
        if guild_id is not None:
            d["guild_id"] = str(guild_id)
            d["member"] = self.member(guild_id, int(d["author"]["id"]), with_user=False)
        self.dispatch(
            event,
            d,
            intent=self._intent(msg.channel_id),
            gated_content=gated and guild_id is not None,
        )

    def _record_state(self, channel_id: int) -> None:
        texts = tuple(m.content for m in self.visible(channel_id, bot_only=True))
        self.states.setdefault(channel_id, []).append(texts)
        self.changed()


def _pings(
    content: str, allowed: dict[str, Any] | None, reply_author: int | None
) -> tuple[set[int], bool]:
    """Whom ``content`` notifies: (user ids, whether @everyone/@here pings)."""
    mentioned = {int(x) for x in _MENTION_RE.findall(content)}
    everyone = bool(_EVERYONE_RE.search(content))
    if allowed is None:
        return mentioned | ({reply_author} if reply_author else set()), everyone
    parse = allowed.get("parse") or []
    if "users" in parse:
        users = mentioned
    else:
        users = mentioned & {int(u) for u in allowed.get("users") or []}
    if reply_author and allowed.get("replied_user", False):
        users = users | {reply_author}
    return users, everyone and "everyone" in parse
