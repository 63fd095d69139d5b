"""Pydantic models of the ``channels`` section (architecture §3, §6): one model per channel kind,
told apart by ``kind``. Unknown keys are errors; error messages never quote the input value."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from config.errors import LocatedValueError
from config.fields import StreamMode
from config.fields import Strict as _Strict
from config.fields import check_http_url as _check_http_url
from config.fields import check_listen as _check_listen
from config.fields import check_proxy_url as _check_proxy_url

__all__ = [
    "ChannelConfig",
    "ConsoleChannelConfig",
    "DiscordChannelConfig",
    "MatrixChannelConfig",
    "TelegramChannelConfig",
    "WebhookConfig",
]


_MXID = re.compile(r"@[\x21-\x39\x3b-\x7e]+:(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
"""A Matrix user id (Matrix spec, Appendices, "User Identifiers" and "Server Name"): ``@``, a
localpart of printable ASCII without ``:`` (historical ids included), ``:``, a server name
(DNS name, IPv4 or bracketed IPv6, optional port); at most 255 bytes."""
_MXID_MAX_BYTES = 255


class _ChannelBase(_Strict):
    draft_update_interval_ms: int = Field(
        default=1000, ge=50, description="milliseconds between consecutive writes to one chat"
    )
    allowed_users: list[str | int] = Field(
        default_factory=list,
        description='user ids or names allowed to talk to the bot; "*" = everyone; empty = nobody',
    )
    respond_in_groups: Literal["mention", "all"] = Field(
        default="mention", description="in group chats, answer only when mentioned or replied to"
    )
    show_reasoning: bool = Field(
        default=False, description="reserved: show the model's reasoning (no channel shows it yet)"
    )
    show_tool_status: bool = Field(
        default=False,
        description="multi_message: also send each tool status as a message, edited to ✓ or ✗",
    )


class _StreamModeChannel(_ChannelBase):
    stream_mode: StreamMode = Field(
        default="partial",
        description="off: one message at the end; partial: edit a draft in place; "
        "multi_message: one message per paragraph (Telegram: per model turn)",
    )
    multi_message_delay_ms: int = Field(
        default=800, ge=0, description="milliseconds between consecutive sends in multi_message"
    )


class WebhookConfig(_Strict):
    """Receive Telegram updates by webhook instead of long polling."""

    url: str = Field(description="public HTTPS URL Telegram posts updates to")
    listen: str = Field(default="127.0.0.1:8443", description="local HOST:PORT to serve on")
    secret_token: SecretStr | None = Field(
        default=None, description="X-Telegram-Bot-Api-Secret-Token expected on every update"
    )

    _listen = field_validator("listen")(_check_listen)


class TelegramChannelConfig(_StreamModeChannel):
    """A Telegram bot (Bot API through python-telegram-bot)."""

    kind: Literal["telegram"]
    token: SecretStr = Field(description="bot token from @BotFather")
    base_url: str = Field(
        default="https://api.telegram.org/bot",
        description="python-telegram-bot meaning: the token is appended",
    )
    webhook: WebhookConfig | None = Field(default=None, description="null = long polling")
    proxy: str | None = Field(
        default=None,
        description="proxy for every Bot API call, passed to python-telegram-bot: http://, "
        "https://, socks5:// or socks5h://HOST:PORT (user:password@ allowed); null = none",
    )
    base_file_url: str | None = Field(
        default=None,
        description='file downloads; default: base_url with "/bot" at its end replaced by '
        '"/file/bot" (the token is appended)',
    )
    media_group_wait_ms: int = Field(
        default=1000,
        ge=0,
        description="milliseconds: an album's photos arriving within this of each other form "
        "one message",
    )

    _proxy = field_validator("proxy")(_check_proxy_url)


class MatrixChannelConfig(_StreamModeChannel):
    """A Matrix account (matrix-nio)."""

    kind: Literal["matrix"]
    homeserver: str = Field(description="homeserver URL, e.g. https://matrix.example.org")
    user_id: str = Field(description='full user id, e.g. "@bot:example.org"')
    access_token: SecretStr | None = Field(
        default=None, description="log in with this token (with device_id); or use password"
    )
    device_id: str | None = Field(default=None, description="the device of access_token")
    password: SecretStr | None = Field(
        default=None, description="log in with the password when no access_token is given"
    )
    allowed_rooms: list[str] = Field(
        default_factory=list, description="room ids the bot answers and joins; empty = any room"
    )
    notice_previews: bool = Field(
        default=False, description="partial: drafts as m.notice; the finished answer as m.text"
    )
    live_marker: bool = Field(
        default=False, description="partial: mark the draft live (MSC4357) until its final edit"
    )
    store_path: str | None = Field(
        default=None, description="directory of the end-to-end encryption store (matrix-nio[e2e])"
    )
    stream_mode: StreamMode = Field(
        default="multi_message",
        description="off: one message at the end; partial: edit a draft in place; "
        "multi_message: one message per paragraph",
    )
    draft_update_interval_ms: int = Field(
        default=1500, ge=50, description="milliseconds between consecutive writes to one room"
    )
    max_edits_per_message: int = Field(
        default=100, ge=1, description="then no more edits; the final text is still delivered"
    )

    _homeserver = field_validator("homeserver")(_check_http_url)

    @field_validator("user_id")
    @classmethod
    def _mxid(cls, value: str) -> str:
        if not _MXID.fullmatch(value) or len(value.encode()) > _MXID_MAX_BYTES:
            raise ValueError('expected a Matrix user id "@name:server", e.g. "@bot:example.org"')
        return value

    @model_validator(mode="after")
    def _credentials(self) -> MatrixChannelConfig:
        if self.access_token is None and self.password is None:
            raise LocatedValueError((("access_token",), "give access_token or password"))
        return self


def _is_snowflake_or_star(entry: str | int) -> bool:
    if isinstance(entry, int):
        return entry > 0
    return entry == "*" or (entry.isascii() and entry.isdigit())


class DiscordChannelConfig(_StreamModeChannel):
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
        return None if value is None else _check_http_url(value)

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


class ConsoleChannelConfig(_ChannelBase):
    """The terminal: reads stdin, writes stdout."""

    kind: Literal["console"]
    stream_drafts: bool = Field(
        default=True, description="true: redraw the answer as it streams; false: print it whole"
    )
    draft_update_interval_ms: int = Field(
        default=100, ge=50, description="milliseconds between redraws"
    )
    allowed_users: list[str | int] = Field(
        default_factory=lambda: list[str | int](["*"]),
        description="the local user is always allowed by default",
    )


ChannelConfig = Annotated[
    TelegramChannelConfig | MatrixChannelConfig | DiscordChannelConfig | ConsoleChannelConfig,
    Field(discriminator="kind"),
]
