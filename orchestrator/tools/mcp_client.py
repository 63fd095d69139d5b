"""Connections to the MCP servers of ``agent.mcp_servers`` (architecture §5 "MCP"), through the
official ``mcp`` SDK (https://modelcontextprotocol.io/specification, transports "stdio" and
"Streamable HTTP").

Theory of operation
-------------------
Each server is one :class:`McpConnection`, served by a task of the daemon's task group
(:meth:`McpConnection.serve`): it opens the transport (a child process, or HTTP requests to the
``url`` with the configured ``headers``), initialises the session, lists the tools (every page)
and reports itself started; then it waits. A ``notifications/tools/list_changed`` from the server
wakes it to list again, after which ``on_tools_changed`` is called (the registry renames).

A call (:meth:`McpConnection.call`) is bounded by ``timeout_secs``. When the session is gone —
a stdio server that exited, a transport that broke — it raises :class:`McpUnavailable`; the
registry may then :meth:`~McpConnection.restart` the server (once per turn) and call again. A
server that cannot be started is logged and offers no tools; the bot runs without it.

Results become text for the model (:func:`result_text`): text blocks joined by blank lines,
other blocks named in brackets, the structured content as JSON when there is no text; a
result with ``isError`` is a tool error.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED
from pydantic import ValidationError

from config.tools import McpHttpServerConfig, McpServerConfig, McpStdioServerConfig
from orchestrator.tools.mcp_shapes import McpTool, McpToolError, McpUnavailable

__all__ = ["McpConnection", "McpTool", "McpToolError", "McpUnavailable", "result_text"]

log = logging.getLogger(__name__)

START_TIMEOUT_SECS = 30.0
"""How long starting a server (spawn or connect, initialise, list tools) may take, in seconds."""

STOP_TIMEOUT_SECS = 5.0


# Terminal control a server may write: escape sequences (CSI, OSC to BEL or ST, two-character
# ones) are dropped, and so are the other control characters but the tab (joined, not spaced:
# a key with a BEL inside stays one word for the redactor).
_TERMINAL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
_SPACE = re.compile(r"\s")
STDERR_LINE_CHARS = 2000
"""A stdio server's stderr line longer than this is cut in the log, at a space: the word the
limit falls in is left out whole, so no part of a secret stands at the cut where the log's
redaction could not tell it for one."""
STDERR_TAIL_LINES = 3
"""A stdio server that fails to start has its last this many stderr lines in the warning."""
STDERR_DRAIN_SECS = 1.0
"""How long a failed start waits for the rest of the server's stderr to be read, in seconds."""


def _line(raw: str) -> str:
    """A server's stderr line as the log takes it: terminal control dropped, cut at a space
    before :data:`STDERR_LINE_CHARS` (see there) with what was left out counted."""
    text = _TERMINAL.sub("", raw.rstrip("\n"))
    if len(text) <= STDERR_LINE_CHARS:
        return text
    cut = max((m.start() for m in _SPACE.finditer(text, 0, STDERR_LINE_CHARS + 1)), default=0)
    return f"{text[:cut].rstrip()} …({len(text) - cut:,} more characters)"


