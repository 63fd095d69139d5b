"""What the registry knows of Slack (architecture §3 "Kinds"): the config model of a
``kind: slack`` channel, its message limit, and the adapter's import path. Pydantic and
numbers only (:mod:`channels.kind`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from channels.base import ChannelLimits
from channels.kind import ChannelKind
from channels.settings import StreamModeSettings
from config.errors import LocatedValueError
from config.fields import check_http_url, check_listen

__all__ = ["KIND", "SLACK_MAX_STREAM_TEXT", "SLACK_MAX_TEXT_LENGTH", "SlackChannelConfig"]

SLACK_MAX_TEXT_LENGTH = 40_000
"""Maximum ``text`` of one Slack message, in characters. Source: Slack API, chat.postMessage
("truncating the text of a message to 40,000 characters"; longer is ``msg_too_long``)."""

SLACK_MAX_STREAM_TEXT = 12_000
"""Maximum ``markdown_text`` of one chat.startStream / appendStream / stopStream call, in
characters. Source: Slack API, chat.appendStream ("Limit this field to 12,000 characters")."""

SLACK_API_URL = "https://slack.com/api/"


class SlackChannelConfig(StreamModeSettings):
    """A Slack app (slack_sdk): Socket Mode with an app token (the default: no public URL), or
    the Events API over HTTP with a signing secret."""

    kind: Literal["slack"]
    bot_token: SecretStr = Field(description="bot token, xoxb-… (OAuth & Permissions)")
    app_token: SecretStr | None = Field(
        default=None,
        description="app-level token, xapp-… with connections:write (Basic Information, "
        "App-Level Tokens): Socket Mode; null = the Events API over HTTP (signing_secret)",
    )
    signing_secret: SecretStr | None = Field(
        default=None,
        description="signing secret (Basic Information, App Credentials): receive the Events "
        "API, interactivity and slash commands over HTTP at events_listen instead of Socket Mode",
    )
    events_listen: str | None = Field(
        default=None,
        description="local HOST:PORT serving /slack/events with signing_secret (put a TLS "
        "proxy with the public Request URL in front of it)",
    )
    api_base_url: str | None = Field(
        default=None, description=f"Web API root, e.g. a proxy's (default {SLACK_API_URL})"
    )
    native_streaming: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="partial: stream the answer with chat.startStream/appendStream/stopStream; "
        "auto: fall back to chat.update edits where the workspace refuses streaming; off: edits",
    )
    thinking_status: str = Field(
        default="is thinking…",
        description="assistant.threads.setStatus while the model works ('' = none)",
    )
    allowed_users: list[str | int] = Field(
        default_factory=list,
        description='Slack user ids (U…, W…) allowed to talk to the bot; "*" = everyone; '
        "empty = nobody",
    )
    stop_button: bool = Field(
        default=True, description="a Stop button in the thread while an answer is written"
    )

    _listen = field_validator("events_listen")(check_listen)

    @field_validator("api_base_url")
    @classmethod
    def _api_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return check_http_url(value).rstrip("/") + "/"

    @field_validator("allowed_users")
    @classmethod
    def _user_ids(cls, value: list[str | int]) -> list[str | int]:
        # display names can be changed by their owner: only the ids identify a user
        bad = [
            index
            for index, entry in enumerate(value)
            if not (entry == "*" or (isinstance(entry, str) and entry[:1] in ("U", "W")))
        ]
        if bad:
            message = 'expected a Slack user id (U… or W…) or "*"'
            raise LocatedValueError(*(((index,), message) for index in bad))
        return value

    @model_validator(mode="after")
    def _transport(self) -> SlackChannelConfig:
        if (self.app_token is None) == (self.signing_secret is None):
            raise LocatedValueError(
                (("app_token",), "set app_token (Socket Mode) or signing_secret (HTTP), not both")
            )
        if self.signing_secret is not None and self.events_listen is None:
            raise LocatedValueError((("events_listen",), "required with signing_secret"))
        return self


KIND = ChannelKind(
    config=SlackChannelConfig,
    limits=ChannelLimits(SLACK_MAX_TEXT_LENGTH, "chars"),
    adapter="channels.slack.adapter:SlackChannel",
)
