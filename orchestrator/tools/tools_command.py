"""``relaybot tools [--config FILE]`` (architecture §5 "MCP", §7): every tool the bot would
offer the model, as ``relaybot run`` would build them.

The config is the one ``run`` uses (``--config``, else ``$RELAYBOT_CONFIG``, else the embedded
default). The MCP servers of ``agent.mcp_servers`` are started, asked for their tools and
stopped again. One line per tool: the name the model sees, where it comes from (``built-in`` or
``mcp:<server>``), ``approval`` when ``require_approval`` covers it, and its description; then
one line per MCP server that did not start (its command redacted, as the log's lines are: the
servers' failures, with the last lines each wrote on stderr, are logged on stderr). Exit 0; 1
when a server did not start or a name in ``require_approval`` is no tool's (``run`` would refuse
to start); 2 for a bad config file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

import anyio

from config.models import RelaybotConfig
from config.tools import requires_approval
from orchestrator.tools.tool_setup import build_registry, start_tools

__all__ = ["list_tools"]


async def list_tools(
    config: RelaybotConfig, redact: Callable[[str], str], out: TextIO = sys.stdout
) -> int:
    """Print the tools of ``config.agent`` to ``out``, a server's command through ``redact``
    (the log's redaction); the exit code (see the module doc)."""
    agent = config.agent
    registry = build_registry(agent)
    code = 0
    async with anyio.create_task_group() as tg:
        error = await start_tools(agent, registry, tg)
        specs = {spec.name: spec for spec in registry.specs}
        sources = registry.sources()
        width = max((len(name) for name in specs), default=0)
        for name, spec in specs.items():
            approval = "approval" if requires_approval(agent.require_approval, name) else "-"
            summary = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
            out.write(f"{name:<{width}}  {sources[name]:<12}  {approval:<8}  {summary}\n")
        if registry.mcp is not None:
            for server in registry.mcp.connections.values():
                if not server.connected:  # its command may carry a secret: redacted
                    where = redact(server.describe())
                    out.write(f"mcp:{server.name}: did not start ({where})\n")
                    code = 1
            await registry.mcp.aclose()
        tg.cancel_scope.cancel()
    if error is not None:
        print(f"relaybot: {error}", file=sys.stderr)
        code = 1
    out.flush()
    return code
