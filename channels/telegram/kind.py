"""What the registry knows of Telegram (architecture §3 "Kinds"): the config model of a
``kind: telegram`` channel, its message limit, and the adapter's import path. Pydantic and
numbers only (:mod:`channels.kind`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from channels.base import ChannelLimits
from channels.kind import ChannelKind
from channels.settings import StreamModeSettings
from config.fields import Strict, check_listen, check_proxy_url

__all__ = ["KIND", "TELEGRAM_MAX_TEXT_LENGTH", "TelegramChannelConfig", "WebhookConfig"]

TELEGRAM_MAX_TEXT_LENGTH = 4096
"""Maximum text of one Telegram message, in UTF-16 code units, counted after entity parsing.

Source: Bot API ``sendMessage`` ("1-4096 characters after entities parsing"; Telegram counts
UTF-16 code units, as for entity offsets); python-telegram-bot
``telegram.constants.MessageLimit.MAX_TEXT_LENGTH``.
"""


class WebhookConfig(Strict):
    """Receive Telegram updates by webhook instead of long polling."""

    url: str = Field(description="public HTTPS URL Telegram posts updates to")
    listen: str = Field(default="127.0.0.1:8443", description="local HOST:PORT to serve on")
    secret_token: SecretStr | None = Field(
        default=None, description="X-Telegram-Bot-Api-Secret-Token expected on every update"
    )

    _listen = field_validator("listen")(check_listen)


class TelegramChannelConfig(StreamModeSettings):
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

    _proxy = field_validator("proxy")(check_proxy_url)


KIND = ChannelKind(
    config=TelegramChannelConfig,
    limits=ChannelLimits(TELEGRAM_MAX_TEXT_LENGTH, "utf16"),
    adapter="channels.telegram.adapter:TelegramChannel",
)
