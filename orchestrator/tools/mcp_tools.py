"""The MCP servers' tools as the model sees them (architecture §5 "MCP"): names, specs, calls.

A tool keeps its own name unless that name clashes — with a built-in tool or with a tool of
another server — or is not ``[a-zA-Z0-9_-]{1,64}``: then it is ``<server>__<tool>``, its
characters outside ``[a-zA-Z0-9_-]`` replaced by ``_`` and cut to 64. Names are recomputed
whenever a server's list changes (``notifications/tools/list_changed``).

A call whose server is gone restarts a stdio server once per turn (``restarted`` holds the
servers a turn restarted) and calls again; every failure is a tool error for the model.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from config.tools import McpServerConfig, valid_tool_name
from orchestrator.tools.mcp_shapes import (
    McpSdkMissing,
    McpTool,
    McpToolError,
    McpUnavailable,
    mcp_sdk_missing,
)
from providers.base import ToolSpec

if TYPE_CHECKING:
    from orchestrator.tools.mcp_client import McpConnection

__all__ = ["McpServers", "qualified_name"]

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def qualified_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` in ``[a-zA-Z0-9_-]``, at most 64 characters."""
    return _UNSAFE.sub("_", f"{server}__{tool}")[:64]


class McpServers:
    """The connections of ``agent.mcp_servers``.

    Args:
        configs: the ``agent.mcp_servers`` section.
        reserved: the built-in tools' names (an MCP tool of such a name is qualified).

    Raises:
        McpSdkMissing: the ``mcp`` SDK cannot be imported (a broken installation).
    """

    def __init__(self, configs: Mapping[str, McpServerConfig], reserved: Collection[str]) -> None:
        # the mcp SDK, loaded only for a bot that has MCP servers (orchestrator/tools/mcp_shapes.py)
        try:
            from orchestrator.tools.mcp_client import McpConnection
        except Exception as exc:  # check-config and run report it first, at the file's line
            raise McpSdkMissing(mcp_sdk_missing() or str(exc)) from exc

        self._reserved = frozenset(reserved)
        self.connections: dict[str, McpConnection] = {
            name: McpConnection(name, config, on_tools_changed=self._rename)
            for name, config in configs.items()
        }
        self._offered: dict[str, McpTool] = {}

    async def start(self, tg: TaskGroup) -> None:
        """Start every server at once in ``tg``; returns when each has listed its tools or
        failed (logged)."""
        async with anyio.create_task_group() as starting:
            for connection in self.connections.values():
                starting.start_soon(connection.start, tg)
        self._rename()

    async def aclose(self) -> None:
        async with anyio.create_task_group() as closing:
            for connection in self.connections.values():
                closing.start_soon(connection.aclose)

    @property
    def offered(self) -> Mapping[str, McpTool]:
        """Every tool offered, by the name the model calls it."""
        return self._offered

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(
            ToolSpec(name=name, description=tool.description, parameters=_schema(tool))
            for name, tool in self._offered.items()
        )

    def _rename(self) -> None:
        tools = [tool for c in self.connections.values() for tool in c.tools]
        counts = Counter(tool.name for tool in tools)
        offered: dict[str, McpTool] = {}
        for tool in tools:
            name = tool.name
            if counts[name] > 1 or name in self._reserved or not valid_tool_name(name):
                name = qualified_name(tool.server, tool.name)
            if name in offered or name in self._reserved:
                log.warning("MCP server %s: %s not offered: name taken", tool.server, tool.name)
                continue
            offered[name] = tool
        self._offered = offered

    async def call(
        self, name: str, arguments: dict[str, Any], timeout_secs: float, restarted: set[str]
    ) -> str:
        """Call the tool offered as ``name``.

        Raises:
            KeyError: no such tool.
            McpToolError: the server refused the call, or is unavailable.
            TimeoutError: no answer within ``timeout_secs``.
        """
        tool = self._offered[name]
        connection = self.connections[tool.server]
        generation = connection.generation
        try:
            return await connection.call(tool.name, arguments, timeout_secs)
        except McpUnavailable as exc:
            if not connection.stdio or tool.server in restarted:
                raise McpToolError(str(exc)) from exc
        restarted.add(tool.server)
        await connection.restart(generation)
        try:
            return await connection.call(tool.name, arguments, timeout_secs)
        except McpUnavailable as exc:
            raise McpToolError(f"{exc} (restarted once already in this turn)") from exc


def _schema(tool: McpTool) -> dict[str, Any]:
    """The tool's input schema; an object schema when the server sent none."""
    schema = dict(tool.parameters)
    schema.setdefault("type", "object")
    return schema
