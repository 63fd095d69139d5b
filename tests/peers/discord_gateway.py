"""The Gateway half of the local Discord peer: one WebSocket endpoint, sessions, RESUME.

Protocol (https://discord.com/developers/docs/events/gateway): the server sends HELLO
(op 10, ``heartbeat_interval`` ms); the client heartbeats (op 1, answered by op 11) and sends
IDENTIFY (op 2), answered by READY and one GUILD_CREATE per guild, or RESUME (op 6), answered by
every dispatch after the client's ``seq`` and then RESUMED; a RESUME of an unknown or closed
session gets INVALID_SESSION (op 9, ``d: false``). Dispatches (op 0) carry a per-session ``s``
that grows by one. REQUEST_GUILD_MEMBERS (op 8) is answered by one GUILD_MEMBERS_CHUNK.

Close codes as Discord's: 4001 unknown opcode, 4002 decode error, 4003 not authenticated,
4004 authentication failed, 4005 already authenticated, 4014 disallowed intents (a privileged
intent the application was not granted). A client closing with 1000 or 1001 ends its session
(not resumable); any other drop keeps it resumable.

Encoding: ``encoding=json`` only. Transport compression: ``compress=zlib-stream`` is honoured
(one zlib stream per connection, every frame ended by a ``Z_SYNC_FLUSH``, so ``00 00 ff ff``,
sent as binary); any other value (e.g. ``zstd-stream``) gets plain text frames, which
discord.py also reads. IDENTIFY's own ``compress`` flag (per-payload compression) is ignored,
as Discord ignores it under transport compression.

Intents gate dispatches: guild messages need GUILD_MESSAGES (1 << 9), DM messages
DIRECT_MESSAGES (1 << 12), guild and channel events GUILDS (1 << 0); without MESSAGE_CONTENT
(1 << 15) a guild message that does not mention the bot arrives with empty ``content``,
``embeds``, ``attachments`` and ``components``, as Discord strips them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

__all__ = [
    "DIRECT_MESSAGES",
    "GUILDS",
    "GUILD_MESSAGES",
    "MESSAGE_CONTENT",
    "PRIVILEGED_INTENTS",
    "Connection",
    "Frame",
    "Gateway",
    "Session",
]

GUILDS = 1 << 0
GUILD_MEMBERS = 1 << 1
GUILD_PRESENCES = 1 << 8
GUILD_MESSAGES = 1 << 9
DIRECT_MESSAGES = 1 << 12
MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = GUILD_MEMBERS | GUILD_PRESENCES | MESSAGE_CONTENT

_CONTENT_FIELDS = {"content": "", "embeds": [], "attachments": [], "components": []}
_END_SESSION_CODES = frozenset({1000, 1001})


@dataclass(frozen=True)
class Frame:
    """One frame the client sent: ``op``, ``d``, ``at`` (``time.monotonic()``), and the
    1-based number of the connection it came on."""

    op: int
    d: Any
    at: float
    connection: int


@dataclass
class Connection:
    """One WebSocket connection: its query (``v``, ``encoding``, ``compress``), open and close
    times (``time.monotonic()``), who closed first (``"server"``/``"client"``) and with which
    code."""

    number: int
    query: dict[str, str]
    opened_at: float
    ws: web.WebSocketResponse = field(repr=False)
    closed_at: float | None = None
    close_code: int | None = None
    closed_by: str | None = None
    session: Session | None = field(default=None, repr=False)
    _zlib: Any = field(default=None, repr=False)
    _queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue, repr=False)

    def send(self, frame: dict[str, Any]) -> None:
        """Queue ``frame``; frames leave in the order queued."""
        self._queue.put_nowait(frame)

    def finish(self) -> None:
        """End :meth:`write_loop` after the frames already queued."""
        self._queue.put_nowait(None)

    async def drain(self) -> None:
        """Wait (at most 1 s) until every queued frame was written."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), 1.0)

    async def write_loop(self) -> None:
        while True:
            frame = await self._queue.get()
            try:
                if frame is None:
                    return
                data = json.dumps(frame)
                with contextlib.suppress(ConnectionError, RuntimeError):
                    if self._zlib is not None:
                        raw = self._zlib.compress(data.encode())
                        await self.ws.send_bytes(raw + self._zlib.flush(zlib.Z_SYNC_FLUSH))
                    else:
                        await self.ws.send_str(data)
            finally:
                self._queue.task_done()


@dataclass
class Session:
    """A gateway session: its id, the IDENTIFY ``d`` (token, intents, properties, shard),
    ``seq`` of its last dispatch, every dispatch sent in it (for RESUME), its connection."""

    session_id: str
    identify: dict[str, Any]
    seq: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    connection: Connection | None = None
    ended: bool = False
    resumes: int = 0

    @property
    def intents(self) -> int:
        return int(self.identify.get("intents", 0))


