"""Interactions for the local Discord peer: button clicks, slash commands, their callbacks.

https://discord.com/developers/docs/interactions/receiving-and-responding: an interaction
(INTERACTION_CREATE, type 2 application command or 3 message component) is answered once, within
``timeout`` seconds (Discord: 3), by ``POST /interactions/{id}/{token}/callback`` with a type:
4 posts a message, 5 posts a "thinking" message for a later ``@original`` edit, 6 acknowledges a
component silently, 7 edits the component's message. Follow-ups go to
``POST /webhooks/{application_id}/{token}``. Application commands are registered by bulk
overwrite (``PUT /applications/{id}/commands``, or per guild).
"""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass
from typing import Any

from tests.peers.discord_objects import EPHEMERAL, PERMISSIONS
from tests.peers.discord_wire import (
    ALREADY_ACKNOWLEDGED,
    APPLICATION_ID,
    BOT_ID,
    UNKNOWN_INTERACTION,
    UNKNOWN_MESSAGE,
    Refused,
    StoredMessage,
    snowflakes,
)
from tests.peers.discord_world import World

__all__ = ["Interactions"]


@dataclass
class _Interaction:
    payload: dict[str, Any]
    created: float
    message_id: int | None  # the component's message
    answered: bool = False
    original_id: int | None = None  # the response message (@original)


