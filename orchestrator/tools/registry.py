"""The tool registry and the built-in tools (architecture §5).

A tool is an async callable taking the parsed JSON arguments and returning text for the model.
Failures the model can act on (bad arguments, an unknown time zone, an unknown tool, a tool that
raised, failed on its MCP server or took longer than ``tool_timeout_secs``) are returned as tool
errors — a JSON object ``{"error": "..."}`` — never raised into the turn loop. A result longer
than ``agent.max_tool_result_chars`` (default :data:`MAX_RESULT_CHARS`) is cut there, with a
note saying so.

The registry offers the built-in tools of ``agent.tools`` and the tools of
``agent.mcp_servers`` (:class:`~orchestrator.tools.mcp_tools.McpServers`), whose list may
change while the bot runs: :attr:`ToolRegistry.specs` is read afresh for every round.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio

from orchestrator.tools.mcp_shapes import McpToolError
from orchestrator.tools.mcp_tools import McpServers
from providers.base import ToolSpec

__all__ = [
    "MAX_RESULT_CHARS",
    "Tool",
    "ToolRegistry",
    "ToolResult",
    "builtin_tools",
    "current_time",
    "tool_error",
]

MAX_RESULT_CHARS = 20_000
"""The longest tool result given to the model by default, in characters
(``agent.max_tool_result_chars``); a longer one is cut with a note saying so."""

log = logging.getLogger(__name__)

ToolFunction = Callable[[Mapping[str, Any]], Awaitable[str]]


def tool_error(message: str) -> str:
    """The text of a tool error result, readable by the model."""
    return json.dumps({"error": message})


def error_message(result: str) -> str | None:
    """The message of a tool error result (``{"error": "..."}`` and nothing else: ours, or an
    MCP result flagged ``isError``); ``None`` for any other result."""
    if not result.startswith("{"):
        return None
    try:
        parsed = json.loads(result)
    except ValueError:
        return None
    if isinstance(parsed, dict) and len(parsed) == 1 and isinstance(parsed.get("error"), str):
        return str(parsed["error"])
    return None


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One call's outcome: ``text`` for the model; ``cause``: why it failed, in a few words
    for its status line (``None``: it succeeded)."""

    text: str
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class Tool:
    spec: ToolSpec
    run: ToolFunction


async def current_time(arguments: Mapping[str, Any]) -> str:
    """Current date and time in an IANA time zone (``timezone``, default ``"UTC"``)."""
    zone_name = arguments.get("timezone", "UTC")
    if not isinstance(zone_name, str) or not zone_name:
        return tool_error("timezone must be an IANA time zone name such as 'Europe/Paris'")
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        return tool_error(f"unknown time zone {zone_name!r}; use an IANA name like 'Asia/Tokyo'")
    now = datetime.now(zone)
    return json.dumps(
        {
            "timezone": zone_name,
            "iso": now.isoformat(timespec="seconds"),
            "weekday": now.strftime("%A"),
        }
    )


_CURRENT_TIME = Tool(
    ToolSpec(
        name="current_time",
        description="Get the current date and time in a time zone.",
        parameters={
            "type": "object",
            "properties": {
                "timezone": {
                    "type": "string",
                    "description": "IANA time zone name, e.g. 'UTC' or 'Asia/Tokyo'",
                    "default": "UTC",
                }
            },
        },
    ),
    current_time,
)


def builtin_tools() -> dict[str, Tool]:
    return {_CURRENT_TIME.spec.name: _CURRENT_TIME}


