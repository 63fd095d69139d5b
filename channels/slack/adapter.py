"""The Slack channel (``kind: slack``) on unmodified slack_sdk, asyncio (architecture §3).

Theory of operation
-------------------
The adapter executes primitive writes; the delivery engine decides what to write and when.

* **Transport.** One ``AsyncWebClient`` (``api_base_url``, default Slack's) for the Web API and
  the SDK's aiohttp Socket Mode client for events, button presses and slash commands: each
  envelope is acknowledged at once (within Slack's 3 s) and then handed on; the SDK reconnects
  by itself after a drop or a ``disconnect`` message, and an event Slack sends again
  (``retry_attempt``) is answered once (:mod:`channels.slack.inbound`).
* **Start.** ``auth.test`` (the bot's user and team) and ``apps.connections.open`` with the app
  token, then the WebSocket; a refused token is a permanent :class:`ChannelStartError`. With
  ``signing_secret`` instead, the Events API over HTTP on ``events_listen``
  (:mod:`channels.slack.http_events`: signatures checked, answered at once, retries once).
* **Inbound.** :mod:`channels.slack.inbound`: a thread is a conversation, DMs always, channels
  on a mention, ``message`` + ``app_mention`` of one message once.
* **Writes.** ``partial`` streams natively (:mod:`channels.slack.stream`): the draft's send is
  ``chat.startStream`` in the asker's thread (in a channel with ``recipient_user_id`` /
  ``recipient_team_id``), its edits ``chat.appendStream``, the final formatted edit
  ``chat.stopStream``; the answer's end stops what is still open in its thread. With
  ``native_streaming: off`` — or ``auto`` once the workspace refused streaming — drafts are
  ``chat.postMessage`` + ``chat.update``. Formatted text is mrkdwn, plain text escaped and sent
  with ``mrkdwn: false`` (:mod:`channels.slack.format`). Errors: :mod:`channels.slack.errors`.
* **Status.** While the model works, ``assistant.threads.setStatus`` shows
  ``thinking_status`` (switched off after the first refusal: it exists only in assistant
  threads); the first typing of an answer instead posts its Stop button.
* **Buttons and approvals.** Stop, Regenerate and Approve / Deny, each press decided by the
  orchestrator (:mod:`channels.slack.answers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from channels.base import (
    Channel,
    ChannelHealth,
    InboundHandler,
    InboundMessage,
    MessageRef,
    Rendering,
)
from channels.errors import (
    ChannelError,
    ChannelStartError,
    ChannelUnavailable,
    ChannelWriteFailed,
    MessageNotModified,
    MessageTooLong,
)
from channels.slack.answers import SlackControls
from channels.slack.buttons import Buttons
from channels.slack.errors import (
    AUTH_ERRORS,
    NETWORK_ERRORS,
    NO_STREAMING,
    error_code,
    translate_error,
)
from channels.slack.format import escape, mrkdwn, rendering
from channels.slack.http_events import EventsServer
from channels.slack.inbound import InboundReader, command_ack
from channels.slack.kind import KIND, SLACK_API_URL, SLACK_MAX_STREAM_TEXT, SlackChannelConfig
from channels.slack.stream import Append, Close, Stop, Stream, Unchanged, Update, next_step

__all__ = ["SlackChannel"]

_LOG = logging.getLogger("channels.slack")


class SlackChannel(SlackControls, Channel):
    """A Slack app (see the module docstring).

    Args:
        name: the channel's key in the config.
        config: its :class:`SlackChannelConfig`.
        on_inbound: awaited per inbound message, one at a time.
        start_timeout_secs: how long :meth:`start` waits for the WebSocket.
        ping_interval_secs: the Socket Mode client's ping interval (slack_sdk's default 5 s).
    """

    limits = KIND.limits
    multi_message_unit = "paragraph"

    def __init__(
        self,
        name: str,
        config: SlackChannelConfig,
        on_inbound: InboundHandler,
        *,
        start_timeout_secs: float = 30.0,
        ping_interval_secs: float = 5.0,
    ) -> None:
        super().__init__(name, config, on_inbound)
        self.config: SlackChannelConfig = config
        self.start_timeout_secs = start_timeout_secs
        self.ping_interval_secs = ping_interval_secs
        self._web: AsyncWebClient | None = None
        self._socket: SocketModeClient | None = None
        self.events_server: EventsServer | None = None
        """The HTTP server of the Events API (``signing_secret``); None in Socket Mode."""
        self._reader: InboundReader | None = None
        self._pump: asyncio.Task[None] | None = None
        self._inbox: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self._streams: dict[tuple[str, str], Stream] = {}
        self._native = config.native_streaming != "off"
        self._status = bool(config.thinking_status)
        self._buttons = Buttons()
        self._presses: set[asyncio.Task[None]] = set()

    def health(self) -> ChannelHealth:
        """``degraded`` while the Socket Mode connection is down (slack_sdk reconnects)."""
        socket = self._socket
        session = socket.current_session if socket is not None else None
        if socket is not None and (session is None or session.closed):
            return ChannelHealth("degraded", "the Slack Socket Mode connection is down")
        return ChannelHealth()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """``auth.test``, ``apps.connections.open`` and the Socket Mode WebSocket.

        Raises:
            ChannelStartError: a token was refused (permanent), the API is unreachable or the
                WebSocket did not open within ``start_timeout_secs``; one line, no token.
        """
        if self._web is not None:
            return
        base = self.config.api_base_url or SLACK_API_URL
        web = AsyncWebClient(
            token=self.config.bot_token.get_secret_value(), base_url=base, timeout=30
        )
        auth = await self._start_call("bot_token", web.auth_test)
        self._reader = InboundReader(self.name, str(auth["user_id"]), auth.get("team_id"))
        if self.config.app_token is None:
            await self._serve_http(web)
            return
        app_token = self.config.app_token.get_secret_value()
        opened = await self._start_call(
            "app_token", lambda: web.apps_connections_open(app_token=app_token)
        )
        socket = SocketModeClient(
            app_token=app_token, web_client=web, ping_interval=self.ping_interval_secs
        )
        socket.wss_uri = str(opened["url"])
        socket.socket_mode_request_listeners.append(self._on_request)  # type: ignore[arg-type]
        try:
            connect = socket.connect()  # type: ignore[no-untyped-call]
            await asyncio.wait_for(connect, self.start_timeout_secs)
        except (TimeoutError, OSError) as exc:
            await socket.close()  # type: ignore[no-untyped-call]
            raise ChannelStartError(
                f"the Slack Socket Mode connection did not open: {exc}"
            ) from None
        self._web, self._socket = web, socket
        self._pump = asyncio.create_task(self._hand_on(), name=f"{self.name}: inbound")

    async def _serve_http(self, web: AsyncWebClient) -> None:
        """The Events API over HTTP on ``events_listen`` (:mod:`channels.slack.http_events`)."""
        assert self.config.signing_secret is not None and self.config.events_listen is not None
        server = EventsServer(self.config.signing_secret.get_secret_value(), self.receive)
        host, _, port = self.config.events_listen.rpartition(":")
        try:
            await server.start(host.strip("[]"), int(port))
        except OSError as exc:
            where = self.config.events_listen
            raise ChannelStartError(f"cannot listen on {where}: {exc.strerror}") from None
        self._web, self.events_server = web, server
        self._pump = asyncio.create_task(self._hand_on(), name=f"{self.name}: inbound")

    async def _start_call(
        self, key: str, call: Callable[[], Awaitable[AsyncSlackResponse]]
    ) -> AsyncSlackResponse:
        try:
            return await call()
        except SlackApiError as exc:
            code = error_code(exc)
            if code in AUTH_ERRORS:
                raise ChannelStartError(f"Slack refused {key} ({code})", permanent=True) from None
            raise ChannelStartError(f"Slack refused to start ({code})") from None
        except NETWORK_ERRORS as exc:
            base = self.config.api_base_url or SLACK_API_URL
            raise ChannelStartError(f"cannot reach the Slack API at {base}: {exc}") from None

    async def stop(self) -> None:
        """Close the WebSocket and the Web API session; idempotent."""
        socket, self._socket = self._socket, None
        pump, self._pump = self._pump, None
        self._web = None
        server, self.events_server = self.events_server, None
        if server is not None:
            await server.stop()
        if pump is not None:
            pump.cancel()
            with contextlib.suppress(BaseException):
                await pump
        if socket is not None:
            await socket.close()  # type: ignore[no-untyped-call]
        self._buttons.cancel()
        for task in list(self._presses):
            task.cancel()

    # -- inbound --------------------------------------------------------------------------

    async def _hand_on(self) -> None:
        while True:
            inbound = await self._inbox.get()
            try:
                await self._on_inbound(inbound)
            except Exception:
                _LOG.exception("%s: handling a message failed", self.name)

    async def _on_request(self, client: SocketModeClient, request: SocketModeRequest) -> None:
        """An envelope: acknowledged first (Slack resends one not acked in time), then read."""
        payload = request.payload if isinstance(request.payload, dict) else {}
        answer = None
        if request.type == "slash_commands":
            answer = command_ack(payload)
        await client.send_socket_mode_response(SocketModeResponse(request.envelope_id, answer))
        self.receive(request.type, payload)

    def receive(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """One envelope's payload (``events_api``, ``slash_commands``, ``interactive``), over
        Socket Mode or HTTP; returns the body of its acknowledgement (``None``: empty)."""
        reader = self._reader
        if reader is None:
            return None
        if kind == "events_api":
            event = payload.get("event")
            inbound = reader.event(event) if isinstance(event, dict) else None
            if inbound is not None:
                self._inbox.put_nowait(inbound)
        elif kind == "slash_commands":
            self._inbox.put_nowait(reader.command(payload))
            return command_ack(payload)
        elif kind == "interactive" and payload.get("type") == "block_actions":
            self._block_actions(payload)
        return None

    # -- primitives -----------------------------------------------------------------------

    def render(self, text: str) -> Rendering:
        return rendering(text)

    def _client(self) -> AsyncWebClient:
        if self._web is None:
            raise ChannelWriteFailed(f"channel {self.name!r} is not started")
        return self._web

    async def _call(
        self, call: Callable[[], Awaitable[AsyncSlackResponse]], *, length: int = 0
    ) -> AsyncSlackResponse:
        try:
            return await call()
        except ChannelError:
            raise
        except NETWORK_ERRORS as exc:
            raise translate_error(exc, limit=self.limits.max_length, length=length) from exc

    def _body(self, text: str, formatted: bool) -> str:
        body = mrkdwn(text) if formatted else escape(text)
        if len(body) > self.limits.max_length:
            raise MessageTooLong(self.limits.max_length, len(body))
        return body

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        web = self._client()
        if self._streams_here(chat_id, thread_id, text, formatted):
            ref = await self._start_stream(web, chat_id, thread_id, text)
            if ref is not None:
                return ref
        body = self._body(text, formatted)
        sent = await self._call(
            lambda: web.chat_postMessage(
                channel=chat_id,
                text=body,
                thread_ts=thread_id,
                mrkdwn=formatted,
                unfurl_links=False,
                unfurl_media=False,
            ),
            length=len(body),
        )
        return MessageRef(chat_id, str(sent["ts"]))

    def _streams_here(self, chat: str, thread: str | None, text: str, formatted: bool) -> bool:
        """A ``partial`` draft (plain) of an answer in a thread, where streaming is on and
        the recipient is known (a channel needs the asker)."""
        if not (self._native and self.stream_mode == "partial" and thread and not formatted):
            return False
        if not self._buttons.live((chat, thread)):  # a command's reply: one message
            return False
        if not text.strip() or len(text) > SLACK_MAX_STREAM_TEXT:
            return False
        reader = self._reader
        return chat.startswith("D") or (
            reader is not None and reader.asker(chat, thread) is not None
        )

    async def _start_stream(
        self, web: AsyncWebClient, chat: str, thread: str | None, text: str
    ) -> MessageRef | None:
        args: dict[str, Any] = {"channel": chat, "thread_ts": thread, "markdown_text": text}
        asker = self._reader.asker(chat, thread) if self._reader is not None else None
        if not chat.startswith("D") and asker is not None:
            args["recipient_user_id"] = asker.user
            args["recipient_team_id"] = asker.team or (self._reader and self._reader.team_id)
        try:
            started = await web.chat_startStream(**args)
        except SlackApiError as exc:
            code = error_code(exc)
            if self.config.native_streaming == "auto" and code in NO_STREAMING:
                _LOG.warning("%s: Slack refused streaming (%s): editing instead", self.name, code)
                self._native = False
                return None
            raise translate_error(exc, limit=self.limits.max_length, length=len(text)) from exc
        except NETWORK_ERRORS as exc:
            raise translate_error(exc, limit=self.limits.max_length, length=len(text)) from exc
        ts = str(started["ts"])
        self._streams[(chat, ts)] = Stream(text, thread=thread)
        return MessageRef(chat, ts)

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        stream = self._streams.get((ref.chat_id, ref.message_id))
        if stream is None:
            await self._update(ref, text, formatted)
            return
        web = self._client()
        channel, ts = ref.chat_id, ref.message_id
        match next_step(stream, text, formatted=formatted):
            case Unchanged():
                raise MessageNotModified()
            case Append(delta):
                await self._streaming(
                    stream,
                    lambda: web.chat_appendStream(channel=channel, ts=ts, markdown_text=delta),
                )
                stream.shown = text
            case Stop(delta):
                await self._streaming(
                    stream, lambda: web.chat_stopStream(channel=channel, ts=ts, markdown_text=delta)
                )
                stream.shown, stream.open = text, False
            case Close():
                await self._streaming(stream, lambda: web.chat_stopStream(channel=channel, ts=ts))
                stream.open = False
                await self._update(ref, text, formatted)
            case Update():
                await self._update(ref, text, formatted)

    async def _streaming(
        self, stream: Stream, call: Callable[[], Awaitable[AsyncSlackResponse]]
    ) -> None:
        """A stream call; a stream Slack already ended is edited from now on (the write did
        not land: the engine sends it again, as an edit)."""
        try:
            await self._call(call)
        except ChannelWriteFailed as exc:
            cause = exc.__cause__
            if isinstance(cause, SlackApiError) and error_code(cause) == (
                "message_not_in_streaming_state"
            ):
                stream.open = False
                raise ChannelUnavailable("the stream had ended; editing instead") from exc
            raise

    async def _update(self, ref: MessageRef, text: str, formatted: bool) -> None:
        web = self._client()
        body = self._body(text, formatted)
        await self._call(
            lambda: web.chat_update(channel=ref.chat_id, ts=ref.message_id, text=body),
            length=len(body),
        )

    async def _delete_message(self, ref: MessageRef) -> None:
        web = self._client()
        await self._call(lambda: web.chat_delete(channel=ref.chat_id, ts=ref.message_id))
        self._streams.pop((ref.chat_id, ref.message_id), None)

    async def _send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        """The Stop button on an answer's first typing (one write), the thinking status after."""
        if await self._post_stop(chat_id, thread_id):
            return
        web = self._client()
        if not (self._status and thread_id):
            return
        status = self.config.thinking_status
        try:
            await web.assistant_threads_setStatus(
                channel_id=chat_id, thread_ts=thread_id, status=status
            )
        except SlackApiError as exc:
            if exc.response.status_code == 429:
                raise translate_error(exc, limit=self.limits.max_length) from exc
            _LOG.info("%s: no thinking status here (%s)", self.name, error_code(exc))
            self._status = False
        except NETWORK_ERRORS as exc:
            raise translate_error(exc, limit=self.limits.max_length) from exc

    async def reply_finished(self, chat_id: str) -> None:
        """Stop the streams still open in ``chat_id`` outside a live answer (the answer's own
        are stopped by :meth:`answer_finished`, per thread)."""
        await super().reply_finished(chat_id)
        live = self._buttons.live
        await self._stop_streams(
            lambda key, stream: key[0] == chat_id and not live((chat_id, stream.thread))
        )
