"""The daemon (architecture §7): start every channel, answer messages, stop gracefully.

Theory of operation
-------------------
``serve`` builds the providers, tools, store, policy and channels from a validated config and
starts every channel. A channel that cannot start ends the run with exit code 1 and one line
naming it. Then it waits for SIGINT/SIGTERM — or, when the console is the only channel, for the
end of its input. Shutdown stops taking messages, lets running turns finish for up to
``SHUTDOWN_GRACE_SECS``, then cuts the model work of any turn still running (its reply ends with
the interrupted marker), stops the channels and returns 0.

Every message is kept in the store's waiting messages until its turn starts (architecture §5): the
messages queued behind a running answer at shutdown are answered after the next start, once;
those older than ``agent.stale_after_secs`` get a short notice instead. A message is taken once
per update id (the store keeps the ids seen), so a redelivered update is not answered again.
Images are screened when the message's turn comes (:mod:`orchestrator.images`: too large, or no
vision, is one line to the user). ``/stop`` is not queued:
it cuts the running answer of its conversation short (architecture §3 "Stop"), and the next waiting
message runs.

Every task has an owner: the root task group spans the whole run.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskGroup, TaskStatus

from channels.base import Channel, InboundHandler, InboundMessage
from channels.errors import ChannelError
from channels.registry import build_channel
from config.models import RelaybotConfig
from orchestrator.access import AccessControl
from orchestrator.dispatch import Dispatcher
from orchestrator.http_server import HttpServer
from orchestrator.images import screen_images
from orchestrator.metrics import Metrics
from orchestrator.policy import OutboundPolicy
from orchestrator.rounds import ChainEntry, RoundRunner
from orchestrator.store import AsyncStore, Store, WaitingMessage
from orchestrator.tool_setup import build_registry, start_tools
from orchestrator.turn import SHUTDOWN_CAUSE, TurnRunner, conversation_key
from providers.registry import build_provider

__all__ = ["SHUTDOWN_GRACE_SECS", "ChannelFactory", "Daemon", "serve"]

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECS = 30.0
"""How long running turns may go on after SIGINT/SIGTERM, in seconds."""
DELIVERY_GRACE_SECS = 10.0
"""After cutting the model work, how long interrupted replies may take to reach the chat."""

ChannelFactory = Callable[[str, Any, InboundHandler], Channel]
"""Builds one channel from its name, config model and inbound handler (default:
:func:`channels.registry.build_channel`)."""

HELP_TEXT = (
    "Hi! Send me a message and I will answer. Commands: /stop ends the answer being written, "
    "/reset forgets this conversation."
)
NOTHING_TO_STOP = "Nothing to stop."
STALE_NOTICE = (
    "Your message from {when} was not answered before the bot restarted; please send it again."
)


class Daemon:
    """One run of relaybot over a validated config.

    Args:
        config: the validated config.
        storage_path: the SQLite store's file.
        channel_factory: builds each channel (tests pass one that sets short network timeouts).
    """

    def __init__(
        self,
        config: RelaybotConfig,
        *,
        storage_path: str | Path,
        channel_factory: ChannelFactory = build_channel,
    ) -> None:
        self.config = config
        self._channel_factory = channel_factory
        self.store = Store(storage_path)  # blocking: start-up, shutdown and tests
        self._store = AsyncStore(self.store)  # everything on the event loop
        self.policy = OutboundPolicy.from_config(config.policy)
        self.metrics = Metrics()
        chain = [
            ChainEntry(build_provider(name, config.providers[name]), config.providers[name])
            for name in config.agent.providers
        ]
        self.tools = build_registry(config.agent)
        self.turns = TurnRunner(
            agent=config.agent,
            rounds=RoundRunner(chain),
            tools=self.tools,
            store=self._store,
            policies=self.policy,
            on_round=self.metrics.observe_round,
            on_moved=self._chat_moved,
        )
        self._chain = chain
        self._vision = config.providers[config.agent.providers[0]].vision
        self.metrics.health = lambda: {n: c.health() for n, c in self.channels.items()}
        self.channels: dict[str, Channel] = {}
        self._access: dict[str, AccessControl] = {}
        self._dispatcher: Dispatcher | None = None
        self.stopping = anyio.Event()
        self._grace: anyio.CancelScope | None = None  # running turns' time after a stop
        self._input_ended = False  # a console-only run ended with its input
        self._unanswered: str | None = None  # cause of the first answer not produced

    async def run(self, *, handle_signals: bool = True) -> int:
        """Serve until stopped; returns the process exit code: 0, or 1 when a channel fails, or
        when a console-only run ended with its piped input and an answer was not produced."""
        try:
            async with anyio.create_task_group() as tg:
                code = await self._run(tg, handle_signals)
                tg.cancel_scope.cancel()
            return code
        finally:
            for entry in self._chain:
                with anyio.CancelScope(shield=True):
                    await entry.provider.aclose()
            self.store.close()

    async def _run(self, tg: TaskGroup, handle_signals: bool) -> int:
        self._grace = anyio.CancelScope()  # its deadline is set when the stop begins
        self._dispatcher = Dispatcher(tg, self._run_turn, self._store.remove_waiting, held=True)
        tools_error = await start_tools(self.config.agent, self.tools, tg)
        if tools_error is not None:
            print(f"relaybot: {tools_error}", file=sys.stderr)
            return 1
        for name, channel_config in self.config.channels.items():
            self._access[name] = AccessControl(
                name, channel_config.allowed_users, channel_config.respond_in_groups
            )
            try:
                self.channels[name] = self._channel_factory(
                    name, channel_config, self._inbound_for(name)
                )
            except NotImplementedError as exc:
                return self._start_failed(name, str(exc))
            self.channels[name].state = self._store.channel_state(name)
            self.channels[name].max_image_bytes = self.config.agent.max_image_bytes
            self.channels[name].approval_timeout_secs = self.config.agent.approval_timeout_secs
        stale = await self._queue_waiting()
        started: list[Channel] = []
        for name, channel in self.channels.items():
            try:
                await channel.start()
            except (ChannelError, NotImplementedError, OSError) as exc:
                await self._stop_channels(started)
                return self._start_failed(name, str(exc) or type(exc).__name__)
            started.append(channel)
        if self.config.server.listen:
            host, _, port = self.config.server.listen.rpartition(":")
            server = HttpServer(self.metrics.handle, host=host or "127.0.0.1", port=int(port))
            try:
                await server.start(tg)
            except OSError as exc:
                await self._stop_channels(started)
                print(
                    f"relaybot: server.listen {self.config.server.listen}: cannot listen: "
                    f"{exc.strerror or exc}",
                    file=sys.stderr,
                )
                return 1
            log.info("metrics on http://%s:%d/metrics", server.host, server.port)
        if handle_signals:
            await tg.start(self._watch_signals)  # handled from here on
        self._dispatcher.release()
        await self._send_stale_notices(stale)
        console_only = all(c.config.kind == "console" for c in self.channels.values())
        for channel in self.channels.values():
            tg.start_soon(self._serve_channel, channel, console_only)
        log.info("relaybot running with channels: %s", ", ".join(self.channels))
        await self.stopping.wait()
        await self._shutdown(started)
        if self._input_ended and self._unanswered and not _stdin_is_terminal():
            # A piped run whose answer could not be produced fails, with the cause (architecture
            # §7).
            print(f"relaybot: an answer could not be produced: {self._unanswered}", file=sys.stderr)
            return 1
        return 0

    async def _chat_moved(self, channel: str, old_chat_id: str, new_chat_id: str) -> None:
        """A chat moved (a Telegram group became a supergroup); the turn moved its history and
        the store's waiting messages: the queued ones move too."""
        log.info("%s:%s is %s from now on", channel, old_chat_id, new_chat_id)
        if self._dispatcher is not None:
            self._dispatcher.move(channel, old_chat_id, new_chat_id)

    def _start_failed(self, name: str, cause: str) -> int:
        first_line = cause.strip().splitlines()[0] if cause.strip() else "unknown error"
        print(f"relaybot: channel {name}: cannot start: {first_line}", file=sys.stderr)
        return 1

    async def _serve_channel(self, channel: Channel, console_only: bool) -> None:
        await channel.serve()
        if console_only:  # end of input ends a console-only run (architecture §7)
            self._input_ended = not self.stopping.is_set()
            self.stopping.set()

    async def _watch_signals(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """The first SIGINT/SIGTERM starts the graceful stop; a second one cuts the grace short
        (running answers end at once with the interrupted marker) instead of killing the
        process, so no cut answer is ever left looking complete. Reports started once the
        handlers are installed."""
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for signum in signals:
                name = signal.Signals(signum).name
                if not self.stopping.is_set():
                    log.info("received %s; finishing running answers, then stopping", name)
                    self.stopping.set()
                else:
                    log.warning("received %s again; interrupting running answers now", name)
                    if self._grace is not None:
                        self._grace.cancel()

    async def _shutdown(self, started: list[Channel]) -> None:
        assert self._dispatcher is not None
        with anyio.CancelScope(shield=True):
            self._dispatcher.close()
            grace = self._grace or anyio.CancelScope()
            grace.deadline = anyio.current_time() + SHUTDOWN_GRACE_SECS
            with grace:
                await self._dispatcher.wait_idle()
            self.turns.cancel_all()
            with anyio.move_on_after(DELIVERY_GRACE_SECS):
                await self._dispatcher.wait_idle()
            await self._stop_channels(started)

    @staticmethod
    async def _stop_channels(channels: list[Channel]) -> None:
        for channel in channels:
            try:
                await channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", channel.name)

    # -- inbound --------------------------------------------------------------------------

    def _inbound_for(self, name: str) -> InboundHandler:
        async def on_inbound(message: InboundMessage) -> None:
            await self._on_inbound(name, message)

        return on_inbound

    async def _on_inbound(self, name: str, message: InboundMessage) -> None:
        channel = self.channels[name]
        dispatcher = self._dispatcher
        assert dispatcher is not None
        if not self._access[name].allows(message):
            await channel.reply_finished(message.chat_id)
            return
        if not await self._store.mark_seen(name, message.update_ids):
            log.info("%s:%s: update delivered again; answered once", name, message.chat_id)
            await channel.reply_finished(message.chat_id)
            return
        if _command(message.text) == "/stop":  # also while stopping: it ends a running answer
            await self._stop_answer(channel, message)
            return
        # Commands queue like any message, so "/reset" acts after the answer that is running.
        # The message is kept in the store until its turn starts: one that arrives or still
        # waits when the daemon stops is answered after the next start.
        ticket = await self._store.add_waiting(message)
        if dispatcher.closed:
            log.info("%s:%s: message kept for after the restart", name, message.chat_id)
        elif not dispatcher.submit(channel, message, ticket):  # the queue is full
            await self._store.remove_waiting(ticket)
        else:
            return
        await channel.reply_finished(message.chat_id)

    async def _stop_answer(self, channel: Channel, message: InboundMessage) -> None:
        """``/stop``: cut the conversation's running answer short; say so when none runs."""
        try:
            if not self.turns.stop(conversation_key(channel.name, message)):
                await self._say(channel, message, NOTHING_TO_STOP)
        finally:
            await channel.reply_finished(message.chat_id)

    async def _say(
        self, channel: Channel, message: InboundMessage, text: str, *, reply: bool = False
    ) -> None:
        """A short notice in the message's chat and thread (redacted; failures logged), with
        ``reply`` as an answer to it."""
        try:
            await channel.send_message(
                message.chat_id,
                self.policy.redact(text),
                reply_to=message.message_id if reply else None,
                thread_id=message.thread_id,
            )
        except ChannelError as exc:
            log.warning("channel %s: could not send a notice: %s", channel.name, exc)

    async def _queue_waiting(self) -> list[WaitingMessage]:
        """Queue the messages a previous run left waiting, oldest first, ahead of any new one
        (architecture §5); returns the stale ones, which get a notice instead once the channels
        run."""
        assert self._dispatcher is not None
        stale_after = self.config.agent.stale_after_secs
        stale: list[WaitingMessage] = []
        for waiting in await self._store.waiting():
            channel = self.channels.get(waiting.message.channel)
            if channel is None:
                log.warning("dropping a message kept for the channel %s", waiting.message.channel)
                await self._store.remove_waiting(waiting.id)
            elif time.time() - waiting.received_at > stale_after:
                stale.append(waiting)
            elif not self._dispatcher.submit(channel, waiting.message, waiting.id):
                await self._store.remove_waiting(waiting.id)
        return stale

    async def _send_stale_notices(self, stale: list[WaitingMessage]) -> None:
        for waiting in stale:
            await self._store.remove_waiting(waiting.id)
            channel = self.channels[waiting.message.channel]
            await self._say(channel, waiting.message, _stale_notice(waiting), reply=True)

    async def _run_command(self, channel: Channel, message: InboundMessage, command: str) -> None:
        if command == "/reset":
            await self._store.reset(channel.name, message.chat_id, message.thread_id)
            text = "Conversation cleared."
        else:
            text = HELP_TEXT
        await self._say(channel, message, text)

    async def _run_turn(self, channel: Channel, message: InboundMessage) -> None:
        answered, notice = screen_images(
            message, max_bytes=self.config.agent.max_image_bytes, vision=self._vision
        )
        if notice is not None:
            await self._say(channel, message, notice)
        if answered is None:
            with anyio.CancelScope(shield=True):
                await channel.reply_finished(message.chat_id)
            return
        message = answered
        command = _command(message.text)
        if command in ("/start", "/help", "/reset"):
            try:
                await self._run_command(channel, message, command)
            finally:
                with anyio.CancelScope(shield=True):
                    await channel.reply_finished(message.chat_id)
            return
        try:
            outcome = await self.turns.run(channel, message)
            if outcome.outcome == "interrupted" and outcome.cause != SHUTDOWN_CAUSE:
                self._unanswered = self._unanswered or outcome.cause
            log.info(
                "reply in %s:%s: %s after %d round(s)",
                channel.name,
                message.chat_id,
                outcome.outcome,
                outcome.rounds,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await channel.reply_finished(message.chat_id)


def _stale_notice(waiting: WaitingMessage) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(waiting.received_at))
    return STALE_NOTICE.format(when=when)


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # closed
        return False


def _command(text: str) -> str | None:
    """``/reset@BotName args`` → ``/reset``; None when the text is not a command."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    return stripped.split()[0].split("@", 1)[0].lower()


async def serve(
    config: RelaybotConfig, *, storage_path: str | Path, handle_signals: bool = True
) -> int:
    """Run relaybot over ``config``; returns the exit code."""
    return await Daemon(config, storage_path=storage_path).run(handle_signals=handle_signals)