class _ServerStderr:
    """A stdio MCP server's stderr, as lines of this module's log (so they cross the log's
    redaction like every log line, architecture §4), not the terminal: a pipe whose write end
    the server gets, read by a daemon thread until the server and this context closed it. The
    last :data:`STDERR_TAIL_LINES` lines are kept (:meth:`tail`) for a start that fails."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._last: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8")
        self._thread = threading.Thread(target=self._relay, name=f"mcp-stderr-{name}", daemon=True)

    def __enter__(self) -> TextIO:
        self._thread.start()
        return self.writer

    def __exit__(self, *exc: object) -> None:
        self.writer.close()  # the reader ends once the server's copy is closed too

    def _relay(self) -> None:
        with self._reader:
            for line in self._reader:
                text = _line(line)
                if text.strip():
                    log.info("MCP server %s: %s", self._name, text)
                    self._last.append(text.strip())

    async def tail(self) -> str:
        """The last lines the server wrote (joined with `` | ``; ``""``: none), once the relay
        read all it will within :data:`STDERR_DRAIN_SECS` (the server's copy of the pipe closes
        when it exits)."""
        await anyio.to_thread.run_sync(self._thread.join, STDERR_DRAIN_SECS)
        return " | ".join(self._last)


class McpConnection:
    """One MCP server.

    Args:
        name: its key in ``agent.mcp_servers``.
        config: its entry.
        on_tools_changed: called after the tools were listed again (list_changed).
    """

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        on_tools_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self.config = config
        self.tools: tuple[McpTool, ...] = ()
        self._on_tools_changed = on_tools_changed
        self._session: ClientSession | None = None
        self._stderr: _ServerStderr | None = None
        """The current stdio session's stderr relay (``None``: an HTTP server, or none yet)."""
        self._scope: anyio.CancelScope | None = None
        # Made in start(): the daemon may build its tools before the event loop runs.
        self._ended: anyio.Event | None = None  # the session's end, once served
        self._relist: anyio.Event | None = None
        self._task_group: TaskGroup | None = None
        self._restart_lock: anyio.Lock | None = None
        self.generation = 0
        """Counts the sessions started (0: none yet); a restart is due only for the one seen."""

    @property
    def stdio(self) -> bool:
        return isinstance(self.config, McpStdioServerConfig)

    @property
    def connected(self) -> bool:
        return self._session is not None

    async def start(self, tg: TaskGroup) -> None:
        """Start serving in ``tg``; returns once the tools are listed (or the start failed)."""
        self._task_group = tg
        self._restart_lock = anyio.Lock()
        await tg.start(self.serve)

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run one session until cancelled or broken. Never raises but for cancellation."""
        started = False
        self._ended = ended = anyio.Event()
        self._relist = anyio.Event()
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                async with self._session_open() as session:
                    with anyio.fail_after(START_TIMEOUT_SECS):
                        await session.initialize()
                        self.tools = await self._list(session)
                    self._session = session
                    self.generation += 1
                    log.info("MCP server %s: %d tool(s)", self.name, len(self.tools))
                    task_status.started()
                    started = True
                    while True:
                        await self._relist.wait()
                        self._relist = anyio.Event()
                        self.tools = await self._list(session)
                        log.info("MCP server %s: tools changed: %d", self.name, len(self.tools))
                        self._on_tools_changed()
            except Exception as exc:  # a server that fails must not stop the bot
                said = await self._stderr.tail() if self._stderr is not None else ""
                if said and not started:  # why it did not start is often only there
                    log.warning("MCP server %s: %s; it wrote: %s", self.name, _describe(exc), said)
                else:
                    log.warning("MCP server %s: %s", self.name, _describe(exc))
            finally:
                self._session = None
                ended.set()
                if not started:
                    task_status.started()

    async def aclose(self) -> None:
        """End the session (the stdio server's process is stopped)."""
        if self._scope is not None:
            self._scope.cancel()
        if self._ended is not None:
            with anyio.move_on_after(STOP_TIMEOUT_SECS, shield=True):
                await self._ended.wait()

    async def restart(self, generation: int) -> None:
        """Start a new session if the one numbered ``generation`` is still the latest (a
        concurrent call may have restarted it already)."""
        assert self._task_group is not None and self._restart_lock is not None, "start() first"
        async with self._restart_lock:
            if self.generation != generation and self.connected:
                return
            log.warning("MCP server %s: restarting", self.name)
            await self.aclose()
            await self._task_group.start(self.serve)

    async def call(self, tool: str, arguments: dict[str, Any], timeout_secs: float) -> str:
        """Call ``tool`` (the server's own name) and return its result's text.

        Raises:
            McpUnavailable: no session (crashed, broken, never started).
            McpToolError: the server answered with a JSON-RPC error.
            TimeoutError: no answer within ``timeout_secs``.
        """
        session = self._session
        if session is None:
            raise McpUnavailable(f"the MCP server {self.name} is not running")
        try:
            with anyio.fail_after(timeout_secs):
                result = await session.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED or self._session is not session:
                self._broken(session)
                raise McpUnavailable(f"the MCP server {self.name} stopped") from exc
            raise McpToolError(exc.error.message) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            self._broken(session)
            raise McpUnavailable(f"the MCP server {self.name} stopped") from exc
        return result_text(result)

    def _broken(self, session: ClientSession) -> None:
        """The session's connection closed under a call: it is no longer offered for calls."""
        if self._session is session:
            self._session = None

    # -- the session ------------------------------------------------------------------------

    @asynccontextmanager
    async def _session_open(self) -> AsyncIterator[ClientSession]:
        async with AsyncExitStack() as stack:
            if isinstance(self.config, McpHttpServerConfig):
                headers = {k: v.get_secret_value() for k, v in self.config.headers.items()}
                client = await stack.enter_async_context(create_mcp_http_client(headers=headers))
                read, write = await stack.enter_async_context(
                    streamable_http_client(self.config.url, http_client=client)
                )
            else:
                program, *args = self.config.command
                params = StdioServerParameters(
                    command=program,
                    args=args,
                    env={k: v.get_secret_value() for k, v in self.config.env.items()} or None,
                    cwd=self.config.cwd,
                )
                errlog = stack.enter_context(self._relay_stderr())
                read, write = await stack.enter_async_context(stdio_client(params, errlog))
            session = ClientSession(read, write, message_handler=self._on_message)
            yield await stack.enter_async_context(session)

    def _relay_stderr(self) -> _ServerStderr:
        self._stderr = _ServerStderr(self.name)
        return self._stderr

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self._relist is not None:
            self._relist.set()  # listed by the serving task, not inside the session's reader
        elif isinstance(message, Exception):
            log.warning("MCP server %s: transport: %s", self.name, _describe(message))

    async def _list(self, session: ClientSession) -> tuple[McpTool, ...]:
        tools: list[McpTool] = []
        cursor: str | None = None
        for _ in range(100):  # pages; a server that never ends its listing is cut there
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(
                McpTool(self.name, t.name, t.description or "", dict(t.input_schema or {}))
                for t in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                break
        return tuple(tools)

    def describe(self) -> str:
        """Where the server is, for ``relaybot tools`` (no secret: env and headers left out)."""
        if isinstance(self.config, McpHttpServerConfig):
            return self.config.url
        return shlex.join(self.config.command)


def result_text(result: types.CallToolResult) -> str:
    """The text the model gets for ``result``; a tool error (``{"error": ...}``) when the
    server set ``isError``."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{block.type}: {getattr(block, 'mime_type', '')}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n\n".join(parts)
    if result.is_error:
        return json.dumps({"error": text or "the tool failed"}, ensure_ascii=False)
    return text


def _describe(exc: BaseException) -> str:
    """An exception in a few words, one line; a group is described by its first leaf. What a
    validation error quotes of its input is left out (pydantic elides the middle of a long
    input, which can leave part of a secret where the log's redaction cannot tell it for one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, ValidationError) and exc.error_count():
        return f"{type(exc).__name__}: {exc.errors(include_input=False)[0]['msg']}"
    text = str(exc).strip().split("\n", 1)[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _OneLine(logging.Filter):
    """The SDK's own log records of a server's failures (a line on stdout that is not JSON-RPC,
    a read that broke) in one line: the exception described by :func:`_describe` instead of its
    traceback, which quotes the server's output as pydantic elides it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage()}: {_describe(record.exc_info[1])}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


_SDK_LOGGERS = (
    "client",  # mcp.client.session's own name
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.client.client",
    "mcp.shared.dispatcher",
    "mcp.shared.jsonrpc_dispatcher",
)
"""The SDK's loggers a client session logs a server's failures through."""
for _name in _SDK_LOGGERS:
    logging.getLogger(_name).addFilter(_OneLine())
