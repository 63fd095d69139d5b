"""A real MCP server for the tests, built with the official ``mcp`` SDK (architecture §8).

Its tools:

* ``lookup(key)``: answers ``value of <key>`` at once;
* ``slow(seconds)``: sleeps that long, then answers ``slept <seconds>``;
* ``fail(reason)``: raises, so the call ends with ``isError`` and the reason;
* ``shout(text)``: writes ``text`` to the server's stderr;
* ``large(chars)``: answers ``chars`` characters of ``x``;
* ``crash()``: ends the server process at once (stdio only: a crashed server);
* ``grow(name)``: adds a tool ``name`` (answering ``grown <name>``) and sends
  ``notifications/tools/list_changed``;
* ``meet(size)``: waits up to 10 s until ``size`` calls of it are running at once, then
  answers ``met`` (``alone`` if they never were: the calls were not concurrent);
* ``header(name)``: the value of request header ``name`` (HTTP; ``none`` when absent);
* ``current_time()``: clashes with relaybot's built-in of that name.

Run it over stdio with ``python -m tests.peers.mcp_server`` (the tests start it as an
``agent.mcp_servers`` ``command``), or over streamable HTTP on 127.0.0.1 with
:class:`HttpMcpServer` (uvicorn in a thread, an ephemeral port)::

    with HttpMcpServer() as server:
        url = server.url  # http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from types import TracebackType

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["HttpMcpServer", "build_server"]


def build_server(name: str = "peer") -> MCPServer:
    server = MCPServer(name)

    @server.tool(description="Look a key up.")
    def lookup(key: str) -> str:
        return f"value of {key}"

    @server.tool(description="Take a while.")
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(description="Always fails.")
    def fail(reason: str = "it broke") -> str:
        raise ToolError(reason)

    @server.tool(description="Write a line to the server's stderr.")
    def shout(text: str) -> str:
        print(text, file=sys.stderr, flush=True)
        return "shouted"

    @server.tool(description="A large result.")
    def large(chars: int) -> str:
        return "x" * chars

    @server.tool(description="End the server process.")
    def crash() -> str:
        sys.stdout.flush()
        os._exit(3)

    @server.tool(description="Add a tool and tell the client.")
    async def grow(name: str, ctx: Context) -> str:
        def grown() -> str:
            return f"grown {name}"

        server.add_tool(grown, name=name, description=f"A tool added at run time: {name}.")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    meeting: list[anyio.Event] = []

    @server.tool(description="Wait for other calls of this tool.")
    async def meet(size: int) -> str:
        arrived = anyio.Event()
        meeting.append(arrived)
        if len(meeting) >= size:
            for event in meeting:
                event.set()
            meeting.clear()
        with anyio.move_on_after(10):
            await arrived.wait()
            return "met"
        return "alone"

    @server.tool(description="A request header's value.")
    def header(name: str, ctx: Context) -> str:
        headers = ctx.headers or {}
        return headers.get(name.lower(), headers.get(name, "none"))

    @server.tool(name="current_time", description="A clash with the built-in.")
    def clash() -> str:
        return "the peer's time"

    return server


class HttpMcpServer:
    """:func:`build_server` over streamable HTTP at :attr:`url` (127.0.0.1, an ephemeral
    port), served by uvicorn in a thread of its own while the ``with`` block runs."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        app = build_server("http-peer").streamable_http_app()
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _serve(self) -> None:
        self._server.run(sockets=[self._sock])

    def __enter__(self) -> HttpMcpServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the MCP HTTP peer did not start")
            time.sleep(0.02)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()


if __name__ == "__main__":
    build_server(os.environ.get("MCP_PEER_NAME", "peer")).run("stdio")
