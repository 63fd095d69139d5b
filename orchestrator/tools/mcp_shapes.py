"""What the MCP client and the tool registry share, without the ``mcp`` SDK: the failures of a
call and a listed tool's shape. The SDK (~0.35 s of imports) is loaded only when
``agent.mcp_servers`` names a server (:class:`~orchestrator.tools.mcp_tools.McpServers`
imports :mod:`orchestrator.tools.mcp_client` then), so a bot without MCP servers starts
without it (architecture §5 "MCP")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["McpTool", "McpToolError", "McpUnavailable"]


class McpUnavailable(Exception):
    """The server's session is gone (or never came up): the call did not reach it."""


class McpToolError(Exception):
    """The server answered the call with a JSON-RPC error (unknown tool, bad arguments)."""


@dataclass(frozen=True, slots=True)
class McpTool:
    """A tool a server lists: its own ``name``, ``description`` and JSON Schema."""

    server: str
    name: str
    description: str
    parameters: dict[str, Any]
