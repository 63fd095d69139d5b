"""The tool registry and the built-in tools (architecture §5).

A tool is an async callable taking the parsed JSON arguments and returning text for the model.
Failures the model can act on (bad arguments, an unknown time zone) are returned as tool errors —
a JSON object ``{"error": "..."}`` — never raised into the turn loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from providers.base import ToolSpec

__all__ = ["Tool", "ToolRegistry", "builtin_tools", "current_time", "tool_error"]

log = logging.getLogger(__name__)

ToolFunction = Callable[[Mapping[str, Any]], Awaitable[str]]


def tool_error(message: str) -> str:
    """The text of a tool error result, readable by the model."""
    return json.dumps({"error": message})


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
    """The tools offered to the model in this agent, by name."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools = dict(tools)

    @classmethod
    def from_names(cls, names: list[str]) -> ToolRegistry:
        """Raises: KeyError naming an unknown tool."""
        available = builtin_tools()
        unknown = [name for name in names if name not in available]
        if unknown:
            raise KeyError(f"unknown tool(s): {', '.join(unknown)}")
        return cls({name: available[name] for name in names})

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec for tool in self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    async def run(self, name: str, arguments: str) -> str:
        """Run ``name`` with ``arguments`` (JSON text). Never raises: errors become tool errors."""
        tool = self._tools.get(name)
        if tool is None:
            return tool_error(f"no tool named {name!r}")
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError as exc:
            return tool_error(f"arguments are not valid JSON: {exc}")
        if not isinstance(parsed, dict):
            return tool_error("arguments must be a JSON object")
        try:
            return await tool.run(parsed)
        except Exception as exc:  # a tool bug must not end the turn
            log.exception("tool %s failed", name)
            return tool_error(f"{type(exc).__name__}: {exc}")
