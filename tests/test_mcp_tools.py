"""MCP tools through the registry against a real MCP server (architecture §5 "MCP", §8): the
peer of ``tests/peers/mcp_server.py`` over stdio (a child process) and over streamable HTTP on
127.0.0.1."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from config.tools import McpHttpServerConfig, McpServerConfig, McpStdioServerConfig
from orchestrator.ops.logsetup import RedactingFormatter
from orchestrator.policy import Redactor
from orchestrator.tools.mcp_tools import McpServers, qualified_name
from orchestrator.tools.registry import MAX_RESULT_CHARS, ToolRegistry, builtin_tools
from tests.peers.mcp_server import HttpMcpServer

ROOT = Path(__file__).resolve().parent.parent

PEER_TOOLS = ["lookup", "slow", "fail", "shout", "large", "crash", "grow", "meet", "header"]


def stdio_peer() -> McpStdioServerConfig:
    return McpStdioServerConfig(
        command=[sys.executable, "-m", "tests.peers.mcp_server"], cwd=str(ROOT)
    )


@asynccontextmanager
async def registry(
    servers: Mapping[str, McpServerConfig], *, timeout_secs: float = 10.0
) -> AsyncIterator[ToolRegistry]:
    mcp = McpServers(servers, builtin_tools())
    tools = ToolRegistry(builtin_tools(), mcp=mcp, timeout_secs=timeout_secs)
    async with anyio.create_task_group() as tg:
        await mcp.start(tg)
        try:
            yield tools
        finally:
            await mcp.aclose()
            tg.cancel_scope.cancel()


def _error(text: str) -> str:
    value = json.loads(text)
    assert isinstance(value, dict) and set(value) == {"error"}, text
    return str(value["error"])


async def test_stdio_tools_are_listed_with_their_schemas_and_a_clash_is_prefixed() -> None:
    async with registry({"peer": stdio_peer()}) as tools:
        specs = {spec.name: spec for spec in tools.specs}
        # The peer's current_time clashes with the built-in: it is offered as peer__current_time.
        assert list(specs) == ["current_time", *PEER_TOOLS, "peer__current_time"]
        assert specs["current_time"].description.startswith("Get the current date")
        assert specs["peer__current_time"].description == "A clash with the built-in."
        schema = specs["lookup"].parameters
        assert schema["type"] == "object" and schema["properties"]["key"]["type"] == "string"
        assert tools.sources()["lookup"] == "mcp:peer"
        assert await tools.run("lookup", '{"key": "k1"}') == "value of k1"
        assert await tools.run("peer__current_time", "{}") == "the peer's time"


async def test_two_servers_with_one_tool_name_both_get_prefixes() -> None:
    with HttpMcpServer() as web:
        servers = {"local": stdio_peer(), "web": McpHttpServerConfig(url=web.url)}
        async with registry(servers) as tools:
            names = [spec.name for spec in tools.specs]
            assert "lookup" not in names
            assert {"local__lookup", "web__lookup"} <= set(names)
            assert tools.sources()["web__lookup"] == "mcp:web"
            assert await tools.run("web__lookup", '{"key": "a"}') == "value of a"
            assert await tools.run("local__lookup", '{"key": "b"}') == "value of b"


async def test_http_headers_from_the_config_reach_the_server() -> None:
    with HttpMcpServer() as web:
        config = McpHttpServerConfig.model_validate(
            {"url": web.url, "headers": {"Authorization": "Bearer t0ken"}}
        )
        async with registry({"web": config}) as tools:
            assert await tools.run("header", '{"name": "authorization"}') == "Bearer t0ken"
        assert "t0ken" not in repr(config)  # a secret, never printed


async def test_failing_slow_and_large_tools_give_the_model_what_it_can_use() -> None:
    async with registry({"peer": stdio_peer()}, timeout_secs=1.0) as tools:
        assert (
            _error(await tools.run("fail", '{"reason": "disk full"}'))
            == "Error executing tool fail: disk full"
        )
        assert _error(await tools.run("slow", '{"seconds": 5}')) == (
            "the tool did not answer within 1 s"
        )
        # The server still answers after a call that timed out.
        assert await tools.run("slow", '{"seconds": 0.01}') == "slept 0.01"
        large = await tools.run("large", json.dumps({"chars": MAX_RESULT_CHARS + 10}))
        assert large.startswith("x" * MAX_RESULT_CHARS + "\n[result cut: ")
        assert f"{MAX_RESULT_CHARS + 10} characters in all" in large
        small = await tools.run("large", '{"chars": 10}')
        assert small == "x" * 10
        # Arguments the server rejects are a tool error too, never an exception.
        assert "error" in json.loads(await tools.run("lookup", '{"nokey": 1}'))


async def test_a_crashed_stdio_server_is_restarted_once_per_turn() -> None:
    async with registry({"peer": stdio_peer()}) as tools:
        turn: set[str] = set()
        # crash ends the process: restarted once, called again, crashed again → a tool error.
        error = _error(await tools.run("crash", "{}", restarted=turn))
        assert "restarted once already" in error
        assert turn == {"peer"}
        # Within the same turn the dead server is not restarted a second time.
        assert "not running" in _error(await tools.run("lookup", '{"key": "a"}', restarted=turn))
        # The next turn restarts it, and the call succeeds.
        assert await tools.run("lookup", '{"key": "a"}', restarted=set()) == "value of a"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_tools_are_listed_again_after_list_changed(transport: str) -> None:
    with HttpMcpServer() as web:
        config = stdio_peer() if transport == "stdio" else McpHttpServerConfig(url=web.url)
        async with registry({"peer": config}) as tools:
            assert "fresh" not in tools
            assert await tools.run("grow", '{"name": "fresh"}') == "added fresh"
            with anyio.fail_after(10):
                while "fresh" not in tools:  # noqa: ASYNC110 (the registry has no event)
                    await anyio.sleep(0.02)
            assert await tools.run("fresh", "{}") == "grown fresh"


async def test_a_server_that_cannot_start_offers_no_tools_and_the_others_work() -> None:
    broken = McpStdioServerConfig(command=[str(ROOT / "no-such-program")])
    async with registry({"broken": broken, "peer": stdio_peer()}) as tools:
        assert tools.mcp is not None and not tools.mcp.connections["broken"].connected
        assert "lookup" in tools
        assert await tools.run("lookup", '{"key": "z"}') == "value of z"


async def test_unknown_tools_and_bad_arguments_are_tool_errors() -> None:
    tools = ToolRegistry(builtin_tools())
    assert _error(await tools.run("nope", "{}")) == "no tool named 'nope'"
    assert _error(await tools.run("current_time", "[1]")) == "arguments must be a JSON object"


def test_qualified_names_are_valid_for_every_provider() -> None:
    assert qualified_name("web", "read.file") == "web__read_file"
    assert qualified_name("s", "x" * 100) == ("s__" + "x" * 100)[:64]


async def test_a_stdio_servers_stderr_goes_to_the_log_not_the_terminal(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Written to the terminal as it was, a server's traceback showed the secrets in it past the
    # log's redaction; as log lines they cross it like every other line.
    line = "backend refused token ghp_AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIII"
    with caplog.at_level(logging.INFO, logger="orchestrator.tools.mcp_client"):
        async with registry({"peer": stdio_peer()}) as tools:
            assert await tools.run("shout", json.dumps({"text": line})) == "shouted"
            with anyio.fail_after(5):
                while not any(line in r.getMessage() for r in caplog.records):  # noqa: ASYNC110 - a thread logs it
                    await anyio.sleep(0.05)
    assert "ghp_" not in capfd.readouterr().err
    [record] = [r for r in caplog.records if line in r.getMessage()]
    assert record.getMessage() == f"MCP server peer: {line}"
    redacted = RedactingFormatter(Redactor().redact).format(record)
    assert "ghp_" not in redacted and "[REDACTED:github_token]" in redacted
