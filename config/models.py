"""Pydantic models of the YAML config file (architecture §6). Unknown keys are errors everywhere.

Secrets are :class:`~pydantic.SecretStr` (``api_key``, ``token``, ``access_token``,
``secret_token``): call ``.get_secret_value()`` where the value is used. Durations carry their
unit in the key (``_ms``, ``_secs``). Error messages raised here never quote the input value.
Load files through :func:`config.loader.load_config`, which adds line numbers to every error.
Class docstrings and ``description``s end up in the JSON Schema (``relaybot schema``): they speak
to the person writing the file. Sections: providers and agent architecture §2/§5, policy §4,
channels §3, storage and server §7.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from config.errors import LocatedValueError
from config.storage import StorageConfig

__all__ = [
    "AgentConfig",
    "ChannelConfig",
    "ConsoleChannelConfig",
    "DiscordChannelConfig",
    "GuardrailConfig",
    "MatrixChannelConfig",
    "PolicyConfig",
    "ProviderConfig",
    "RelaybotConfig",
    "SecretPatternConfig",
    "ServerConfig",
    "StorageConfig",
    "TelegramChannelConfig",
    "WebhookConfig",
    "unknown_provider_message",
    "unknown_providers",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


ProviderKind = Literal["openai_chat", "openai_responses", "anthropic", "ollama"]
StreamMode = Literal["off", "partial", "multi_message"]

_DEFAULT_BASE_URLS: dict[str, str] = {
    "openai_chat": "https://api.openai.com/v1",
    "openai_responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "ollama": "http://127.0.0.1:11434",
}


def _check_http_url(value: str) -> str:
    """Accept an absolute ``http://`` or ``https://`` URL with a host."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError("expected an http:// or https:// URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an http:// or https:// URL")
    return value


_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def _check_proxy_url(value: str | None) -> str | None:
    """Accept ``http://``, ``https://``, ``socks5://`` or ``socks5h://`` URLs with a host."""
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in _PROXY_SCHEMES or not parts.hostname:
        raise ValueError("expected a proxy URL: http://, https://, socks5:// or socks5h://")
    return value


