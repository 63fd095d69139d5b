"""What the MCP client and the tool registry share, without the ``mcp`` SDK: the failures of a
call, a listed tool's shape, and whether the SDK can be imported at all. The SDK (~0.35 s of
imports) is loaded only when ``agent.mcp_servers`` names a server
(:class:`~orchestrator.tools.mcp_tools.McpServers` imports :mod:`orchestrator.tools.mcp_client`
then), so a bot without MCP servers starts without it (architecture §5 "MCP")."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["McpSdkMissing", "McpTool", "McpToolError", "McpUnavailable", "mcp_sdk_missing"]


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


class McpSdkMissing(Exception):
    """``agent.mcp_servers`` names servers and the ``mcp`` SDK cannot be imported (the message
    says what to do: :func:`mcp_sdk_missing`)."""


def mcp_sdk_missing() -> str | None:
    """What to tell the admin when the MCP client (and with it the ``mcp`` SDK, a dependency of
    relaybot) cannot be imported — missing, or raising anything while it imports: a broken
    installation; ``None`` when it imports. Imports it: call it only for a config that names
    servers."""
    try:
        importlib.import_module("orchestrator.tools.mcp_client")
    except Exception as exc:  # missing, or broken in a way of its own: the same advice
        cause = str(exc) if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}"
        return (
            f"the MCP client cannot be imported ({cause}): relaybot's installation is "
            "incomplete. Install it again from its checkout (pip install ., or pip install -e . "
            "for an editable one: either installs what is missing), or remove agent.mcp_servers "
            "to run without MCP tools"
        )
    return None
