"""Pydantic models of the YAML config file (DESIGN §6). Unknown keys are errors everywhere."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

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
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


ProviderKind = Literal["openai_chat", "openai_responses", "anthropic", "ollama"]
StreamMode = Literal["off", "partial", "multi_message"]

_DEFAULT_BASE_URLS: dict[str, str] = {
    "openai_chat": "https://api.openai.com/v1",
    "openai_responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "ollama": "http://127.0.0.1:11434",
}


class ProviderConfig(_Strict):
    """One model API. Durations are in seconds."""

    kind: ProviderKind
    base_url: str | None = Field(default=None, description="API root; default per kind")
    api_key: SecretStr | None = Field(default=None, description="optional for ollama")
    model: str
    timeout_secs: float = Field(default=120, gt=0)
    stream_idle_timeout_secs: float | None = Field(default=None, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    max_tokens: int | None = Field(default=None, gt=0)

    @property
    def resolved_base_url(self) -> str:
        return (self.base_url or _DEFAULT_BASE_URLS[self.kind]).rstrip("/")

    @property
    def idle_timeout_secs(self) -> float:
        """The byte-idle bound (DESIGN §2): 300 s (Anthropic 90 s), raised by a larger
        ``timeout_secs`` when not set explicitly."""
        if self.stream_idle_timeout_secs is not None:
            return self.stream_idle_timeout_secs
        default = 90.0 if self.kind == "anthropic" else 300.0
        return max(default, self.timeout_secs)

    @model_validator(mode="after")
    def _key_required(self) -> ProviderConfig:
        if self.kind != "ollama" and self.api_key is None:
            raise ValueError(f"api_key is required for kind {self.kind}")
        return self


class AgentConfig(_Strict):
    providers: list[str] = Field(min_length=1, description="fallback chain, in order")
    system_prompt: str = "You are a helpful assistant."
    max_tool_rounds: int = Field(default=8, ge=0, le=64)
    tools: list[str] = Field(default_factory=lambda: ["current_time"])
    require_approval: list[str] = Field(default_factory=list, description="tools asked first")


class SecretPatternConfig(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    regex: str
    keywords: list[str] = Field(default_factory=list)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        import re

        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regex: {exc}") from exc
        return value


class GuardrailConfig(_Strict):
    kind: Literal["term_list"]
    terms: list[str] = Field(min_length=1)
    action: Literal["deny", "redact"] = "deny"
    holds_stream: bool = True


class PolicyConfig(_Strict):
    on_message_sending: str | None = Field(
        default=None, pattern=r"^[\w.]+:[\w]+$", description='"package.module:function"'
    )
    extra_secret_patterns: list[SecretPatternConfig] = Field(default_factory=list)
    guardrails: list[GuardrailConfig] = Field(default_factory=list)


class _ChannelBase(_Strict):
    draft_update_interval_ms: int = Field(default=1000, ge=50)
    allowed_users: list[str | int] = Field(default_factory=list)
    respond_in_groups: Literal["mention", "all"] = "mention"
    show_reasoning: bool = False
    show_tool_status: bool = False


class _StreamModeChannel(_ChannelBase):
    stream_mode: StreamMode = "partial"
    multi_message_delay_ms: int = Field(default=800, ge=0)


class WebhookConfig(_Strict):
    url: str
    listen: str = "127.0.0.1:8443"
    secret_token: SecretStr | None = None


class TelegramChannelConfig(_StreamModeChannel):
    kind: Literal["telegram"]
    token: SecretStr
    base_url: str = "https://api.telegram.org/bot"
    webhook: WebhookConfig | None = None


class MatrixChannelConfig(_StreamModeChannel):
    kind: Literal["matrix"]
    homeserver: str
    user_id: str
    access_token: SecretStr
    device_id: str | None = None
    stream_mode: StreamMode = "multi_message"
    draft_update_interval_ms: int = Field(default=1500, ge=50)
    max_edits_per_message: int = Field(default=100, ge=1)


class DiscordChannelConfig(_StreamModeChannel):
    kind: Literal["discord"]
    token: SecretStr
    api_base_url: str | None = None
    gateway_url: str | None = None


class ConsoleChannelConfig(_ChannelBase):
    kind: Literal["console"]
    stream_drafts: bool = True
    draft_update_interval_ms: int = Field(default=100, ge=50)
    allowed_users: list[str | int] = Field(default_factory=lambda: ["*"])


ChannelConfig = Annotated[
    TelegramChannelConfig | MatrixChannelConfig | DiscordChannelConfig | ConsoleChannelConfig,
    Field(discriminator="kind"),
]


class StorageConfig(_Strict):
    path: str = "relaybot.db"


class ServerConfig(_Strict):
    listen: str | None = "127.0.0.1:9464"


class RelaybotConfig(_Strict):
    """The whole file."""

    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    agent: AgentConfig
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    channels: dict[str, ChannelConfig] = Field(min_length=1)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)

    @model_validator(mode="after")
    def _known_providers(self) -> RelaybotConfig:
        for index, name in enumerate(self.agent.providers):
            if name not in self.providers:
                known = ", ".join(sorted(self.providers)) or "none"
                raise _LocatedError(
                    ("agent", "providers", index),
                    f"unknown provider {name!r} (configured: {known})",
                )
        return self


class _LocatedError(ValueError):
    """A cross-field error that knows the key path it belongs to (the loader reports it there)."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
