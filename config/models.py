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
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from channels.registry import ChannelConfig
from config.controls import LimitsConfig, ModelAlias, Prices
from config.errors import LocatedValueError
from config.fields import Strict as _Strict
from config.fields import check_listen as _check_listen
from config.storage import StorageConfig
from config.tools import ApprovalNames, McpServers

__all__ = [
    "AgentConfig",
    "ChannelConfig",
    "GuardrailConfig",
    "HistoryConfig",
    "PolicyConfig",
    "ProviderConfig",
    "RelaybotConfig",
    "SecretPatternConfig",
    "ServerConfig",
    "SpeechConfig",
    "StorageConfig",
    "unknown_provider_message",
    "unknown_providers",
]


ProviderKind = Literal["openai_chat", "openai_responses", "anthropic", "ollama"]

_HEADER_SAFE = re.compile(r"[!-~]*")
"""What a key may hold: visible ASCII, as an HTTP header value carries it (RFC 9110 §5.5)."""

_DEFAULT_BASE_URLS: dict[str, str] = {
    "openai_chat": "https://api.openai.com/v1",
    "openai_responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "ollama": "http://127.0.0.1:11434",
}


class ProviderConfig(_Strict):
    """One model API. Durations are in seconds."""

    kind: ProviderKind = Field(description="wire format of the API")
    base_url: str | None = Field(
        default=None,
        description="API root as the vendor SDK spells it; default per kind: "
        "https://api.openai.com/v1 (openai_*), https://api.anthropic.com (anthropic; "
        "a value ending in /v1 is accepted too), http://127.0.0.1:11434 (ollama); "
        "no user:password@, ?query or #fragment",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="required except for ollama; write it as ${VAR}; not empty, visible ASCII",
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
    context_window: int | None = Field(
        default=None,
        ge=1024,
        description="tokens the model reads at most (prompt and answer); null: from a table "
        "of known models, else 8192",
    )
    max_connections: int = Field(
        default=1000, ge=1, description="connection pool size: replies streamed at once"
    )
    proxy: Literal["environment", "none"] = Field(
        default="environment",
        description="environment: through HTTPS_PROXY / HTTP_PROXY / ALL_PROXY (not for NO_PROXY "
        "hosts), as the vendor SDKs go; none: straight to the base URL",
    )
    prices: Prices | None = Field(
        default=None,
        description="per million input, cached-input and output tokens: turns usage into cost",
    )
    vision: bool = Field(
        default=True,
        description="the model reads images; false: images are left out of requests and the "
        "user is told in one line that images are not supported",
    )
    documents: bool = Field(
        default=True,
        description="the model reads PDF files in the API's own form (OpenAI file inputs, "
        "Anthropic document blocks); false: their text is extracted and sent instead (always "
        "so for ollama)",
    )

    # Which environment variable each field was read from (``{"model": "OPENAI_MODEL"}``):
    # the ``${NAME}`` of the file, or the variable the embedded default reads. Set by the
    # loader; hints name a variable only when the value came from it (failure causes).
    _variables: dict[str, str] = PrivateAttr(default_factory=dict)

    def variable_of(self, field: str) -> str | None:
        """The environment variable ``field`` was read from; None: from the file, or default."""
        return self._variables.get(field)

    def read_from(self, variables: dict[str, str]) -> None:
        """Record the environment variables the fields of ``variables`` were read from."""
        self._variables.update(variables)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.lower().startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL")
        if value != value.strip() or any(c.isspace() for c in value):
            raise ValueError("the URL holds a space or a line break: write it without")
        parts = urlsplit(value)
        if "@" in parts.netloc:
            raise ValueError(
                "a user or password in the URL is not sent: put the key in api_key and write "
                "the URL without user:password@"
            )
        if parts.query or parts.fragment or value.rstrip("/").endswith(("?", "#")):
            raise ValueError(
                "the API root takes no ?query or #fragment: each endpoint's path is added to it"
            )
        try:
            parts.port  # noqa: B018 - raises for a port that is not a number 0-65535
        except ValueError:
            raise ValueError("the port is not a number from 0 to 65535") from None
        if not parts.hostname:
            raise ValueError("the URL names no host")
        return value

    @field_validator("api_key")
    @classmethod
    def _header_safe(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _HEADER_SAFE.fullmatch(value.get_secret_value()):
            raise ValueError(
                "the key holds a character an HTTP header cannot carry (a space, a line break, "
                "or a non-ASCII character such as a typographic quote): copy the key again"
            )
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
        if self.kind != "ollama" and self.api_key is not None and not self.api_key:
            raise LocatedValueError(
                (("api_key",), f"the key is empty (needed for kind {self.kind}): set it")
            )
        return self


class HistoryConfig(_Strict):
    """How a conversation's history is fitted into the model's context window."""

    compaction: Literal["drop", "summarize"] = Field(
        default="drop",
        description="drop: turns that no longer fit are left out; summarize: they are replaced "
        "by a summary the model writes, kept in the store",
    )


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
    require_approval: ApprovalNames = Field(
        default_factory=list,
        description='tools the user is asked to approve before each run, or "*" for all; '
        "names of MCP tools are checked when the bot starts",
    )
    tool_timeout_secs: float = Field(
        default=60, gt=0, description="seconds one tool call may take, built-in or MCP"
    )
    mcp_servers: McpServers = Field(
        default_factory=dict,
        description="MCP servers whose tools are offered: {name: {command: [...], env: {}}} "
        "(stdio) or {name: {url: ..., headers: {}}} (streamable HTTP)",
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
    max_document_bytes: int = Field(
        default=10485760,
        gt=0,
        description="bytes; a document (PDF or text file) above this is refused with a "
        "one-line message, not sent",
    )
    max_document_pages: int = Field(
        default=100, gt=0, description="pages; a PDF with more is refused with a one-line message"
    )
    max_audio_bytes: int = Field(
        default=20971520,
        gt=0,
        description="bytes; a voice note or audio file above this is refused with one line, "
        "not transcribed",
    )
    max_audio_seconds: float = Field(
        default=600,
        gt=0,
        description="seconds; a longer voice note or audio file is refused with one line, "
        "not transcribed",
    )
    max_tool_result_chars: int = Field(
        default=20000,
        ge=100,
        description="characters of one tool result sent to the model; a longer one is cut "
        "with a note saying so",
    )
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    models: dict[str, ModelAlias] = Field(
        default_factory=dict,
        description="models a chat may switch to with /model NAME: {name: {provider, model}}",
    )
    rerun_edited: bool = Field(
        default=False,
        description="editing the last question runs it again into the same answer message",
    )

    @model_validator(mode="after")
    def _approval_names_offered_tools(self) -> AgentConfig:
        # A misspelt name here would silently turn the safety setting off. MCP tools are only
        # known once their servers answered: those names are checked at start.
        if self.require_approval == "*" or self.mcp_servers:
            return self
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
    hook_workers: int = Field(
        default=2,
        ge=1,
        le=64,
        description="processes running on_message_sending; pieces of that many chats at once",
    )
    extra_secret_patterns: list[SecretPatternConfig] = Field(default_factory=list)
    guardrails: list[GuardrailConfig] = Field(default_factory=list)

    @field_validator("on_message_sending")
    @classmethod
    def _import_path(cls, value: str | None) -> str | None:
        if value is not None and not _HOOK_PATTERN.fullmatch(value):
            raise ValueError('expected an import path "package.module:function"')
        return value


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


class SpeechConfig(_Strict):
    """Speech to text for voice notes, and optionally text to speech for answers, through an
    OpenAI-compatible server (``POST /audio/transcriptions``, ``POST /audio/speech``)."""

    provider: str = Field(
        description="name from `providers` whose base_url and api_key are used: an openai_chat "
        "or openai_responses provider (OpenAI, or any compatible server such as a local "
        "faster-whisper or whisper.cpp server)"
    )
    model: str = Field(default="whisper-1", description="the transcription model")
    reply: Literal["never", "voice_notes_only", "always"] = Field(
        default="never",
        description="also send the answer as a voice note: never, only to voice notes, or "
        "always; the text is always sent",
    )
    tts_model: str = Field(default="tts-1", description="the speech model of voice replies")
    voice: str = Field(default="alloy", description="the voice of voice replies")
    timeout_secs: float = Field(
        default=120, gt=0, description="seconds one transcription or speech request may take"
    )


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
    limits: LimitsConfig = Field(
        default_factory=LimitsConfig, description="budgets and rate limits per user and chat"
    )
    speech: SpeechConfig | None = Field(
        default=None,
        description="voice notes transcribed (and answers spoken) through an OpenAI-compatible "
        "server; null: voice notes are answered with one line saying so",
    )

    @model_validator(mode="after")
    def _speech_provider(self) -> RelaybotConfig:
        if self.speech is None:
            return self
        provider = self.providers.get(self.speech.provider)
        if provider is None:
            message = unknown_provider_message(self.speech.provider, self.providers)
            raise LocatedValueError((("speech", "provider"), message))
        if provider.kind not in ("openai_chat", "openai_responses"):
            raise LocatedValueError(
                (
                    ("speech", "provider"),
                    f"provider {self.speech.provider!r} is {provider.kind}; speech needs an "
                    "OpenAI-compatible one (openai_chat or openai_responses)",
                )
            )
        return self

    @model_validator(mode="after")
    def _known_providers(self) -> RelaybotConfig:
        chain = self.agent.providers
        missing = unknown_providers(self.providers, chain)
        problems: list[tuple[tuple[str | int, ...], str]] = [
            (("agent", "providers", i), unknown_provider_message(chain[i], self.providers))
            for i in missing
        ]
        for alias, entry in self.agent.models.items():
            if entry.provider not in self.providers:
                message = unknown_provider_message(entry.provider, self.providers)
                problems.append((("agent", "models", alias, "provider"), message))
        if problems:
            raise LocatedValueError(*problems)
        return self

    @model_validator(mode="after")
    def _served_channels(self) -> RelaybotConfig:
        """A channel served over HTTP (``kind: web``, ``kind: openai_api``) needs
        ``server.listen``, one without access control a loopback address, and a path of its
        own."""
        problems: list[tuple[tuple[str | int, ...], str]] = [
            (("channels", name), problem)
            for name, channel in self.channels.items()
            if (problem := channel.listen_problem(self.server.listen)) is not None
        ]
        served: dict[str, str] = {}
        for name, channel in self.channels.items():
            prefix = channel.served_prefix()
            if prefix is None:
                continue
            if prefix in served:
                problem = (
                    f"channel {served[prefix]!r} is already served at {prefix}: give one of "
                    "them another path"
                )
                problems.append((("channels", name, "path"), problem))
            served.setdefault(prefix, name)
        if problems:
            raise LocatedValueError(*problems)
        return self
