"""What the registry knows of the web chat (architecture §3 "Kinds"): the config model of a
``kind: web`` channel, its (absent) message limit, and the adapter's import path. Pydantic and
numbers only (:mod:`channels.kind`)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from channels.base import ChannelLimits
from channels.kind import UNLIMITED, ChannelKind
from channels.settings import ChannelSettings
from channels.web.access import is_loopback_listen

__all__ = ["KIND", "MIN_TOKEN_CHARS", "WebChannelConfig"]

MIN_TOKEN_CHARS = 16
"""The shortest access token accepted, in characters."""


class WebChannelConfig(ChannelSettings):
    """A chat page at ``path`` (default ``/``) of the ops server (``server.listen``), for a
    browser. Access: ``auth: none`` (a loopback ``server.listen`` only), ``tokens`` (the page
    asks for one) or ``trusted_user_header`` (a reverse proxy in front names the user)."""

    kind: Literal["web"]
    auth: Literal["none", "tokens", "trusted_user_header"] = Field(
        default="none",
        description="none: anyone who reaches the page (loopback only); tokens: one of "
        "`tokens`; trusted_user_header: the user the proxy names in that header",
    )
    tokens: list[str] = Field(
        default_factory=list, description="with auth: tokens, the accepted tokens: [${WEB_TOKEN}]"
    )
    trusted_user_header: str | None = Field(
        default=None,
        description="with auth: trusted_user_header, the header the proxy sets (X-Forwarded-User)",
    )
    title: str = Field(default="relaybot", description="the page's title")
    path: str = Field(
        default="/",
        description='where the page is served: "/", or a path such as "/team" (the page is then '
        "at /team/); two web channels need two paths",
    )
    draft_update_interval_ms: int = Field(
        default=100, ge=50, description="milliseconds between updates of a streaming answer"
    )
    allowed_users: list[str | int] = Field(
        default_factory=lambda: list[str | int](["*"]),
        description='users allowed (auth none: "local"; tokens: "key-…" ids; '
        'header: the names the proxy sends); "*" = everyone who passed auth',
    )

    @model_validator(mode="after")
    def _auth_complete(self) -> Self:
        if self.auth == "tokens" and not self.tokens:
            raise ValueError("auth: tokens needs at least one entry in tokens")
        if any(0 < len(token) < MIN_TOKEN_CHARS for token in self.tokens):
            raise ValueError(f"each token needs at least {MIN_TOKEN_CHARS} characters")
        if self.auth == "trusted_user_header" and not self.trusted_user_header:
            raise ValueError("auth: trusted_user_header needs trusted_user_header: HEADER-NAME")
        return self

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if path != "/" and (not path.startswith("/") or path.endswith("/") or "//" in path):
            raise ValueError('expected "/" or an absolute path without a trailing slash: "/team"')
        return path

    def served_prefix(self) -> str:
        return "/" if self.path == "/" else self.path + "/"

    def listen_problem(self, listen: str | None) -> str | None:
        if listen is None:
            return "the page is served on server.listen: set it (e.g. 127.0.0.1:9464)"
        if self.auth == "none" and not is_loopback_listen(listen):
            return (
                "auth: none serves only a loopback server.listen (127.0.0.1, ::1); "
                "set auth: tokens or trusted_user_header"
            )
        return None


KIND = ChannelKind(
    config=WebChannelConfig,
    limits=ChannelLimits(UNLIMITED, "chars"),
    adapter="channels.web.adapter:WebChannel",
)
