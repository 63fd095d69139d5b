"""The tool registry and ``current_time`` (architecture §5)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from orchestrator.tools.registry import MAX_RESULT_CHARS, Tool, ToolRegistry
from providers.base import ToolSpec


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry.from_names(["current_time"])


async def test_current_time_in_a_zone(registry: ToolRegistry) -> None:
    result = json.loads(await registry.run("current_time", '{"timezone": "Asia/Tokyo"}'))
    stamp = datetime.fromisoformat(result["iso"])
    assert stamp.utcoffset() == timedelta(hours=9)
    assert abs(stamp - datetime.now(ZoneInfo("UTC"))) < timedelta(minutes=1)


async def test_default_zone_is_utc(registry: ToolRegistry) -> None:
    result = json.loads(await registry.run("current_time", "{}"))
    assert result["timezone"] == "UTC"
    assert datetime.fromisoformat(result["iso"]).utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ('{"timezone": "Mars/Olympus"}', "unknown time zone"),
        ('{"timezone": 5}', "IANA"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"timezone": "../../etc/passwd"}', "unknown time zone"),
    ],
)
async def test_bad_arguments_become_tool_errors(
    registry: ToolRegistry, arguments: str, fragment: str
) -> None:
    result = json.loads(await registry.run("current_time", arguments))
    assert fragment in result["error"]


async def test_unknown_tool_is_a_tool_error(registry: ToolRegistry) -> None:
    assert "no tool" in json.loads(await registry.run("rm_rf", "{}"))["error"]


def test_unknown_tool_name_in_config_is_rejected() -> None:
    with pytest.raises(KeyError, match="shell"):
        ToolRegistry.from_names(["current_time", "shell"])


async def test_a_long_result_is_cut_at_the_configured_length_with_a_note() -> None:
    async def dump(arguments: Mapping[str, Any]) -> str:
        return "y" * int(arguments["chars"])

    tools = ToolRegistry({"dump": Tool(ToolSpec("dump", "d"), dump)}, max_result_chars=500)
    assert await tools.run("dump", '{"chars": 500}') == "y" * 500
    cut = await tools.run("dump", '{"chars": 501}')
    assert cut == "y" * 500 + "\n[result cut: 501 characters in all, the first 500 shown]"
    assert ToolRegistry.from_names([]).max_result_chars == MAX_RESULT_CHARS == 20_000