class Interactions:
    """Interactions over one :class:`World`; ``timeout`` in seconds.

    ``responses`` holds every accepted callback: ``{"interaction_id", "type", "data", "at"}``
    (``at`` from ``time.monotonic()``); ``commands`` the registered application commands by
    guild id (None: global).
    """

    def __init__(self, world: World, *, timeout: float) -> None:
        self.world = world
        self.timeout = timeout
        self.pending: dict[int, _Interaction] = {}
        self.responses: list[dict[str, Any]] = []
        self.commands: dict[int | None, list[dict[str, Any]]] = {}
        self._tokens: dict[str, int] = {}
        self._versions = itertools.count(1)

    def click(self, message_id: int, custom_id: str, *, user_id: int | None) -> int:
        msg = self.world.messages_by_id[message_id]
        if not msg.from_bot:
            raise ValueError("components belong to the bot's messages")
        data = {"custom_id": custom_id, "component_type": 2}
        return self._interaction(3, msg.channel_id, data, user_id, message=msg)

    def command(
        self,
        channel_id: int,
        name: str,
        *,
        options: list[dict[str, Any]] | None,
        user_id: int | None,
    ) -> int:
        guild_id = self.world.guild_of(channel_id)
        registered = self.commands.get(guild_id, []) + self.commands.get(None, [])
        command = next((c for c in registered if c["name"] == name), None)
        if command is None:
            raise ValueError(f"command {name!r} is not registered")
        data: dict[str, Any] = {
            "id": command["id"],
            "name": name,
            "type": 1,
            "options": options or [],
        }
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
        return self._interaction(2, channel_id, data, user_id, message=None)

    def _interaction(
        self,
        kind: int,
        channel_id: int,
        data: dict[str, Any],
        user_id: int | None,
        *,
        message: StoredMessage | None,
    ) -> int:
        user = user_id or self.world.user_id
        interaction_id = snowflakes()
        token = secrets.token_urlsafe(24)
        guild_id = self.world.guild_of(channel_id)
        payload: dict[str, Any] = {
            "id": str(interaction_id),
            "application_id": str(APPLICATION_ID),
            "type": kind,
            "token": token,
            "version": 1,
            "data": data,
            "channel_id": str(channel_id),
            "channel": self.world.channel(channel_id),
            "app_permissions": PERMISSIONS,
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 10_485_760,
            "context": 0 if guild_id is not None else 1,
            "authorizing_integration_owners": {"0": str(guild_id or 0)},
        }
        if message is not None:
            payload["message"] = message.payload
        if guild_id is not None:
            payload.update(
                guild_id=str(guild_id),
                guild_locale="en-US",
                guild={"id": str(guild_id), "locale": "en-US", "features": []},
                member={
                    **self.world.member(guild_id, user, with_user=True),
                    "permissions": PERMISSIONS,
                },
            )
        else:
            payload["user"] = self.world.users[user]
        self.pending[interaction_id] = _Interaction(
            payload, time.monotonic(), message.id if message is not None else None
        )
        self._tokens[token] = interaction_id
        self.world.dispatch("INTERACTION_CREATE", payload)
        return interaction_id

    def callback(self, interaction_id: int, token: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST /interactions/{id}/{token}/callback; returns the ``with_response`` body.
        Raises Refused (10062 unknown or late, 40060 answered twice, 50035)."""
        inter = self.pending.get(interaction_id)
        if inter is None or inter.payload["token"] != token:
            raise Refused(UNKNOWN_INTERACTION)
        if inter.answered:
            raise Refused(ALREADY_ACKNOWLEDGED)
        if time.monotonic() - inter.created > self.timeout:
            raise Refused(UNKNOWN_INTERACTION)
        kind = int(body["type"])
        data = body.get("data") or {}
        self.world.validate(data, creating=False)
        inter.answered = True
        self.responses.append(
            {"interaction_id": interaction_id, "type": kind, "data": data, "at": time.monotonic()}
        )
        channel_id = int(inter.payload["channel_id"])
        resource: dict[str, Any] | None = None
        response_id: int | None = None
        if kind in (4, 5):  # a new message; 5 shows "thinking" until @original is edited
            msg = self.world.store(
                channel_id,
                data,
                author=BOT_ID,
                reply_to=None,
                allowed=data.get("allowed_mentions"),
                flags=data.get("flags", 0),
            )
            self.world.announce("MESSAGE_CREATE", msg, gated=False)
            resource, response_id = msg.payload, msg.id
        elif kind == 7 and inter.message_id is not None:
            msg = self.world.messages_by_id[inter.message_id]
            resource, response_id = self.world.apply_edit(msg, data), msg.id
        elif kind == 6:
            response_id = inter.message_id
        inter.original_id = response_id
        self.world.changed()
        out: dict[str, Any] = {
            "interaction": {
                "id": str(interaction_id),
                "type": inter.payload["type"],
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(int(data.get("flags", 0)) & EPHEMERAL),
            }
        }
        if response_id is not None:
            out["interaction"]["response_message_id"] = str(response_id)
        out["resource"] = {"type": kind, **({"message": resource} if resource else {})}
        return out

    def _by_token(self, token: str) -> _Interaction:
        try:
            return self.pending[self._tokens[token]]
        except KeyError:
            raise Refused(UNKNOWN_INTERACTION) from None

    def put_commands(
        self, guild_id: int | None, commands: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Bulk overwrite (PUT): the registered list, each with ``id``/``application_id``."""
        out = []
        for command in commands:
            out.append(
                {
                    "type": 1,
                    "description": "",
                    "options": [],
                    "nsfw": False,
                    "default_member_permissions": None,
                    "dm_permission": True,
                    **command,
                    "id": str(snowflakes()),
                    "application_id": str(APPLICATION_ID),
                    "version": str(next(self._versions)),
                    **({"guild_id": str(guild_id)} if guild_id else {}),
                }
            )
        self.commands[guild_id] = out
        self.world.changed()
        return out

    def followup(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        inter = self._by_token(token)
        self.world.validate(body, creating=True)
        msg = self.world.store(
            int(inter.payload["channel_id"]),
            body,
            author=BOT_ID,
            reply_to=None,
            allowed=body.get("allowed_mentions"),
            flags=body.get("flags", 0),
        )
        self.world.announce("MESSAGE_CREATE", msg, gated=False)
        return msg.payload

    def edit_original(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        inter = self._by_token(token)
        self.world.validate(body, creating=False)
        if inter.original_id is None:
            raise Refused(UNKNOWN_MESSAGE)
        return self.world.apply_edit(self.world.messages_by_id[inter.original_id], body)
