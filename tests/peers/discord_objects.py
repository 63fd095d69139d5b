"""Guild, channel and thread objects for the local Discord peer, as GUILD_CREATE carries them.

Shapes: https://discord.com/developers/docs/resources/guild#guild-object and
.../resources/channel#channel-object (thread channels with ``thread_metadata``), trimmed to what
discord.py 2.x reads.
"""

from __future__ import annotations

from typing import Any

from tests.peers.discord_wire import BOT_ID, now_iso

__all__ = [
    "DM",
    "EPHEMERAL",
    "PERMISSIONS",
    "PUBLIC_THREAD",
    "TEXT",
    "dm_channel_object",
    "guild_object",
    "text_channel_object",
    "thread_object",
]

PERMISSIONS = str((1 << 51) - 1 & ~(1 << 3))
"""Every permission bit but ADMINISTRATOR, as the decimal string Discord sends."""
EPHEMERAL = 1 << 6
"""The EPHEMERAL message flag."""
TEXT, DM, PUBLIC_THREAD = 0, 1, 11
"""Channel types."""


def guild_object(guild_id: int, name: str) -> dict[str, Any]:
    """A guild owned by the bot with one role, @everyone (its id is the guild's)."""
    everyone = {
        "id": str(guild_id),
        "name": "@everyone",
        "permissions": PERMISSIONS,
        "position": 0,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    return {
        "id": str(guild_id),
        "name": name,
        "icon": None,
        "owner_id": str(BOT_ID),
        "roles": [everyone],
        "emojis": [],
        "stickers": [],
        "features": [],
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "nsfw_level": 0,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "system_channel_id": None,
        "afk_channel_id": None,
        "afk_timeout": 300,
        "application_id": None,
        "large": False,
        "unavailable": False,
    }


def text_channel_object(channel_id: int, guild_id: int, name: str, position: int) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "type": TEXT,
        "guild_id": str(guild_id),
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
    }


def thread_object(
    thread_id: int, parent: dict[str, Any], name: str, *, owner_id: int
) -> dict[str, Any]:
    """A public thread under the text channel object ``parent``, open (not archived)."""
    return {
        "id": str(thread_id),
        "type": PUBLIC_THREAD,
        "guild_id": parent["guild_id"],
        "parent_id": parent["id"],
        "owner_id": str(owner_id),
        "name": name,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "rate_limit_per_user": 0,
        "flags": 0,
        "last_message_id": None,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": now_iso(),
            "locked": False,
            "create_timestamp": now_iso(),
        },
    }


def dm_channel_object(channel_id: int, recipient: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "type": DM,
        "flags": 0,
        "recipients": [recipient],
        "last_message_id": None,
    }