_MXID = re.compile(r"@[\x21-\x39\x3b-\x7e]+:(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
"""A Matrix user id (Matrix spec, Appendices, "User Identifiers" and "Server Name"): ``@``, a
localpart of printable ASCII without ``:`` (historical ids included), ``:``, a server name
(DNS name, IPv4 or bracketed IPv6, optional port); at most 255 bytes."""
_MXID_MAX_BYTES = 255


def _check_listen(value: str | None) -> str | None:
    """Accept ``HOST:PORT`` (``[::1]:9464`` for IPv6), port 0–65535."""
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:9464")
    return value


class ProviderConfig(_Strict):
    """One model API. Durations are in seconds."""

    kind: ProviderKind = Field(description="wire format of the API")
    base_url: str | None = Field(
        default=None,
        description="API root as the vendor SDK spells it; default per kind: "
        "https://api.openai.com/v1 (openai_*), https://api.anthropic.com (anthropic; "
        "a value ending in /v1 is accepted too), http://127.0.0.1:11434 (ollama)",
    )
    api_key: SecretStr | None = Field(
        default=None, description="required except for ollama; write it as ${VAR}"
    )
    model: str = Field(description="model name sent to the API")
    timeout_secs: float = Field(
        default=120,
        gt=0,
        description="seconds; bounds response headers, error bodies and a whole blocking call",
    )
    stream_idle_timeout_secs: float | None = Field(
        default=None,
        gt=0,
        description="seconds without a received byte before a stream is abandoned; "
        "default 300 (anthropic 90), or timeout_secs when that is larger",
    )
    max_retries: int = Field(
        default=2, ge=0, le=10, description="retries of a round that failed before any text"
    )
    reasoning_effort: Literal["low", "medium", "high"] | None = Field(
        default=None, description="where the model supports it"
    )
    max_tokens: int | None = Field(default=None, gt=0, description="output token limit")
    max_connections: int = Field(
        default=1000, ge=1, description="connection pool size: replies streamed at once"
    )
    vision: bool = Field(
        default=True,
        description="the model reads images; false: images are left out of requests and the "
        "user is told in one line that images are not supported",
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL")
        return value

    @property
    def resolved_base_url(self) -> str:
        return (self.base_url or _DEFAULT_BASE_URLS[self.kind]).rstrip("/")

    @property
    def idle_timeout_secs(self) -> float:
        """The byte-idle bound (architecture §2): 300 s (Anthropic 90 s), raised by a larger
        ``timeout_secs`` when not set explicitly."""
        if self.stream_idle_timeout_secs is not None:
            return self.stream_idle_timeout_secs
        default = 90.0 if self.kind == "anthropic" else 300.0
        return max(default, self.timeout_secs)

    @model_validator(mode="after")
    def _key_required(self) -> ProviderConfig:
        if self.kind != "ollama" and self.api_key is None:
            raise LocatedValueError(
                (("api_key",), f"missing required key (needed for kind {self.kind})")
            )
        return self


class AgentConfig(_Strict):
    """What answers: the provider fallback chain, the prompt and the tools."""

    providers: list[str] = Field(
        min_length=1, description="names from `providers`: the fallback chain, in order"
    )
    system_prompt: str = "You are a helpful assistant."
    max_tool_rounds: int = Field(
        default=8, ge=0, le=64, description="rounds with tools before a final summary call"
    )
    tools: list[str] = Field(
        default_factory=lambda: ["current_time"], description="names of built-in tools"
    )
    require_approval: list[str] = Field(
        default_factory=list, description="tools the user is asked to approve before each run"
    )
    stale_after_secs: float = Field(
        default=600,
        gt=0,
        description="a message kept waiting over a restart for longer than this gets a short "
        "notice instead of an answer",
    )
    approval_timeout_secs: float = Field(
        default=120,
        gt=0,
        description="seconds an approval prompt waits for the user's answer; then not approved",
    )
    max_image_bytes: int = Field(
        default=10485760,
        gt=0,
        description="bytes; an image above this is refused with a one-line message, not sent",
    )

    @model_validator(mode="after")
    def _approval_names_offered_tools(self) -> AgentConfig:
        # A misspelt name here would silently turn the safety setting off.
        for index, name in enumerate(self.require_approval):
            if name not in self.tools:
                raise LocatedValueError((("require_approval", index), "not one of agent.tools"))
        return self


class SecretPatternConfig(_Strict):
    """An extra secret shape for the redactor, replaced by [REDACTED:<name>]."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="shown in the marker")
    regex: str = Field(description="Python regular expression matching the whole secret")
    keywords: list[str] = Field(
        default_factory=list,
        description="literals every match holds; a hint only (every pattern is searched)",
    )

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str, info: ValidationInfo) -> str:
        name = info.data.get("name")
        label = f"pattern {name!r}" if isinstance(name, str) else "pattern"
        try:
            compiled = re.compile(value)
        except re.error as exc:
            # exc.msg and exc.pos only: str(exc) may quote the pattern.
            where = f" at position {exc.pos}" if exc.pos is not None else ""
            raise ValueError(f"{label} does not compile: {exc.msg}{where}") from None
        if compiled.fullmatch("") is not None:
            raise ValueError(f"{label} matches the empty string")
        return value


class GuardrailConfig(_Strict):
    """A screen over the complete text of a model round."""

    kind: Literal["term_list"]
    terms: list[str] = Field(min_length=1, description="case-insensitive terms")
    action: Literal["deny", "redact"] = Field(
        default="deny", description="deny: replace the answer by a refusal; redact: mask terms"
    )
    holds_stream: bool = Field(
        default=True, description="hold the round's text until it is screened"
    )


_HOOK_PATTERN = re.compile(r"^[\w.]+:\w+$")


class PolicyConfig(_Strict):
    """What every text sent to a chat crosses: hook, secret shapes, guardrails."""

    on_message_sending: str | None = Field(
        default=None,
        description='hook "package.module:function"(channel, chat_id, text) -> str | None',
        json_schema_extra={"pattern": _HOOK_PATTERN.pattern},
    )
    hook_timeout_secs: float = Field(
        default=5.0,
        gt=0,
        description="seconds one call of on_message_sending may take; then the piece is withheld",
    )
    extra_secret_patterns: list[SecretPatternConfig] = Field(default_factory=list)
    guardrails: list[GuardrailConfig] = Field(default_factory=list)

    @field_validator("on_message_sending")
    @classmethod
    def _import_path(cls, value: str | None) -> str | None:
        if value is not None and not _HOOK_PATTERN.fullmatch(value):
            raise ValueError('expected an import path "package.module:function"')
        return value


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
        default=False, description="multi_message: also send each tool status as a message"
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


class ServerConfig(_Strict):
    """The metrics endpoint: GET /healthz, GET /metrics."""

    listen: str | None = Field(default="127.0.0.1:9464", description="HOST:PORT; null disables")

    _listen = field_validator("listen")(_check_listen)


def unknown_providers(configured: Collection[str], chain: Sequence[object]) -> list[int]:
    """Indexes of the entries of ``agent.providers`` that name no configured provider."""
    return [i for i, name in enumerate(chain) if isinstance(name, str) and name not in configured]


def unknown_provider_message(name: str | None, configured: Collection[str]) -> str:
    """``unknown provider 'x' (configured: a, b)``; ``name=None`` leaves the name out (a value
    read from the environment is never shown)."""
    known = ", ".join(sorted(configured)) or "none"
    shown = f" {name!r}" if name is not None else ""
    return f"unknown provider{shown} (configured: {known})"


class RelaybotConfig(_Strict):
    """The relaybot config file."""

    providers: dict[str, ProviderConfig] = Field(
        default_factory=dict, description="model APIs by name"
    )
    agent: AgentConfig
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    channels: dict[str, ChannelConfig] = Field(min_length=1, description="chat networks by name")
    storage: StorageConfig = Field(default_factory=StorageConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)

    @model_validator(mode="after")
    def _known_providers(self) -> RelaybotConfig:
        chain = self.agent.providers
        missing = unknown_providers(self.providers, chain)
        if missing:
            raise LocatedValueError(
                *(
                    (("agent", "providers", i), unknown_provider_message(chain[i], self.providers))
                    for i in missing
                )
            )
        return self
