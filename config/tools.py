"""Config models of the tool section of ``agent`` (architecture §5, §6): MCP servers and the
approval list.

An MCP server is reached over stdio (``command`` and its ``env``) or over streamable HTTP
(``url`` and its ``headers``); the two shapes are told apart by their keys. Header values and
``env`` values usually come from the environment (``${VAR}``) and are secrets: they are
:class:`~pydantic.SecretStr` and never printed. Error messages never quote the input value.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Discriminator, Field, SecretStr, Tag, field_validator

__all__ = [
    "SERVER_NAME_PATTERN",
    "ApprovalNames",
    "McpHttpServerConfig",
    "McpServerConfig",
    "McpServers",
    "McpStdioServerConfig",
]

SERVER_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,32}$"
"""An MCP server's name: it may prefix its tools' names (``server__tool``), which every
provider accepts only in ``[a-zA-Z0-9_-]``."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpStdioServerConfig(_Strict):
    """An MCP server started as a child process, spoken to over its stdin and stdout."""

    command: list[str] = Field(
        min_length=1, description="the program and its arguments, e.g. [npx, -y, some-server]"
    )
    env: dict[str, SecretStr] = Field(
        default_factory=dict, description="extra environment variables of the process"
    )
    cwd: str | None = Field(default=None, description="working directory of the process")

    @field_validator("command")
    @classmethod
    def _program_named(cls, value: list[str]) -> list[str]:
        if not value[0].strip():
            raise ValueError("the program (the first item) is empty")
        return value


class McpHttpServerConfig(_Strict):
    """An MCP server reached over streamable HTTP."""

    url: str = Field(description="the server's MCP endpoint, http:// or https://")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="extra request headers, e.g. Authorization: ${MCP_TOKEN}",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL")
        return value


def _transport(value: object) -> str:
    if isinstance(value, BaseModel):
        return "http" if isinstance(value, McpHttpServerConfig) else "stdio"
    return "http" if isinstance(value, dict) and "url" in value else "stdio"


McpServerConfig = Annotated[
    Annotated[McpStdioServerConfig, Tag("stdio")] | Annotated[McpHttpServerConfig, Tag("http")],
    Discriminator(_transport),
]
"""One ``agent.mcp_servers`` entry: ``{command: [...], env: {}}`` or ``{url: ..., headers: {}}``."""

McpServers = dict[
    Annotated[str, Field(pattern=SERVER_NAME_PATTERN)],
    McpServerConfig,
]

ApprovalNames = list[str] | Literal["*"]
"""``agent.require_approval``: tool names, or ``"*"`` for every tool."""


def requires_approval(names: ApprovalNames, tool: str) -> bool:
    """Whether a call of ``tool`` (its offered name) waits for the user's approval."""
    return names == "*" or tool in names


_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def valid_tool_name(name: str) -> bool:
    """A name every provider accepts for a tool: ``[a-zA-Z0-9_-]``, at most 64 characters."""
    return bool(_TOOL_NAME.match(name))
