"""What the registry knows of the OpenAI-compatible API (architecture §3 "Kinds"): the config
model of a ``kind: openai_api`` channel, its (absent) message limit, and the adapter's import
path. Pydantic and numbers only (:mod:`channels.kind`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from channels.base import ChannelLimits
from channels.kind import UNLIMITED, ChannelKind
from channels.settings import ChannelSettings

__all__ = ["KIND", "MIN_TOKEN_CHARS", "OpenAIApiChannelConfig"]

MIN_TOKEN_CHARS = 16
"""The shortest bearer token accepted, in characters (a guessable token is no access control)."""


class OpenAIApiChannelConfig(ChannelSettings):
    """An OpenAI-compatible API on the ops server (``server.listen``): ``POST
    {path}/chat/completions`` (streamed or blocking) and ``GET {path}/models``, for any OpenAI
    client. Stateless: each request's ``messages`` are the conversation."""

    kind: Literal["openai_api"]
    tokens: list[str] = Field(
        min_length=1,
        description="bearer tokens a client must send (Authorization: Bearer …), "
        "read from the environment: [${API_TOKEN}]",
    )
    path: str = Field(default="/v1", description="where the API is served (the client's base URL)")
    draft_update_interval_ms: int = Field(
        default=50, ge=50, description="milliseconds between consecutive chunks of one answer"
    )
    allowed_users: list[str | int] = Field(
        default_factory=lambda: list[str | int](["*"]),
        description='key ids ("key-" and 12 hex digits of the token\'s SHA-256) allowed; '
        '"*" = every token',
    )
    show_tool_status: bool = Field(
        default=False, description="also stream each tool's status line in the content"
    )

    @field_validator("tokens")
    @classmethod
    def _long_enough(cls, tokens: list[str]) -> list[str]:
        if any(0 < len(token) < MIN_TOKEN_CHARS for token in tokens):
            raise ValueError(f"each token needs at least {MIN_TOKEN_CHARS} characters")
        return tokens

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/") or path.endswith("/") or "//" in path:
            raise ValueError('expected an absolute path without a trailing slash, e.g. "/v1"')
        return path

    def served_prefix(self) -> str:
        return self.path + "/"

    def listen_problem(self, listen: str | None) -> str | None:
        if listen is None:
            return "the API is served on server.listen: set it (e.g. 127.0.0.1:9464)"
        return None


KIND = ChannelKind(
    config=OpenAIApiChannelConfig,
    limits=ChannelLimits(UNLIMITED, "chars"),
    adapter="channels.openai_api.adapter:OpenAIApiChannel",
)
