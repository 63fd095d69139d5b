"""Building the agent's tools at start (architecture §5 "MCP"): the registry of the built-ins of
``agent.tools`` and the servers of ``agent.mcp_servers``, started in the daemon's task group,
then ``agent.require_approval`` checked against every tool offered.

MCP tools are unknown to ``check-config`` (their servers are asked only at start), so a name in
``require_approval`` that no tool has is found here: the start fails rather than a misspelt
name silently leaving a tool without approval.
"""

from __future__ import annotations

from anyio.abc import TaskGroup

from config.models import AgentConfig
from orchestrator.tools.mcp_tools import McpServers
from orchestrator.tools.registry import ToolRegistry, builtin_tools

__all__ = ["build_registry", "start_tools", "unknown_approval_names"]


def build_registry(agent: AgentConfig) -> ToolRegistry:
    """The registry of ``agent`` (its MCP servers not started yet). Raises: KeyError naming an
    unknown built-in tool."""
    mcp = McpServers(agent.mcp_servers, builtin_tools()) if agent.mcp_servers else None
    return ToolRegistry.from_names(
        agent.tools,
        mcp=mcp,
        timeout_secs=agent.tool_timeout_secs,
        max_result_chars=agent.max_tool_result_chars,
    )


def unknown_approval_names(agent: AgentConfig, registry: ToolRegistry) -> list[str]:
    """The names of ``require_approval`` that no offered tool has (``"*"`` has none)."""
    if agent.require_approval == "*":
        return []
    return [name for name in agent.require_approval if name not in registry]


async def start_tools(agent: AgentConfig, registry: ToolRegistry, tg: TaskGroup) -> str | None:
    """Start the MCP servers in ``tg`` (each lists its tools; one that fails is logged and
    offers none) and check ``require_approval``; the error to print, or ``None``."""
    if registry.mcp is not None:
        await registry.mcp.start(tg)
    unknown = unknown_approval_names(agent, registry)
    if unknown:
        offered = ", ".join(sorted(registry.sources())) or "none"
        return (
            f"agent.require_approval: no tool named {', '.join(unknown)} "
            f"(the tools offered: {offered})"
        )
    return None
