"""A local Discord server for tests (architecture §8): REST v10 and the Gateway, on 127.0.0.1.

Theory of operation
-------------------
One aiohttp server (port 0) serves REST under ``/api/v10`` and the Gateway WebSocket at
``/ws/`` (:mod:`tests.peers.discord_gateway`). Unmodified discord.py 2.x is pointed at it
through two class attributes, process-wide::

    discord.http.Route.BASE = server.api_base              # every REST route, webhooks included
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(server.gateway_url)

(discord.py's ``Client`` connects to ``DEFAULT_GATEWAY`` itself and only
``AutoShardedClient`` asks ``GET /gateway/bot``; RESUME goes to READY's
``resume_gateway_url``, which is this server.) ``ws://`` works: discord.py hands the URL to
aiohttp as it is. It connects with ``?v=10&encoding=json&compress=zlib-stream``, and the
gateway answers with a zlib stream. After an INVALID_SESSION discord.py's default
``before_identify_hook`` sleeps 5 s before it IDENTIFYs again.

Modules: :mod:`~tests.peers.discord_gateway` (the WebSocket, sessions, RESUME),
:mod:`~tests.peers.discord_http` (recording, auth, scripted faults),
:mod:`~tests.peers.discord_rest` (the routes), :mod:`~tests.peers.discord_world` (users,
channels, messages), :mod:`~tests.peers.discord_interactions` (buttons, slash commands),
:mod:`~tests.peers.discord_objects` and :mod:`~tests.peers.discord_wire` (payloads, errors).

The world: a bot user (:data:`BOT_ID`), a user Alice (:attr:`user_id`), a guild
(:attr:`guild_id`) with a text channel (:attr:`channel_id`), and a DM channel with Alice
(:attr:`dm_channel_id`). :meth:`add_user`, :meth:`add_channel`, :meth:`add_thread` and
:meth:`open_dm` add more (dispatching CHANNEL_CREATE / THREAD_CREATE once connected).

REST routes (``route`` keys as used by the hooks): ``GET /gateway``, ``GET /gateway/bot``,
``GET /users/@me``, ``GET /oauth2/applications/@me``, ``POST /users/@me/channels``,
``GET /channels/{channel_id}``, ``POST|GET /channels/{channel_id}/messages``,
``GET|PATCH|DELETE /channels/{channel_id}/messages/{message_id}``,
``POST /channels/{channel_id}/typing``, ``GET|PUT /applications/{application_id}/commands``,
``GET|PUT /applications/{application_id}/guilds/{guild_id}/commands``,
``POST /interactions/{interaction_id}/{interaction_token}/callback``,
``POST /webhooks/{application_id}/{interaction_token}`` (follow-ups) and
``PATCH /webhooks/{application_id}/{interaction_token}/messages/@original``. Anything else is
404 ``{"message": "404: Not Found", "code": 0}``; a wrong ``Authorization: Bot <token>`` 401.

Semantics kept from Discord (:mod:`tests.peers.discord_wire` holds the error bodies):

* ``content`` over ``max_content`` characters (2000, counted in code points) is 400 code
  50035 with ``errors.content._errors[0].code == "BASE_TYPE_MAX_LENGTH"``; a message with no
  content, embeds, components or attachments is 50006; a ``message_reference`` to an unknown
  message is 50035 unless ``fail_if_not_exists`` is false; an unknown message 10008, an
  unknown channel 10003, editing another author's message 50005. An edit of identical content
  succeeds (Discord has no "not modified").
* The bot receives MESSAGE_CREATE / MESSAGE_UPDATE / MESSAGE_DELETE for its own writes, as on
  Discord (an adapter must ignore its own messages).
* Mentions: who a message pings follows ``allowed_mentions`` (absent: everything in the
  content, and the replied-to author); :attr:`StoredMessage.pinged_users` and
  ``pinged_everyone`` hold the outcome, the request its ``allowed_mentions`` as sent.
* An interaction must be answered within ``interaction_timeout`` seconds (Discord: 3, else
  10062) and only once (40060 "already acknowledged"); callback type 4 posts a message, 5 a
  "thinking" one, 6 acknowledges, 7 edits the component's message.
* Rate-limit buckets (``bucket_limit``, :mod:`~tests.peers.discord_http`): off by default;
  when on, ``X-RateLimit-*`` headers on every answer and Discord's own 429 past the limit.
* Not emulated: permissions, file
  uploads (a multipart body's ``payload_json`` is read, its files kept in the request's
  ``files``, not stored as attachments), member chunking
  beyond one chunk, sharding, ETF encoding, zstd-stream (plain text frames instead).

Test hooks:

* :meth:`inject_message` (a user's MESSAGE_CREATE: DM, guild channel, thread; ``<@id>`` in the
  content is a mention, ``reply_to`` a reply, ``files`` attachments as :class:`UploadedFile`,
  served at their ``url`` under ``/attachments/``), :meth:`inject_button_click` (INTERACTION_CREATE
  type 3 for a component ``custom_id`` of a bot message), :meth:`inject_command` (type 2).
* :meth:`rate_limit`, :meth:`fail`, :meth:`delay`: the ``call``-th request (1-based, over all
  channels; default: the next one) of a ``route`` gets a 429 (with ``retry_after`` seconds and
  a ``Via`` header), an :class:`ApiError` (unapplied), or is applied and answered late.
* Gateway: :meth:`disconnect` (close code 4000 by default: the client RESUMEs),
  :meth:`request_reconnect` (op 7), :meth:`invalidate_sessions` (the next RESUME gets op 9).
* Observation: :attr:`requests` (every REST request as a :class:`Request`), :meth:`requests_to`,
  :attr:`frames` (client gateway frames), :attr:`connections`, :attr:`sessions`,
  :meth:`messages`, :meth:`texts`, :meth:`states`, :attr:`interaction_responses`,
  :attr:`commands`, :attr:`downloads` (attachments fetched), ``await``-able :meth:`wait_for`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.peers.discord_gateway import (
    GUILDS,
    PRIVILEGED_INTENTS,
    Connection,
    Frame,
    Gateway,
    Session,
)
from tests.peers.discord_http import Fault, RestFront
from tests.peers.discord_interactions import Interactions
from tests.peers.discord_rest import RestRoutes
from tests.peers.discord_wire import (
    APPLICATION_ID,
    BOT_ID,
    DEFAULT_TOKEN,
    ApiError,
    RateLimit,
    Request,
    StoredMessage,
    snowflakes,
)
from tests.peers.discord_world import World

__all__ = [
    "APPLICATION_ID",
    "BOT_ID",
    "DEFAULT_TOKEN",
    "ApiError",
    "DiscordServer",
    "RateLimit",
    "Request",
    "StoredMessage",
    "UploadedFile",
]


@dataclass(frozen=True)
class UploadedFile:
    """A file a user attaches to a message: its bytes, name and content type; ``size``
    overrides the size announced, ``duration_secs`` makes it a voice message."""

    data: bytes
    filename: str
    content_type: str
    size: int | None = None
    duration_secs: float | None = None


class DiscordServer:
    """The local Discord REST + Gateway server; see the module docstring for its API.

    Args:
        token: the only bot token accepted (REST ``Authorization: Bot <token>``, IDENTIFY).
        granted_intents: privileged intents the application holds (default all three); an
            IDENTIFY asking for another is closed with 4014.
        heartbeat_interval_ms: sent in HELLO (Discord: 41250).
        max_content: the ``content`` limit in characters.
        interaction_timeout: seconds an interaction may wait for its callback.
        bucket_limit: per-route bucket size (requests per ``bucket_window`` seconds, per
            route and channel/guild/interaction), with ``X-RateLimit-*`` headers and 429s as
            Discord's (e.g. 5 per 5 s for sending to a channel); None: no buckets, no headers.
    """

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        granted_intents: int = PRIVILEGED_INTENTS,
        heartbeat_interval_ms: int = 41_250,
        max_content: int = 2000,
        interaction_timeout: float = 3.0,
        bucket_limit: int | None = None,
        bucket_window: float = 5.0,
    ) -> None:
        self.token = token
        self._changed = asyncio.Event()
        self.gateway = Gateway(
            token=token,
            granted_intents=granted_intents,
            heartbeat_interval_ms=heartbeat_interval_ms,
            ready=self._ready,
            members=lambda guild_id: self.world.members(guild_id),
            changed=self._notify,
        )
        self.world = World(
            max_content=max_content, dispatch=self.gateway.dispatch, changed=self._notify
        )
        self.interactions = Interactions(self.world, timeout=interaction_timeout)
        self._rest = RestRoutes(self.world, self.interactions)
        self._front = RestFront(
            self._rest,
            token=token,
            changed=self._notify,
            bucket_limit=bucket_limit,
            bucket_window=bucket_window,
        )
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.files: dict[int, bytes] = {}
        """The bytes of the files users attached, by attachment id."""
        self.downloads: list[str] = []
        """The file names of the attachments fetched, in order."""

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/ws/", self.gateway.handle)
        app.router.add_get("/attachments/{channel_id}/{attachment_id}/{filename}", self._download)
        self._front.install(app)
        self._runner = web.AppRunner(
            app, shutdown_timeout=1.0, handler_cancellation=True, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._rest.gateway_url = self.gateway_url

    async def stop(self) -> None:
        """Close every gateway connection (1001), then the server."""
        await self.gateway.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> DiscordServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def api_base(self) -> str:
        """For ``discord.http.Route.BASE`` (no trailing slash, as discord.py appends paths)."""
        return f"{self.url}/api/v10"

    @property
    def gateway_url(self) -> str:
        """For ``DiscordWebSocket.DEFAULT_GATEWAY`` (also READY's ``resume_gateway_url``)."""
        return "ws" + self.url.removeprefix("http") + "/ws/"

    # -- the world (delegated) -----------------------------------------------------------------

    @property
    def bot_user(self) -> dict[str, Any]:
        return self.world.bot_user

    @property
    def user_id(self) -> int:
        """Alice, the default human user."""
        return self.world.user_id

    @property
    def guild_id(self) -> int:
        return self.world.guild_id

    @property
    def channel_id(self) -> int:
        """The default guild's text channel ``#general``."""
        return self.world.channel_id

    @property
    def dm_channel_id(self) -> int:
        """Alice's DM channel with the bot."""
        return self.world.dm_channel_id

    @property
    def commands(self) -> dict[int | None, list[dict[str, Any]]]:
        """Registered application commands by guild id (None: global)."""
        return self.interactions.commands

    @property
    def interaction_responses(self) -> list[dict[str, Any]]:
        """Every accepted interaction callback: ``{"interaction_id", "type", "data", "at"}``."""
        return self.interactions.responses

    def add_user(self, name: str, *, guild_id: int | None = None) -> int:
        """A new user (a member of ``guild_id``, default the default guild); returns its id."""
        return self.world.add_user(name, guild_id=guild_id)

    def add_channel(self, name: str, *, guild_id: int | None = None) -> int:
        """A new guild text channel; returns its id."""
        return self.world.add_channel(name, guild_id=guild_id)

    def add_thread(self, parent_id: int, name: str = "thread") -> int:
        """A new public thread under text channel ``parent_id``; returns its id."""
        return self.world.add_thread(parent_id, name)

    def open_dm(self, user_id: int) -> int:
        """The DM channel between the bot and ``user_id`` (created if missing)."""
        return self.world.open_dm(user_id)

    def inject_message(
        self,
        channel_id: int,
        content: str,
        *,
        author_id: int | None = None,
        reply_to: int | None = None,
        files: list[UploadedFile] | None = None,
    ) -> dict[str, Any]:
        """A user (default Alice) posts ``content`` in ``channel_id`` (DM, guild channel or
        thread); ``<@id>`` in it mentions that user (:data:`BOT_ID` for the bot);
        ``reply_to`` makes it a reply (which pings the replied-to author); ``files`` are
        attached (Attachment objects whose ``url`` serves the bytes, :attr:`downloads` records
        each fetch). Returns the message object of the MESSAGE_CREATE."""
        attachments = [self._attachment(channel_id, file) for file in files or []]
        return self.world.user_message(
            channel_id, content, author_id=author_id, reply_to=reply_to, attachments=attachments
        )

    def inject_edit(self, message_id: int, content: str) -> dict[str, Any]:
        """The user who posted ``message_id`` edits it to ``content`` (MESSAGE_UPDATE with
        the whole message, as Discord sends a user's edit). Returns the message object."""
        return self.world.user_edit(message_id, content)

    def _attachment(self, channel_id: int, file: UploadedFile) -> dict[str, Any]:
        """https://discord.com/developers/docs/resources/message#attachment-object"""
        attachment_id = snowflakes()
        self.files[attachment_id] = file.data
        url = f"{self.url}/attachments/{channel_id}/{attachment_id}/{file.filename}"
        obj: dict[str, Any] = {
            "id": str(attachment_id),
            "filename": file.filename,
            "size": file.size if file.size is not None else len(file.data),
            "url": url,
            "proxy_url": url,
            "content_type": file.content_type,
        }
        if file.duration_secs is not None:  # a voice message (flags IS_VOICE_MESSAGE: 8192)
            obj.update(duration_secs=file.duration_secs, waveform="AAAA", flags=0)
        return obj

    async def _download(self, request: web.Request) -> web.Response:
        attachment_id = int(request.match_info["attachment_id"])
        data = self.files.get(attachment_id)
        if data is None:
            return web.Response(status=404)
        self.downloads.append(request.match_info["filename"])
        return web.Response(body=data, content_type="application/octet-stream")

    def inject_button_click(
        self, message_id: int, custom_id: str, *, user_id: int | None = None
    ) -> int:
        """A user presses the button ``custom_id`` of bot message ``message_id``; returns the
        interaction id."""
        return self.interactions.click(message_id, custom_id, user_id=user_id)

    def inject_command(
        self,
        channel_id: int,
        name: str,
        *,
        options: list[dict[str, Any]] | None = None,
        user_id: int | None = None,
    ) -> int:
        """A user invokes the registered slash command ``name``; returns the interaction id."""
        return self.interactions.command(channel_id, name, options=options, user_id=user_id)

    def messages(self, channel_id: int, *, bot_only: bool = True) -> list[StoredMessage]:
        """The messages now visible in ``channel_id``, oldest first (the bot's by default)."""
        return self.world.visible(channel_id, bot_only=bot_only)

    def message(self, message_id: int) -> StoredMessage:
        """Any stored message by id (deleted ones included). Raises KeyError."""
        return self.world.messages_by_id[message_id]

    def texts(self, channel_id: int) -> list[str]:
        """The contents of the bot's visible messages in ``channel_id``."""
        return [m.content for m in self.messages(channel_id)]

    def states(self, channel_id: int) -> list[tuple[str, ...]]:
        """The bot messages' visible contents after each applied write (send, edit, delete):
        every state a user could have seen."""
        return list(self.world.states.get(channel_id, []))

    # -- faults --------------------------------------------------------------------------------

    def rate_limit(
        self,
        route: str,
        *,
        retry_after: float,
        call: int | None = None,
        global_: bool = False,
        via: bool = True,
    ) -> None:
        """The ``call``-th request of ``route`` (default: the next) is answered 429 with
        ``retry_after`` seconds, unapplied; ``via=False`` drops the ``Via`` header."""
        self._front.script(route, call, Fault(rate_limit=RateLimit(retry_after, global_, via=via)))

    def fail(self, route: str, *, error: ApiError, call: int | None = None) -> None:
        """The ``call``-th request of ``route`` (default: the next) fails with ``error``."""
        self._front.script(route, call, Fault(error=error))

    def delay(self, route: str, *, seconds: float, call: int | None = None) -> None:
        """The ``call``-th request of ``route`` is applied, then answered ``seconds`` later."""
        self._front.script(route, call, Fault(delay_secs=seconds))

    @property
    def requests(self) -> list[Request]:
        """Every REST request, in arrival order."""
        return self._front.requests

    def requests_to(self, route: str, channel_id: int | None = None) -> list[Request]:
        """Recorded requests of ``route`` (``"POST /channels/{channel_id}/messages"``),
        optionally to one channel."""
        prefix = f"/channels/{channel_id}/"
        return [
            r
            for r in self.requests
            if r.route == route and (channel_id is None or (r.path + "/").startswith(prefix))
        ]

    # -- gateway -------------------------------------------------------------------------------

    @property
    def frames(self) -> list[Frame]:
        return self.gateway.frames

    @property
    def connections(self) -> list[Connection]:
        return self.gateway.connections

    @property
    def sessions(self) -> dict[str, Session]:
        return self.gateway.sessions

    async def disconnect(self, code: int = 4000) -> None:
        """Close every gateway connection with ``code`` (4000 keeps sessions resumable)."""
        live = self.gateway.live_connections()
        await self.gateway.close_connections(code)
        await self.wait_for(lambda: all(c.closed_at is not None for c in live))

    def request_reconnect(self) -> None:
        """Send op 7 RECONNECT: the client closes and RESUMEs."""
        self.gateway.send_op(7)

    def invalidate_sessions(self) -> None:
        """End every session: a later RESUME is answered with op 9 (``d: false``)."""
        for session in self.gateway.sessions.values():
            session.ended = True

    async def wait_for(self, predicate: Callable[[], bool], within: float = 5.0) -> None:
        """Return once ``predicate()`` holds (re-checked after every change).

        Raises:
            TimeoutError: it did not hold within ``within`` seconds.
        """
        async with asyncio.timeout(within):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()

    def _ready(self, session: Session) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        guilds = self.world.guild_objects()
        ready = {
            "v": 10,
            "user": self.world.bot_user,
            "guilds": [{"id": g["id"], "unavailable": True} for g in guilds],
            "session_id": session.session_id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "shard": session.identify.get("shard", [0, 1]),
            "application": {"id": str(APPLICATION_ID), "flags": 0},
            "private_channels": [],
            "presences": [],
            "relationships": [],
            "user_settings": {},
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "auth": {},
        }
        wants_guilds = session.intents & GUILDS
        return ready, guilds if wants_guilds else []