class Gateway:
    """The WebSocket endpoint (:meth:`handle` is its aiohttp handler).

    Args:
        token: the bot token IDENTIFY and RESUME must carry.
        granted_intents: privileged intents the application holds (an IDENTIFY asking for
            others is closed with 4014).
        heartbeat_interval_ms: sent in HELLO.
        ready: called with the new session; returns the READY ``d`` and the GUILD_CREATE ``d``s.
        members: a guild id's member objects, for REQUEST_GUILD_MEMBERS.
        changed: called after every frame in or out, so waiters re-check.
    """

    def __init__(
        self,
        *,
        token: str,
        granted_intents: int,
        heartbeat_interval_ms: int,
        ready: Callable[[Session], tuple[dict[str, Any], list[dict[str, Any]]]],
        members: Callable[[int], list[dict[str, Any]]],
        changed: Callable[[], None],
    ) -> None:
        self.token = token
        self.granted_intents = granted_intents
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.frames: list[Frame] = []
        self.connections: list[Connection] = []
        self.sessions: dict[str, Session] = {}
        self._ready = ready
        self._members = members
        self._changed = changed
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- dispatching ---------------------------------------------------------------------------

    def dispatch(
        self, event: str, data: dict[str, Any], *, intent: int = 0, gated_content: bool = False
    ) -> None:
        """Send ``event`` to every live session holding ``intent`` (0: every session); with
        ``gated_content`` the content fields are emptied for sessions without MESSAGE_CONTENT.
        A session whose connection is down keeps the event for its RESUME."""
        for session in self.sessions.values():
            if session.ended or (intent and not session.intents & intent):
                continue
            d = data
            if gated_content and not session.intents & MESSAGE_CONTENT:
                d = {**data, **_CONTENT_FIELDS}
            self._dispatch_to(session, event, d)

    def _dispatch_to(self, session: Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.log.append(frame)
        if session.connection is not None:
            session.connection.send(frame)
        self._changed()

    def live_connections(self) -> list[Connection]:
        return [c for c in self.connections if c.closed_at is None]

    async def close_connections(self, code: int) -> None:
        """Close every open connection with ``code`` (sessions stay resumable unless ended)."""
        for conn in self.live_connections():
            conn.closed_by = conn.closed_by or "server"
            conn.close_code = conn.close_code or code
            with contextlib.suppress(ConnectionError, RuntimeError):
                await conn.ws.close(code=code, message=b"closed by the test")

    def send_op(self, op: int, d: Any = None) -> None:
        """Send a non-dispatch frame (e.g. 7 RECONNECT, 1 HEARTBEAT request) to every
        live connection."""
        for conn in self.live_connections():
            conn.send({"op": op, "d": d, "s": None, "t": None})

    async def stop(self) -> None:
        await self.close_connections(1001)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the connection ------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        conn = Connection(len(self.connections) + 1, dict(request.query), time.monotonic(), ws)
        if conn.query.get("compress") == "zlib-stream":
            conn._zlib = zlib.compressobj()
        self.connections.append(conn)
        writer = asyncio.create_task(conn.write_loop())
        self._tasks.add(writer)
        conn.send(
            {
                "op": 10,
                "d": {"heartbeat_interval": self.heartbeat_interval_ms},
                "s": None,
                "t": None,
            }
        )
        self._changed()
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    await self._close(conn, 4002)
                    break
                code = self._receive(conn, msg.data)
                if code is not None:
                    await self._close(conn, code)
                    break
        finally:
            conn.closed_at = time.monotonic()
            conn.close_code = conn.close_code or ws.close_code
            conn.closed_by = conn.closed_by or "client"
            session = conn.session
            if session is not None and session.connection is conn:
                session.connection = None
                if conn.closed_by == "client" and ws.close_code in _END_SESSION_CODES:
                    session.ended = True
            conn.finish()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
            self._tasks.discard(writer)
            self._changed()
        return ws

    async def _close(self, conn: Connection, code: int) -> None:
        conn.closed_by = "server"
        conn.close_code = code
        await conn.drain()  # queued frames go first
        await conn.ws.close(code=code)

    def _receive(self, conn: Connection, text: str) -> int | None:
        """Handle one client frame; returns a close code when the connection must close."""
        try:
            payload = json.loads(text)
            op = int(payload["op"])
        except (ValueError, KeyError, TypeError):
            return 4002
        d = payload.get("d")
        self.frames.append(Frame(op, d, time.monotonic(), conn.number))
        self._changed()
        if op == 1:
            conn.send({"op": 11, "d": None, "s": None, "t": None})
            return None
        if op == 2:
            return self._identify(conn, d)
        if op == 6:
            return self._resume(conn, d)
        if conn.session is None:
            return 4003
        if op == 8:
            guild_id = int(d["guild_id"])
            chunk = {
                "guild_id": str(guild_id),
                "members": self._members(guild_id),
                "chunk_index": 0,
                "chunk_count": 1,
                "not_found": [],
            }
            if d.get("nonce") is not None:
                chunk["nonce"] = d["nonce"]
            self._dispatch_to(conn.session, "GUILD_MEMBERS_CHUNK", chunk)
            return None
        if op in (3, 4):  # presence and voice state updates: recorded only
            return None
        return 4001

    def _identify(self, conn: Connection, d: dict[str, Any]) -> int | None:
        if conn.session is not None:
            return 4005
        if d.get("token") != self.token:
            return 4004
        if int(d.get("intents", 0)) & PRIVILEGED_INTENTS & ~self.granted_intents:
            return 4014
        session = Session(uuid.uuid4().hex, d)
        self.sessions[session.session_id] = session
        session.connection = conn
        conn.session = session
        ready, guilds = self._ready(session)
        self._dispatch_to(session, "READY", ready)
        for guild in guilds:
            self._dispatch_to(session, "GUILD_CREATE", guild)
        return None

    def _resume(self, conn: Connection, d: dict[str, Any]) -> int | None:
        if conn.session is not None:
            return 4005
        if d.get("token") != self.token:
            return 4004
        session = self.sessions.get(str(d.get("session_id")))
        if session is None or session.ended:
            conn.send({"op": 9, "d": False, "s": None, "t": None})
            return None
        if session.connection is not None:  # the new connection takes the session over
            stale = session.connection
            stale.closed_by = stale.closed_by or "server"
            task = asyncio.create_task(stale.ws.close(code=4000))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        seq = int(d.get("seq") or 0)
        session.connection = conn
        session.resumes += 1
        conn.session = session
        for frame in session.log:
            if frame["s"] > seq:
                conn.send(frame)
        self._dispatch_to(session, "RESUMED", {})
        return None
