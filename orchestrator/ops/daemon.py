"""The daemon (architecture §7): start every channel, answer messages, stop gracefully.

Theory of operation
-------------------
``serve`` builds the providers, tools, store, policy and channels from a validated config and
starts every channel, each under a :class:`~orchestrator.ops.lifecycle.ChannelSupervisor`: a
channel that cannot start for a transient cause (server unreachable) is retried with backoff while
the others serve, and so is one whose connection is lost later (``/healthz`` shows it
``degraded``); a permanent cause (a rejected token) is one line naming the channel. When every
channel failed for a permanent cause the run ends with exit code 2 and one line per channel; a
channel merely unreachable at boot (its only one included) is retried for as long as the bot runs.
Then it waits for SIGINT/SIGTERM — or, when the console is the only channel (web pages aside), for
the end of its input — and stops gracefully; SIGHUP reloads the config file
(:mod:`orchestrator.ops.signals`, :mod:`orchestrator.ops.reload`).

Every message is kept in the store's waiting messages until its turn starts (architecture §5): the
messages queued behind a running answer at shutdown are answered after the next start, once; those
older than ``agent.stale_after_secs`` get a short notice instead. Every reply is recorded in flight
until it ends: after a hard kill (SIGKILL, a crash, power loss) the next start marks the cut reply
interrupted before any turn runs (:mod:`orchestrator.turn.cut_answers`); its question is not
answered again. A message is taken once per update id (the store keeps the ids seen), so a
redelivered update is not answered again. Images are screened when the message's turn comes
(:mod:`orchestrator.turn.images`: too large, or no vision, is one line to the user). ``/stop`` is
not queued: it cuts the running answer of its conversation short (architecture §3 "Stop"), and the
next waiting message runs.

With a shared store (``storage.url: postgresql://…``, architecture §9) several instances serve one
bot: the queue is the store's (:mod:`orchestrator.chats.shared_queue`), an update is taken by one
instance only, one turn at a time per conversation holds across them, what an instance that died
left waiting is taken over by another within ``storage.takeover_secs``, and ``/stop`` reaches the
instance answering. ``storage.retain_days`` prunes older history and round records at start and
hourly.

Every task has an owner: the root task group spans the whole run.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from channels.base import Channel, InboundHandler, InboundMessage
from channels.controls import ControlEvent
from channels.registry import build_channel
from config.models import RelaybotConfig
from config.store_url import parse_store_url, without_password
from orchestrator.chats.access import AccessControl
from orchestrator.chats.dispatch import Dispatcher
from orchestrator.chats.presses import ButtonPresses
from orchestrator.chats.shared_queue import SharedDispatcher
from orchestrator.metrics import Metrics
from orchestrator.ops.lifecycle import ChannelSupervisor, LosesOutput
from orchestrator.ops.ops_server import HttpEndpoint, ListsModels, OpsServer, parse_listen
from orchestrator.ops.process import keep_frozen
from orchestrator.ops.reload import plan_reload, read_for_reload
from orchestrator.ops.retention import prune_every_hour
from orchestrator.ops.signals import DELIVERY_GRACE_SECS, SHUTDOWN_GRACE_SECS, DaemonSignals
from orchestrator.ops.waiting import queue_waiting, send_stale_notices
from orchestrator.policy import OutboundPolicy, PolicyError
from orchestrator.store import ConversationStore, RoundRecord, Store, store_for
from orchestrator.store.sqlite_async import AsyncStore
from orchestrator.tools.tool_setup import build_registry, start_tools
from orchestrator.turn.answering import Answering, command_of
from orchestrator.turn.cut_answers import mark_cut_answers
from orchestrator.turn.provider_chain import ProviderChain
from orchestrator.turn.reply_stats import ReplyStats
from orchestrator.turn.runner import TurnRunner

__all__ = ["DELIVERY_GRACE_SECS", "SHUTDOWN_GRACE_SECS", "ChannelFactory", "Daemon", "serve"]

log = logging.getLogger(__name__)

ChannelFactory = Callable[[str, Any, InboundHandler], Channel]
"""Builds one channel from its name, config model and inbound handler (default:
:func:`channels.registry.build_channel`)."""


class Daemon(DaemonSignals):
    """One run of relaybot over a validated config.

    Args:
        config: the validated config.
        storage_path: the SQLite store's file (tests); default ``config.storage``'s URL.
        storage_url: a ``storage.url`` (``sqlite:///…`` or ``postgresql://…``); wins over
            ``storage_path``.
        channel_factory: builds each channel (tests pass one that sets short network timeouts).
        policy: the outbound policy (default: built from ``config.policy``).
        config_path: the file SIGHUP reads again (``None``: the embedded default, no reload).
    """

    def __init__(
        self,
        config: RelaybotConfig,
        *,
        storage_path: str | Path | None = None,
        storage_url: str | None = None,
        channel_factory: ChannelFactory = build_channel,
        policy: OutboundPolicy | None = None,
        config_path: str | Path | None = None,
    ) -> None:
        self.config = config
        self._config_path = config_path
        self._channel_factory = channel_factory
        if storage_url is None:
            path = storage_path if storage_path is not None else config.storage.path
            storage_url = config.storage.url or f"sqlite:///{path}"
        parse_store_url(storage_url)  # ValueError for a bad URL
        self._store_url = storage_url  # only ever shown through without_password
        # Everything on the event loop uses the async store; PostgreSQL connects in run().
        self._store: ConversationStore = store_for(storage_url, pool_size=config.storage.pool_size)
        self.policy = policy if policy is not None else OutboundPolicy.from_config(config.policy)
        self.metrics = Metrics()
        self.policy.redactor.observer = self.metrics.observe_redaction
        self.policy.redactor.overmask_observer = self.metrics.observe_overmask
        self._providers = ProviderChain(config, self.metrics)
        self._replies = ReplyStats()
        self.tools = build_registry(config.agent)
        self.turns = TurnRunner(
            agent=config.agent,
            rounds=self._providers.rounds,
            tools=self.tools,
            store=self._store,
            policies=self.policy,
            on_round=self._on_round,
            on_moved=self._chat_moved,
            chains=lambda alias: self._providers.rounds_for(self.config, alias),
        )
        self._answering = Answering(
            lambda: self.config,
            self._store,
            self.policy,
            self.turns,
            self.metrics,
            lambda: self._providers.vision,
            self._replies,
        )
        self._presses = ButtonPresses(self.turns, self._store, self._on_inbound)
        self.metrics.health = lambda: {n: s.health() for n, s in self.supervisors.items()}
        self.channels: dict[str, Channel] = {}
        self.supervisors: dict[str, ChannelSupervisor] = {}
        self._tg: TaskGroup | None = None
        self._reloading = anyio.Lock()
        self._access: dict[str, AccessControl] = {}
        self._dispatcher: Dispatcher | SharedDispatcher | None = None
        self.stopping = anyio.Event()
        self._serving = anyio.Event()  # set once started: from then on a SIGHUP reloads
        self._grace: anyio.CancelScope | None = None  # running turns' time after a stop
        self._input_ended = False  # a console-only run ended with its input
        self._output_gone = False  # ... because the reader of its stdout went away

    @property
    def store(self) -> Store:
        """The blocking SQLite store (start-up, shutdown and tests); raises ``RuntimeError``
        for a PostgreSQL store."""
        if not isinstance(self._store, AsyncStore):
            raise RuntimeError("the store is PostgreSQL: use the async store")
        return self._store.sync

    async def run(self, *, handle_signals: bool = True) -> int:
        """Serve until stopped; returns the process exit code: 0; 1 when the store cannot be
        opened, the hook's worker processes cannot start, a ``require_approval`` name is no
        tool's or ``server.listen`` cannot listen, or when a console-only run ended with its
        piped input and an answer was not produced, or with its stdout's reader gone; 2 when
        every channel failed for good."""
        hooks = self.policy.hooks
        try:
            if hooks is not None:  # its workers outlive the drain: they stop in ``finally``
                try:
                    await hooks.start()
                except PolicyError as exc:
                    print(f"relaybot: {exc}", file=sys.stderr)
                    return 1
            try:
                await self._store.open()
            except Exception as exc:  # psycopg.Error, SchemaTooNew: one line
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                first = without_password(first, self._store_url)
                print(f"relaybot: storage: cannot open the store: {first}", file=sys.stderr)
                return 1
            async with anyio.create_task_group() as tg:
                self._tg = tg
                code = await self._run(tg, handle_signals)
                tg.cancel_scope.cancel()
            return code
        finally:
            await self._providers.aclose()
            with anyio.CancelScope(shield=True):
                await self._store.aclose()
                if hooks is not None:
                    await hooks.aclose()

    async def _run(self, tg: TaskGroup, handle_signals: bool) -> int:
        self._grace = anyio.CancelScope()  # its deadline is set when the stop begins
        store = self._store
        shared: SharedDispatcher | None = None
        if store.shared:
            takeover = self.config.storage.takeover_secs
            shared = SharedDispatcher(
                tg, store, self.channels, self._answering.run, takeover_secs=takeover, held=True
            )
            self._dispatcher = shared
        else:
            self._dispatcher = Dispatcher(tg, self._answering.run, store.remove_waiting, held=True)
        tools_error = await start_tools(self.config.agent, self.tools, tg)
        if tools_error is not None:
            print(f"relaybot: {tools_error}", file=sys.stderr)
            return 1
        self.metrics.queued.set_function(lambda: self._dispatcher.queued if self._dispatcher else 0)
        self.metrics.active_turns.set_function(lambda: self._answering.active)
        unbuilt: dict[str, str] = {}
        for name, channel_config in self.config.channels.items():
            try:
                self._build_channel(name, channel_config)
            except NotImplementedError as exc:
                unbuilt[name] = str(exc)
        stale = await queue_waiting(self._store, self._dispatcher, self.channels, self.config.agent)
        if handle_signals:
            # Before any channel starts: a Ctrl-C at the console's first prompt is the console's
            # (its line kept, or the answer stopped), never Python's KeyboardInterrupt.
            await tg.start(self._watch_signals)
            # SIGHUP too: its default action would end the process (a terminal closed at the
            # first prompt sends one); one received during start-up reloads once all is up.
            await tg.start(self._watch_reload)
        # The ops server listens before the channels start, so the addresses of the channels
        # it serves are printed before the console's first prompt.
        server: OpsServer | None = None
        if self.config.server.listen:
            host, port = parse_listen(self.config.server.listen)
            server = OpsServer(self.metrics, host=host, port=port, endpoints=self._http_endpoints)
            try:
                await server.start()
            except OSError as exc:
                why = os.strerror(exc.errno) if exc.errno else str(exc)  # asyncio rewords it
                print(
                    f"relaybot: server.listen {self.config.server.listen}: cannot listen: {why}",
                    file=sys.stderr,
                )
                return 1
            log.info("metrics on http://%s:%d/metrics", server.host, server.port)
            self._tell_addresses(server)
        for name in self.channels:
            await self._start_channel(tg, name)
        if not any(s.ever_up or s.state == "retrying" for s in self.supervisors.values()):
            # Every channel failed for good (a rejected token, no adapter): nothing will serve.
            # One merely unreachable at boot is retried for as long as the bot runs.
            await self._stop_channels()
            causes = {**unbuilt, **{n: s.cause or "" for n, s in self.supervisors.items()}}
            for name, cause in causes.items():
                self._start_failed(name, cause)
            if server is not None:
                await server.stop()
            return 2  # a config error (a token, a kind): restarting would not mend it
        for name, cause in unbuilt.items():
            log.error("channel %s: cannot start: %s", name, cause)
        self._serving.set()
        if handle_signals:  # the process is the daemon's: its start-up heap is frozen
            tg.start_soon(keep_frozen)
        if shared is None:
            # The only instance on the store: every reply still in flight was cut by a hard
            # kill of the previous run; marked before any turn runs (architecture §7 "Store").
            await mark_cut_answers(store, self.channels)
        self._dispatcher.release()
        if shared is not None:
            tg.start_soon(shared.sweep)
            tg.start_soon(self._follow_stop_requests)
        if self.config.storage.retain_days is not None:
            tg.start_soon(prune_every_hour, self._store, self.config.storage.retain_days)
        await send_stale_notices(self._store, self.channels, self._answering, stale)
        log.info("relaybot running with channels: %s", ", ".join(self.channels))
        await self.stopping.wait()
        await self._shutdown()
        if server is not None:
            with anyio.CancelScope(shield=True):
                await server.stop()
        if self._input_ended and self._answering.unanswered and not _stdin_is_terminal():
            # A piped run whose answer could not be produced fails, with the cause (architecture
            # §7).
            print(
                f"relaybot: an answer could not be produced: {self._answering.unanswered}",
                file=sys.stderr,
            )
            return 1
        return 1 if self._input_ended and self._output_gone else 0  # `| head`: as cli.py's EPIPE

    async def _chat_moved(self, channel: str, old_chat_id: str, new_chat_id: str) -> None:
        """A chat moved (a Telegram group became a supergroup); the turn moved its history and
        the store's waiting messages: the queued ones move too."""
        log.info("%s:%s is %s from now on", channel, old_chat_id, new_chat_id)
        if self._dispatcher is not None:
            self._dispatcher.move(channel, old_chat_id, new_chat_id)

    async def _follow_stop_requests(self) -> None:
        """``/stop`` asked at another instance: stop the turn if it runs here."""
        async for key in self._store.stop_requests():
            if self.turns.stop(key):
                log.info("%s:%s: answer stopped at another instance's request", key[0], key[1])

    def _start_failed(self, name: str, cause: str) -> int:
        first_line = cause.strip().splitlines()[0] if cause.strip() else "unknown error"
        print(f"relaybot: channel {name}: cannot start: {first_line}", file=sys.stderr)
        return 1

    # -- channels ---------------------------------------------------------------------------

    def _build_channel(self, name: str, channel_config: Any) -> Channel:
        """Build channel ``name`` (raises ``NotImplementedError`` for a kind without adapter)."""
        channel = self._channel_factory(name, channel_config, self._inbound_for(name))
        self._access[name] = AccessControl(
            name, channel_config.allowed_users, channel_config.respond_in_groups
        )
        channel.state = self._store.channel_state(name)
        channel.max_image_bytes = self.config.agent.max_image_bytes
        channel.max_document_bytes = self.config.agent.max_document_bytes
        channel.max_audio_bytes = self.config.agent.max_audio_bytes
        channel.approval_timeout_secs = self.config.agent.approval_timeout_secs
        channel.write_observer = self.metrics.observe_write

        async def on_control(event: ControlEvent) -> str | None:
            return await self._presses.press(channel, event)

        channel.on_control = on_control
        if isinstance(channel, ListsModels):
            channel.served_models = self._model_names()
        self.channels[name] = channel
        return channel

    def _model_names(self) -> tuple[str, ...]:
        """What an API channel lists: the aliases of ``agent.models`` when configured (a
        request naming one is answered by it), else the models of the chain, first first."""
        config = self.config
        if config.agent.models:
            return tuple(config.agent.models)
        names = [config.providers[p].model for p in config.agent.providers if p in config.providers]
        return tuple(dict.fromkeys(names))

    async def _start_channel(self, tg: TaskGroup, name: str) -> None:
        """Start channel ``name`` under a supervisor; returns after its first start attempt."""
        supervisor = ChannelSupervisor(
            self.channels[name],
            on_input_ended=self._input_end,
            on_restart=lambda n: self.metrics.channel_restarts.labels(n).inc(),
        )
        self.supervisors[name] = supervisor
        await tg.start(supervisor.run)

    def _http_endpoints(self) -> list[HttpEndpoint]:
        """The running channels served by the ops server (architecture §7 "Metrics")."""
        return [c for c in self.channels.values() if isinstance(c, HttpEndpoint)]

    def _tell_addresses(self, server: OpsServer) -> None:
        """One line on stderr per channel served over HTTP: where to open it."""
        host = f"[{server.host}]" if ":" in server.host else server.host
        for name, channel in self.channels.items():
            if isinstance(channel, HttpEndpoint):
                url = f"http://{host}:{server.port}{channel.http_prefix}"
                print(f"relaybot: channel {name} ({channel.config.kind}) at {url}", file=sys.stderr)

    def _input_end(self, channel: Channel) -> None:
        """A channel's input ended (the console: end of stdin); when only console channels
        run, beside the local web page at most, that ends the run (architecture §7)."""
        if all(c.config.kind in ("console", "web") for c in self.channels.values()):
            self._input_ended = not self.stopping.is_set()
            self._output_gone = isinstance(channel, LosesOutput) and channel.output_gone
            self.stopping.set()

    async def _stop_channels(self, names: list[str] | None = None) -> None:
        for name in list(self.supervisors) if names is None else names:
            supervisor = self.supervisors.get(name)
            if supervisor is not None:
                await supervisor.stop()

    def _on_round(self, record: RoundRecord) -> None:
        self.metrics.observe_round(record)
        self._replies.observe_round(record)

    # -- reload (SIGHUP, orchestrator.ops.signals) ------------------------------------------

    async def reload(self) -> bool:
        """Apply the config file as it is now; False (and one log line) when it is not valid
        or there is no file. Reloads run one at a time."""
        async with self._reloading:
            if self._config_path is None:
                log.warning("reload: no config file (the embedded default runs); nothing read")
                return False
            new = await anyio.to_thread.run_sync(read_for_reload, self._config_path)
            if isinstance(new, str):
                log.error("reload: keeping the running config: %s", new)
                return False
            if self.stopping.is_set() or self._tg is None:
                return False
            plan = plan_reload(self.config, new)
            log.info("reload: %s", plan.summary())
            old = self.config
            self.config = new.model_copy(
                update={
                    "storage": old.storage,
                    "server": old.server,
                    "policy": old.policy,
                    "agent": old.agent.model_copy(update={"providers": new.agent.providers}),
                }
            )
            if plan.chain_changed:
                self._providers.reconfigure(old, self.config)
            gone = [*plan.channels_removed, *plan.channels_changed]
            await self._stop_channels(gone)
            for name in gone:
                self.supervisors.pop(name, None)
                self.channels.pop(name, None)
                self._access.pop(name, None)
            for name in (*plan.channels_added, *plan.channels_changed):
                try:
                    self._build_channel(name, self.config.channels[name])
                except NotImplementedError as exc:
                    log.error("channel %s: cannot start: %s", name, exc)
                    continue
                await self._start_channel(self._tg, name)
            return True

    # -- inbound --------------------------------------------------------------------------

    def _inbound_for(self, name: str) -> InboundHandler:
        async def on_inbound(message: InboundMessage) -> None:
            await self._on_inbound(name, message)

        return on_inbound

    async def _on_inbound(self, name: str, message: InboundMessage) -> None:
        channel = self.channels[name]
        dispatcher = self._dispatcher
        assert dispatcher is not None
        access = self._access[name]
        if not access.allows(message):
            notice = access.refusal_notice(message)
            if notice is not None:  # once per sender: the id the admin needs (architecture §3)
                access.told(message)
                await self._answering.say(channel, message, notice)
            await channel.reply_finished(message.chat_id)
            return
        if not await self._store.mark_seen(name, message.update_ids):
            log.info("%s:%s: update delivered again; answered once", name, message.chat_id)
            await channel.reply_finished(message.chat_id)
            return
        # /stop also while stopping: it ends a running answer
        if command_of(message.text, channel.command_prefix) == "/stop":
            await self._answering.stop(channel, message)
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


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # closed
        return False


async def serve(
    config: RelaybotConfig,
    *,
    storage_path: str | Path | None = None,
    handle_signals: bool = True,
    config_path: str | Path | None = None,
) -> int:
    """Run relaybot over ``config`` (read from ``config_path``, which SIGHUP reads again; its
    store: ``storage.url``, else ``storage_path``, else ``storage.path``); returns the exit
    code."""
    try:
        daemon = Daemon(config, storage_path=storage_path, config_path=config_path)
    except (OSError, sqlite3.Error) as exc:  # the SQLite file is opened here: one line, exit 2
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(
            f"relaybot: storage.path: cannot open the store: {first} (give the service a "
            "writable state directory, $STATE_DIRECTORY, or an absolute storage.path)",
            file=sys.stderr,
        )
        return 2
    return await daemon.run(handle_signals=handle_signals)