class ToolRegistry:
    """The tools offered to the model in this agent, by name.

    Args:
        tools: the built-in tools offered.
        mcp: the MCP servers, whose tools are offered after the built-ins.
        timeout_secs: the bound of one call (``agent.tool_timeout_secs``).
        max_result_chars: the longest result given to the model (``agent.max_tool_result_chars``).
    """

    def __init__(
        self,
        tools: Mapping[str, Tool],
        *,
        mcp: McpServers | None = None,
        timeout_secs: float = 60.0,
        max_result_chars: int = MAX_RESULT_CHARS,
    ) -> None:
        self._tools = dict(tools)
        self.mcp = mcp
        self.timeout_secs = timeout_secs
        self.max_result_chars = max_result_chars

    @classmethod
    def from_names(
        cls,
        names: list[str],
        *,
        mcp: McpServers | None = None,
        timeout_secs: float = 60.0,
        max_result_chars: int = MAX_RESULT_CHARS,
    ) -> ToolRegistry:
        """Raises: KeyError naming an unknown tool."""
        available = builtin_tools()
        unknown = [name for name in names if name not in available]
        if unknown:
            raise KeyError(f"unknown tool(s): {', '.join(unknown)}")
        tools = {name: available[name] for name in names}
        return cls(tools, mcp=mcp, timeout_secs=timeout_secs, max_result_chars=max_result_chars)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        builtins = tuple(tool.spec for tool in self._tools.values())
        return builtins + (self.mcp.specs if self.mcp is not None else ())

    def sources(self) -> dict[str, str]:
        """Each offered name → where the tool comes from: ``built-in`` or ``mcp:<server>``."""
        out = {name: "built-in" for name in self._tools}
        if self.mcp is not None:
            out.update({name: f"mcp:{t.server}" for name, t in self.mcp.offered.items()})
        return out

    def __contains__(self, name: object) -> bool:
        if name in self._tools:
            return True
        return self.mcp is not None and name in self.mcp.offered

    async def run(self, name: str, arguments: str, *, restarted: set[str] | None = None) -> str:
        """Run ``name`` with ``arguments`` (JSON text), bounded by ``timeout_secs``. Never
        raises: errors become tool errors. ``restarted``: the MCP servers this turn restarted
        already (a crashed stdio server is restarted once per turn)."""
        return (await self.call(name, arguments, restarted=restarted)).text

    async def call(
        self, name: str, arguments: str, *, restarted: set[str] | None = None
    ) -> ToolResult:
        """:meth:`run`, with why it failed in a few words (a status line's ``✗ name: cause``,
        architecture §3 "Tool status")."""
        if name not in self:
            return ToolResult(tool_error(f"no tool named {name!r}"), "no such tool")
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError as exc:
            return ToolResult(tool_error(f"arguments are not valid JSON: {exc}"), "bad arguments")
        if not isinstance(parsed, dict):
            return ToolResult(tool_error("arguments must be a JSON object"), "bad arguments")
        try:
            with anyio.fail_after(self.timeout_secs):
                output = await self._call(name, parsed, restarted)
        except TimeoutError:
            text = tool_error(f"the tool did not answer within {self.timeout_secs:g} s")
            return ToolResult(text, f"timed out after {self.timeout_secs:g} s")
        except McpToolError as exc:
            return ToolResult(tool_error(str(exc)), str(exc))
        except Exception as exc:  # a tool bug must not end the turn
            log.exception("tool %s failed", name)
            return ToolResult(tool_error(f"{type(exc).__name__}: {exc}"), type(exc).__name__)
        return ToolResult(_bounded(output, self.max_result_chars), error_message(output))

    async def _call(self, name: str, arguments: dict[str, Any], restarted: set[str] | None) -> str:
        tool = self._tools.get(name)
        if tool is not None:
            return await tool.run(arguments)
        assert self.mcp is not None
        # The MCP call gets a little more than the registry's bound: the registry's own
        # TimeoutError is the one reported.
        return await self.mcp.call(
            name, arguments, self.timeout_secs + 1, restarted if restarted is not None else set()
        )


def _bounded(output: str, limit: int) -> str:
    if len(output) <= limit:
        return output
    note = f"\n[result cut: {len(output)} characters in all, the first {limit} shown]"
    return output[:limit] + note
