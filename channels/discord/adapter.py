"""The Discord channel (``kind: discord``) on unmodified discord.py 2.x (architecture §3).

Theory of operation
-------------------
The adapter executes primitive writes; the delivery engine decides what to write and when.

* **Transport.** One ``discord.Client``: REST v10 and the Gateway WebSocket (intents GUILDS,
  GUILD_MESSAGES, DIRECT_MESSAGES and, unless ``message_content_intent: false``, the
  privileged MESSAGE_CONTENT). ``api_base_url`` / ``gateway_url`` point discord.py elsewhere
  (a REST proxy, a local server in tests); discord.py reads them from class attributes
  (``discord.http.Route.BASE``, ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY``), so they
  apply to the whole process: one Discord bot per process. :meth:`stop` puts the previous
  values back.
* **Start.** ``login`` (GET /users/@me) then the Gateway until READY. A rejected token, an
  unreachable server, or a gateway that refuses the Message Content intent (close code 4014,
  ``PrivilegedIntentsRequired``) is a :class:`ChannelStartError` with one line saying what to
  do (for 4014: which switch to turn on in the developer portal). discord.py keeps the Gateway
  up by itself afterwards (heartbeats, RESUME after a drop, a new IDENTIFY when the session
  ended); REST writes do not depend on it.
* **Inbound.** Messages and application commands become :class:`InboundMessage`\\ s
  (:mod:`channels.discord.inbound`: own and bot messages, replays and places outside
  ``allowed_guilds`` / ``allowed_channels`` dropped; a thread is the conversation), handed on
  one at a time in order of arrival. Guild messages that arrive without their text log one line
  saying which intent to enable.
* **Writes.** One REST call per primitive, no splitting: the engine decides every boundary with
  :meth:`render` (Discord shows Markdown as sent) and the limit of 2000 characters; a longer
  text is refused before any request (:class:`MessageTooLong`). discord.py waits out a 429
  (up to 30 s, ``max_ratelimit_timeout``) and retries some 5xx inside the call, so that write
  stays in flight; a longer 429 is :class:`ChannelRateLimited` and the engine waits it out
  (:mod:`channels.discord.errors`). The first message of a reply references the user's message
  (``fail_if_not_exists: false``).
* **Mentions.** Every write carries ``allowed_mentions``: ``AllowedMentions.none()`` (no
  ``@everyone``, role, user or reply ping) for previews, edits, status lines, notices and the
  parts of ``multi_message``; only a final formatted message that answers the user (``off``,
  or ``partial`` when the answer was complete before the first draft) allows a mention of that
  user and the reply ping. An edit never notifies on Discord, so a ``partial`` reply does not
  ping.
* **Approvals.** A prompt with ✅/❌ buttons (:mod:`channels.discord.approval`), pressed by
  the asker or an admin; after ``approval_timeout_secs`` the answer is ``None``.
* **Stop.** In ``partial`` a button on the answer's newest message (:mod:`.buttons`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
import discord
import yarl

from channels.base import (
    UNSPACED,
    Channel,
    ChannelHealth,
    InboundHandler,
    InboundMessage,
    MessageRef,
    WriteSpacing,
)
from channels.discord.approval import ApprovalView, awaited_answer
from channels.discord.buttons import AnswerButtons, DiscordAnswerButtons
from channels.discord.commands import command_tree
from channels.discord.errors import translate_error
from channels.discord.inbound import InboundReader
from channels.discord.kind import KIND, DiscordChannelConfig
from channels.errors import ChannelError, ChannelStartError, ChannelWriteFailed, MessageTooLong

__all__ = ["EMPTY_CONTENT_HELP", "INTENT_HELP", "DiscordChannel"]

_LOG = logging.getLogger("channels.discord")
_T = TypeVar("_T")

PORTAL = "https://discord.com/developers/applications"
INTENT_HELP = (
    "the Discord gateway refused the Message Content intent (close code 4014): in the developer "
    f"portal ({PORTAL}) open the application, Bot, Privileged Gateway Intents, turn on "
    '"Message Content Intent" and save (or set message_content_intent: false)'
)
"""The one line logged (or raised at start) when the gateway refuses the intent."""
EMPTY_CONTENT_HELP = (
    'guild messages arrive without their text: turn on "Message Content Intent" in the '
    f"developer portal ({PORTAL}: the application, Bot, Privileged Gateway Intents) and set "
    "message_content_intent: true; until then only mentions of the bot and DMs are readable"
)
"""The one line logged when guild messages arrive without content."""

_NO_MENTIONS = discord.AllowedMentions.none()


class _Client(discord.Client):
    """discord.py's client, forwarding READY and messages to the adapter."""

    def __init__(self, adapter: DiscordChannel, **options: Any) -> None:
        super().__init__(**options)
        self._adapter = adapter

    async def on_ready(self) -> None:
        self._adapter._gateway_ready()

    async def on_resumed(self) -> None:
        self._adapter._gateway_ready()

    async def on_disconnect(self) -> None:
        self._adapter._gateway_lost()

    async def on_message(self, message: discord.Message) -> None:
        self._adapter._received(self, message)

    async def on_message_edit(self, before: discord.Message, after: discord.Message) -> None:
        if before.content != after.content:  # not an embed unfurled (MESSAGE_UPDATE too)
            self._adapter._received(self, after, edited=True)


