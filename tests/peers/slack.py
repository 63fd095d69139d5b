"""A local Slack server for tests (architecture §8): the Web API and Socket Mode, on 127.0.0.1.

Theory of operation
-------------------
One aiohttp server (port 0) answers the Web API at ``POST /api/<method>``
(:mod:`tests.peers.slack_web` holds the methods and the world) and Socket Mode at ``/ws``.
Unmodified ``slack_sdk`` is pointed at it with ``AsyncWebClient(base_url=server.api_base)``;
``apps.connections.open`` answers this server's ``ws://`` URL, which the SDK's aiohttp Socket
Mode client connects to (https://docs.slack.dev/apis/events-api/using-socket-mode).

Socket Mode as Slack speaks it: on connect the server sends ``{"type": "hello", …}``; each
event, button press and slash command is an envelope (``events_api``, ``interactive``,
``slash_commands``) with an ``envelope_id`` the app acknowledges by sending
``{"envelope_id": …}`` back (optionally with a ``payload``: a slash command's response).
``{"type": "disconnect", "reason": "refresh_requested"}`` asks the app to reconnect.

The world: the bot (:data:`BOT_ID`, team :data:`TEAM_ID`), a user Alice (:attr:`user`), a DM
with her (:attr:`dm_channel`) and a channel (:attr:`channel`) the bot is in.

Test hooks:

* :meth:`inject_message` (a user's message: a ``message`` event, and in a channel with
  ``<@BOT>`` in the text also an ``app_mention`` for the same message, as Slack sends both),
  :meth:`press` (a ``block_actions`` press of a button of a bot message), :meth:`slash`.
* :meth:`rate_limit` / :meth:`fail`: the ``call``-th call (1-based; default the next) of a
  method gets HTTP 429 with ``Retry-After`` or an error, unapplied.
* :meth:`drop`: close every Socket Mode connection (the SDK reconnects through
  ``apps.connections.open``); with ``redeliver`` the last event envelope is sent again on the
  next connection (``retry_attempt: 1``, as Slack retries an event whose ack it did not get).
  :meth:`request_refresh`: the ``disconnect`` message.
* Observation: :attr:`requests` (every Web API call as a :class:`Request`), :meth:`calls`,
  :attr:`acks`, :attr:`connections`, :meth:`bot_messages`, :meth:`wait_until`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import WSMsgType, web

from tests.peers.slack_web import BOT_ID, TEAM_ID, ApiError, StoredMessage, WebApi

__all__ = ["BOT_ID", "TEAM_ID", "Request", "SlackServer", "StoredMessage"]


@dataclass
class Request:
    """One Web API call: its method, arguments, HTTP status, error code and arrival time."""

    method: str
    args: dict[str, Any]
    status: int = 200
    error: str | None = None
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class _Fault:
    error: str | None = None
    retry_after: int | None = None


class SlackServer:
    """The local Slack Web API + Socket Mode server (see the module docstring).

    Args:
        token: the bot token (``xoxb-``) the Web API accepts.
        app_token: the app-level token (``xapp-``) ``apps.connections.open`` accepts.
    """

    def __init__(self, *, token: str = "xoxb-peer-bot", app_token: str = "xapp-peer-app") -> None:
        self.token, self.app_token = token, app_token
        self.web = WebApi(token, app_token)
        self.user = "U0ALICE01"
        self.requests: list[Request] = []
        self.acks: list[dict[str, Any]] = []
        self.envelopes: list[dict[str, Any]] = []
        self.connections = 0
        self._sockets: list[web.WebSocketResponse] = []
        self._faults: dict[tuple[str, int], _Fault] = {}
        self._counts: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._redeliver: dict[str, Any] | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def dm_channel(self) -> str:
        return self.web.dm_channel

    @property
    def channel(self) -> str:
        return self.web.channel

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> SlackServer:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/ws", self._socket)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.web.socket_url = f"ws://127.0.0.1:{self.port}/ws"
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- the Web API ----------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            args.update(await request.json())
        elif request.can_read_body:
            form = await request.post()
            args.update({k: str(v) for k, v in form.items()})
        if isinstance(args.get("blocks"), str):
            args["blocks"] = json.loads(args["blocks"])
        token = args.pop("token", None)
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth.removeprefix("Bearer ")
        record = Request(method, args)
        self.requests.append(record)
        self._counts[method] = count = self._counts.get(method, 0) + 1
        fault = self._faults.pop((method, count), None)
        if fault is not None and fault.retry_after is not None:
            record.status, record.error = 429, "ratelimited"
            body = {"ok": False, "error": "ratelimited"}
            return web.json_response(
                body, status=429, headers={"Retry-After": str(fault.retry_after)}
            )
        try:
            if fault is not None and fault.error is not None:
                raise ApiError(fault.error)
            answer = self.web.call(method, args, token)
        except ApiError as exc:
            record.error = exc.code
            return web.json_response({"ok": False, "error": exc.code})
        return web.json_response({"ok": True, **answer})

    def _script(self, method: str, call: int | None, fault: _Fault) -> None:
        number = call if call is not None else self._counts.get(method, 0) + 1
        self._faults[(method, number)] = fault

    def rate_limit(self, method: str, retry_after: int = 1, *, call: int | None = None) -> None:
        """The ``call``-th call of ``method`` (default: the next) answers 429, unapplied."""
        self._script(method, call, _Fault(retry_after=retry_after))

    def fail(self, method: str, error: str, *, call: int | None = None) -> None:
        """The ``call``-th call of ``method`` (default: the next) answers ``error``."""
        self._script(method, call, _Fault(error=error))

    def calls(self, *methods: str, ok: bool = True) -> list[Request]:
        """The calls of ``methods`` (only those that were applied when ``ok``)."""
        return [
            r
            for r in self.requests
            if r.method in methods and (not ok or (r.status == 200 and r.error is None))
        ]

    def bot_messages(self, channel: str) -> list[StoredMessage]:
        """The bot's messages in ``channel`` that were not deleted, oldest first."""
        return [
            m
            for (c, _), m in self.web.messages.items()
            if c == channel and m.user == BOT_ID and not m.deleted
        ]

    # -- Socket Mode ----------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections += 1
        self._sockets.append(ws)
        hello = {"type": "hello", "num_connections": len(self._sockets),
                 "connection_info": {"app_id": "A0APP0001"},
                 "debug_info": {"host": "peer", "approximate_connection_time": 18060}}  # fmt: skip
        await ws.send_str(json.dumps(hello))
        if self._redeliver is not None:
            again, self._redeliver = self._redeliver, None
            await ws.send_str(json.dumps(again))
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self.acks.append(json.loads(message.data))
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
        return ws

    async def _send(self, envelope: dict[str, Any]) -> None:
        self.envelopes.append(envelope)
        await self.wait_until(lambda: bool(self._sockets))
        await self._sockets[-1].send_str(json.dumps(envelope))

    def _envelope(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"envelope_id": f"env-{next(self._ids)}", "type": kind, "payload": payload,
                "accepts_response_payload": kind != "events_api", "retry_attempt": 0,
                "retry_reason": ""}  # fmt: skip

    async def inject_message(
        self,
        text: str,
        *,
        channel: str | None = None,
        user: str | None = None,
        thread_ts: str | None = None,
        app_mention: bool = True,
    ) -> str:
        """A user writes ``text`` (default: Alice, in the DM); returns the message's ts."""
        channel = channel or self.dm_channel
        user = user or self.user
        ts = self.web.add_user_message(channel, user, text, thread_ts)
        kind = "im" if channel.startswith("D") else "channel"
        event: dict[str, Any] = {"type": "message", "channel": channel, "user": user,
                                 "text": text, "ts": ts, "event_ts": ts, "team": TEAM_ID,
                                 "channel_type": kind}  # fmt: skip
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        kinds = [event]
        if app_mention and f"<@{BOT_ID}>" in text and not channel.startswith("D"):
            mention = {k: v for k, v in event.items() if k != "channel_type"}
            kinds.append({**mention, "type": "app_mention"})
        for each in kinds:
            payload = {"token": "verification", "team_id": TEAM_ID, "api_app_id": "A0APP0001",
                       "event": each, "type": "event_callback", "event_id": f"Ev{next(self._ids)}",
                       "event_time": int(time.time())}  # fmt: skip
            await self._send(self._envelope("events_api", payload))
        return ts

    async def press(self, channel: str, ts: str, action_id: str, *, user: str | None = None) -> str:
        """``user`` (default Alice) presses the button ``action_id`` of the bot's message
        ``ts``; returns the envelope id."""
        message = self.web.messages[(channel, ts)]
        action = next(
            element
            for block in message.blocks
            for element in block.get("elements", [])
            if element.get("action_id") == action_id
        )
        user = user or self.user
        payload = {"type": "block_actions", "user": {"id": user, "team_id": TEAM_ID},
                   "team": {"id": TEAM_ID}, "channel": {"id": channel},
                   "container": {"type": "message", "message_ts": ts, "channel_id": channel,
                                 "thread_ts": message.thread_ts},
                   "message": {"ts": ts, "thread_ts": message.thread_ts, "text": message.text},
                   "trigger_id": "trigger", "response_url": "http://127.0.0.1/unused",
                   "actions": [{"type": "button", "action_id": action_id,
                                "block_id": "b", "value": action.get("value", ""),
                                "action_ts": str(time.time())}]}  # fmt: skip
        envelope = self._envelope("interactive", payload)
        await self._send(envelope)
        return str(envelope["envelope_id"])

    async def slash(
        self, command: str, text: str = "", *, channel: str | None = None, user: str | None = None
    ) -> str:
        """``user`` runs the slash command ``command``; returns the envelope id."""
        payload = {"token": "verification", "team_id": TEAM_ID, "api_app_id": "A0APP0001",
                   "channel_id": channel or self.dm_channel, "user_id": user or self.user,
                   "user_name": "alice", "command": command, "text": text,
                   "response_url": "http://127.0.0.1/unused", "trigger_id": "trigger"}  # fmt: skip
        envelope = self._envelope("slash_commands", payload)
        await self._send(envelope)
        return str(envelope["envelope_id"])

    async def drop(self, *, redeliver: bool = False) -> None:
        """Close every Socket Mode connection; ``redeliver``: the last event envelope comes
        again on the next connection, ``retry_attempt: 1``."""
        if redeliver:
            last = next(e for e in reversed(self.envelopes) if e["type"] == "events_api")
            self._redeliver = {**last, "retry_attempt": 1, "retry_reason": "timeout"}
        for ws in list(self._sockets):
            self._sockets.remove(ws)
            await ws.close()

    async def request_refresh(self) -> None:
        """Slack's ``disconnect`` message: the app opens a new connection."""
        message = {"type": "disconnect", "reason": "refresh_requested"}
        for ws in list(self._sockets):
            await ws.send_str(json.dumps(message))

    def acked(self, envelope_id: str) -> dict[str, Any] | None:
        return next((a for a in self.acks if a.get("envelope_id") == envelope_id), None)

    @staticmethod
    async def wait_until(holds: Callable[[], bool], within: float = 10.0) -> None:
        """Return once ``holds()``; raises TimeoutError after ``within`` seconds."""
        async with asyncio.timeout(within):
            while not holds():  # noqa: ASYNC110 - the conditions are the tests' own
                await asyncio.sleep(0.01)
