"""What the registry knows of Discord (architecture §3 "Kinds"): the config model of a
``kind: discord`` channel, its message limit, and the adapter's import path. Pydantic and
numbers only (:mod:`channels.kind`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

from channels.base import ChannelLimits
from channels.kind import ChannelKind
from channels.settings import StreamModeSettings
from config.errors import LocatedValueError
from config.fields import check_http_url

__all__ = ["DISCORD_MAX_CONTENT_LENGTH", "KIND", "DiscordChannelConfig"]

DISCORD_MAX_CONTENT_LENGTH = 2000
"""Maximum ``content`` of one Discord message sent by a bot, in characters.

Source: Discord API, Create Message ("content: message contents (up to 2000 characters)").
"""


def _is_snowflake_or_star(entry: str | int) -> bool:
    if isinstance(entry, int):
        return entry > 0
    return entry == "*" or (entry.isascii() and entry.isdigit())


class DiscordChannelConfig(StreamModeSettings):
    """A Discord bot (discord.py)."""

    kind: Literal["discord"]
    token: SecretStr = Field(description="bot token (developer portal, Bot, Reset Token)")
    api_base_url: str | None = Field(
        default=None,
        description="REST API root, e.g. a proxy's (default https://discord.com/api/v10); "
        "discord.py reads it process-wide: one Discord bot per process",
    )
    gateway_url: str | None = Field(
        default=None,
        description="Gateway WebSocket URL (default wss://gateway.discord.gg/); process-wide",
    )
    allowed_users: list[str | int] = Field(
        default_factory=list,
        description='numeric Discord user ids (snowflakes) allowed to talk to the bot; "*" = '
        "everyone; empty = nobody",
    )
    allowed_guilds: list[str | int] = Field(
        default_factory=list,
        description="numeric guild (server) ids the bot answers in; empty = every guild",
    )
    allowed_channels: list[str | int] = Field(
        default_factory=list,
        description="numeric channel ids the bot answers in (a thread counts as its parent "
        "channel); empty = every channel; direct messages are not affected",
    )
    message_content_intent: bool = Field(
        default=True,
        description="request the privileged Message Content intent (enable it in the developer "
        "portal); without it guild messages that do not mention the bot arrive empty",
    )
    shard_id: int | None = Field(
        default=None,
        ge=0,
        description="this instance's Gateway shard (0 … shard_count-1) when several instances "
        "serve the bot; direct messages arrive on shard 0 only; null = one instance",
    )
    shard_count: int | None = Field(
        default=None, ge=1, description="how many shards the instances share; with shard_id"
    )

    @model_validator(mode="after")
    def _shards(self) -> DiscordChannelConfig:
        if (self.shard_id is None) != (self.shard_count is None):
            missing = "shard_count" if self.shard_count is None else "shard_id"
            raise LocatedValueError(((missing,), "shard_id and shard_count go together"))
        if self.shard_id is not None and self.shard_count is not None:
            if self.shard_id >= self.shard_count:
                raise LocatedValueError((("shard_id",), "expected less than shard_count"))
        return self

    @field_validator("api_base_url")
    @classmethod
    def _api_url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)

    @field_validator("gateway_url")
    @classmethod
    def _ws_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("ws://", "wss://")):
            raise ValueError("expected a ws:// or wss:// URL")
        return value

    @field_validator("allowed_users", "allowed_guilds", "allowed_channels")
    @classmethod
    def _snowflakes(cls, value: list[str | int], info: ValidationInfo) -> list[str | int]:
        # Discord names can be changed by their owner: only the immutable ids identify a user.
        what = {"allowed_users": "user", "allowed_guilds": "guild", "allowed_channels": "channel"}
        star = info.field_name == "allowed_users"
        bad = [
            index
            for index, entry in enumerate(value)
            if not _is_snowflake_or_star(entry) or (entry == "*" and not star)
        ]
        if bad:
            kind = what[info.field_name or "allowed_users"]
            message = 'expected a numeric Discord user id or "*"'
            if not star:
                message = f"expected a numeric Discord {kind} id"
            raise LocatedValueError(*(((index,), message) for index in bad))
        return value


KIND = ChannelKind(
    config=DiscordChannelConfig,
    limits=ChannelLimits(DISCORD_MAX_CONTENT_LENGTH, "chars"),
    adapter="channels.discord.adapter:DiscordChannel",
)