class DiscordChannel(Channel, DiscordAnswerButtons):
    """A Discord bot (see the module docstring).

    Args:
        name: the channel's key in the config.
        config: its :class:`DiscordChannelConfig`.
        on_inbound: awaited per inbound message, one at a time.
        start_timeout_secs: how long :meth:`start` waits for READY.
        guild_ready_timeout: seconds discord.py waits after the last GUILD_CREATE before READY
            (discord.py's default 2 s; tests make it short).
    """

    limits = KIND.limits
    multi_message_unit = "paragraph"

    def __init__(
        self,
        name: str,
        config: DiscordChannelConfig,
        on_inbound: InboundHandler,
        *,
        start_timeout_secs: float = 30.0,
        guild_ready_timeout: float = 2.0,
    ) -> None:
        super().__init__(name, config, on_inbound)
        self.config: DiscordChannelConfig = config
        self.start_timeout_secs = start_timeout_secs
        self.guild_ready_timeout = guild_ready_timeout
        self._client: _Client | None = None
        self._tree: discord.app_commands.CommandTree[Any] | None = None
        self._connect: asyncio.Task[None] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._inbox: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self._reader = InboundReader(
            name, [int(g) for g in config.allowed_guilds], [int(c) for c in config.allowed_channels]
        )
        self._warned_empty = False
        self._gateway_problem: str | None = None
        self._saved_urls: tuple[str, yarl.URL] | None = None
        self._allowed_users = {str(u) for u in config.allowed_users}
        self._buttons = AnswerButtons()
        self._askers: dict[str, str] = {}

    def health(self) -> ChannelHealth:
        """``degraded`` while the Gateway is disconnected (discord.py reconnects by itself) or
        after it ended for good (e.g. the intent was refused); REST writes still work."""
        if self._gateway_problem is None:
            return ChannelHealth()
        return ChannelHealth("degraded", self._gateway_problem)

    @property
    def running(self) -> bool:
        """Started and not stopped."""
        return self._client is not None

    # -- lifecycle ------------------------------------------------------------------------

    def _intents(self) -> discord.Intents:
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = True
        intents.message_content = self.config.message_content_intent
        return intents

    def _point_discord_py(self) -> None:
        """Set the process-wide URLs (module docstring); :meth:`_restore_urls` undoes it."""
        gateway = discord.gateway.DiscordWebSocket
        self._saved_urls = (discord.http.Route.BASE, gateway.DEFAULT_GATEWAY)
        if self.config.api_base_url:
            discord.http.Route.BASE = self.config.api_base_url.rstrip("/")
        if self.config.gateway_url:
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.config.gateway_url)

    def _restore_urls(self) -> None:
        if self._saved_urls is not None:
            discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = (
                self._saved_urls
            )
            self._saved_urls = None

    def _api_host(self) -> str:
        return urlsplit(discord.http.Route.BASE).netloc or discord.http.Route.BASE

    async def start(self) -> None:
        """Log in, connect to the Gateway and wait for READY.

        Raises:
            ChannelStartError: the token was rejected, the server is unreachable or did not
                answer within ``start_timeout_secs``, or the gateway refused the Message
                Content intent; one line, without the token.
        """
        if self._client is not None:
            return
        self._point_discord_py()
        self._ready = asyncio.Event()
        client = _Client(
            self,
            intents=self._intents(),
            allowed_mentions=_NO_MENTIONS,
            max_ratelimit_timeout=30.0,
            guild_ready_timeout=self.guild_ready_timeout,
            # architecture §9: several instances each take a shard of the bot's guilds.
            shard_id=self.config.shard_id,
            shard_count=self.config.shard_count,
        )
        self._tree = command_tree(client, self._on_command)
        token = self.config.token.get_secret_value()
        try:
            await self._connect_until_ready(client, token)
        except BaseException:
            await client.close()
            self._restore_urls()
            raise
        self._client = client
        await self._register_commands()
        self._pump = asyncio.create_task(self._hand_on(), name=f"{self.name}: inbound")

    async def _connect_until_ready(self, client: _Client, token: str) -> None:
        try:
            await client.login(token)
        except discord.LoginFailure:
            raise ChannelStartError("invalid token (401 Unauthorized)", permanent=True) from None
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            cause = str(exc).replace(token, "<token>")
            host = self._api_host()
            raise ChannelStartError(f"cannot reach the Discord API at {host}: {cause}") from None
        connect = asyncio.create_task(client.connect(reconnect=True), name=f"{self.name}: gateway")
        ready = asyncio.create_task(self._ready.wait())
        try:
            await asyncio.wait(
                {connect, ready}, timeout=self.start_timeout_secs, return_when="FIRST_COMPLETED"
            )
        finally:
            ready.cancel()
        if connect.done():
            failure = connect.exception()
            if isinstance(failure, discord.PrivilegedIntentsRequired):
                raise ChannelStartError(INTENT_HELP, permanent=True)
            raise ChannelStartError(f"the Discord gateway closed the connection: {failure}")
        if not self._ready.is_set():
            connect.cancel()
            with contextlib.suppress(BaseException):
                await connect
            gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
            raise ChannelStartError(f"the Discord gateway at {gateway} did not answer in time")
        connect.add_done_callback(self._gateway_ended)
        self._connect = connect

    async def _register_commands(self) -> None:
        if self._tree is None:
            return
        try:
            await self._tree.sync()
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            _LOG.warning(
                "%s: could not register the application commands (text commands work): %s",
                self.name,
                exc,
            )

    def _gateway_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self._client is None or self._client.is_closed():
            return
        exc = task.exception()
        if isinstance(exc, discord.PrivilegedIntentsRequired):
            self._gateway_problem = INTENT_HELP
        else:
            self._gateway_problem = f"the Discord gateway connection ended: {exc}"
        _LOG.error("%s: %s", self.name, self._gateway_problem)

    async def stop(self) -> None:
        """Close the Gateway and the HTTP session; idempotent."""
        client, self._client = self._client, None
        if client is None:
            return
        pump, self._pump = self._pump, None
        connect, self._connect = self._connect, None
        if pump is not None:
            pump.cancel()
        try:
            await client.close()
            for task in (pump, connect):
                if task is not None:
                    with contextlib.suppress(BaseException):
                        await asyncio.wait_for(task, 5)
        finally:
            self._restore_urls()

    # -- inbound --------------------------------------------------------------------------

    def _gateway_ready(self) -> None:
        self._ready.set()
        self._gateway_problem = None

    def _gateway_lost(self) -> None:
        if self._gateway_problem is None:
            self._gateway_problem = "the Discord gateway is disconnected (reconnecting)"

    async def _hand_on(self) -> None:
        while True:
            inbound = await self._inbox.get()
            try:
                bounds = {
                    "image": self.max_image_bytes,
                    "document": self.max_document_bytes,
                    "audio": self.max_audio_bytes,
                }
                await self._on_inbound(await self._reader.fetch(inbound, bounds))
            except Exception:
                _LOG.exception("%s: handling a message failed", self.name)

    def _received(self, client: _Client, message: discord.Message, edited: bool = False) -> None:
        """MESSAGE_CREATE or a user's edit of it (synchronous: the queue keeps the order)."""
        if client.user is None:
            return
        inbound = self._reader.message(message, client.user.id, edited=edited)
        if self._reader.content_missing and not self._warned_empty:
            self._warned_empty = True
            _LOG.warning("%s: %s", self.name, EMPTY_CONTENT_HELP)
        if inbound is not None:
            self._inbox.put_nowait(inbound)

    async def _on_command(self, interaction: discord.Interaction[Any], name: str) -> None:
        """An application command: acknowledged at once (ephemeral), then handed on as the text
        command (:mod:`channels.discord.commands`)."""
        inbound = self._reader.command(interaction, name)
        try:
            await interaction.response.send_message(
                f"/{name}" if inbound is not None else "Not available here.", ephemeral=True
            )
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            _LOG.warning("%s: could not acknowledge /%s: %s", self.name, name, exc)
        if inbound is not None:
            self._inbox.put_nowait(inbound)

    # -- primitives -----------------------------------------------------------------------

    def _messageable(self, channel_id: str) -> discord.PartialMessageable:
        if self._client is None:
            raise ChannelWriteFailed(f"channel {self.name!r} is not started")
        return self._client.get_partial_messageable(int(channel_id))

    def _fits(self, text: str) -> None:
        if len(text) > self.limits.max_length:
            raise MessageTooLong(self.limits.max_length, len(text))

    @staticmethod
    async def _call(action: Callable[[], Awaitable[_T]], *, length: int = 0) -> _T:
        try:
            return await action()
        except ChannelError:
            raise
        except (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise translate_error(exc, length=length) from exc

    def _reply_mentions(self, reply_to: str, formatted: bool) -> discord.AllowedMentions:
        """Only a final message answering the user may mention that user (module docstring)."""
        author = self._reader.author_of(reply_to)
        if not formatted or author is None or self.stream_mode == "multi_message":
            return _NO_MENTIONS
        return discord.AllowedMentions(
            everyone=False, roles=False, users=[discord.Object(author)], replied_user=True
        )

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        target = thread_id or chat_id
        channel = self._messageable(target)
        self._fits(text)
        if (rewritten := self._buttons.rewrite(target)) is not None:  # agent.rerun_edited
            return await self._rewrite(MessageRef(target, rewritten), text, formatted=formatted)
        reference: discord.MessageReference | None = None
        mentions = _NO_MENTIONS
        if reply_to is not None:
            reference = discord.MessageReference(
                message_id=int(reply_to), channel_id=int(target), fail_if_not_exists=False
            )
            mentions = self._reply_mentions(reply_to, formatted)
        view = self._buttons.view_for(target, None, self._on_press)
        extra: dict[str, Any] = {} if view is None else {"view": view}
        if reference is None:
            sent = await self._call(
                lambda: channel.send(text, allowed_mentions=mentions, **extra), length=len(text)
            )
        else:
            answered = reference
            sent = await self._call(
                lambda: channel.send(text, reference=answered, allowed_mentions=mentions, **extra),
                length=len(text),
            )
        if self._buttons.live(target):
            self._buttons.written(target, str(sent.id), view, sent=True)
        return MessageRef(target, str(sent.id))

    @property
    def can_send_voice(self) -> bool:
        return True

    async def _send_voice(
        self,
        chat_id: str,
        audio: bytes,
        mime_type: str,
        *,
        reply_to: str | None,
        thread_id: str | None,
    ) -> MessageRef:
        """The audio as a file attachment (``answer.ogg``), answering ``reply_to``."""
        target = thread_id or chat_id
        channel = self._messageable(target)
        reference = None
        if reply_to is not None:
            reference = discord.MessageReference(
                message_id=int(reply_to), channel_id=int(target), fail_if_not_exists=False
            )
        file = discord.File(io.BytesIO(audio), filename="answer.ogg")
        if reference is None:
            sent = await self._call(lambda: channel.send(file=file, allowed_mentions=_NO_MENTIONS))
        else:
            answered = reference
            sent = await self._call(
                lambda: channel.send(file=file, reference=answered, allowed_mentions=_NO_MENTIONS)
            )
        return MessageRef(target, str(sent.id))

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        message = self._messageable(ref.chat_id).get_partial_message(int(ref.message_id))
        self._fits(text)
        extra: dict[str, Any] = {}
        live = self._buttons.live(ref.chat_id)
        if live:  # a message of an answer: its button on the newest message, else none
            extra["view"] = self._buttons.view_for(ref.chat_id, ref.message_id, self._on_press)
        await self._call(
            lambda: message.edit(content=text, allowed_mentions=_NO_MENTIONS, **extra),
            length=len(text),
        )
        if live:
            self._buttons.written(ref.chat_id, ref.message_id, extra["view"], sent=False)

    async def _delete_message(self, ref: MessageRef) -> None:
        message = self._messageable(ref.chat_id).get_partial_message(int(ref.message_id))
        await self._call(message.delete)

    async def _send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        channel = self._messageable(thread_id or chat_id)

        async def typing() -> None:
            await channel.typing()

        await self._call(typing)

    async def _request_approval(
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        """Raises ChannelError when the prompt cannot be sent."""
        channel = self._messageable(thread_id or chat_id)
        self._fits(prompt)
        view = ApprovalView(
            prompt,
            timeout=self.approval_timeout_secs,
            allowed=self._may_answer,
            refusal=self._approval_refusal(chat_id, thread_id),
        )
        sent = await self._call(
            lambda: channel.send(prompt, view=view, allowed_mentions=_NO_MENTIONS),
            length=len(prompt),
        )
        spacing.landed()
        return await awaited_answer(sent, view, spacing, self.name)
