"""The daemon's signals (architecture §7 "Process", "Reload"): SIGHUP reloads the config file;
the first SIGINT/SIGTERM starts the graceful stop and a second cuts its grace short; SIGINT at a
terminal (Ctrl-C) is offered to the channels first. The stop (:meth:`DaemonSignals._shutdown`)
takes no new message, lets running answers finish for up to :data:`SHUTDOWN_GRACE_SECS`, then
cuts their model work (each reply ends with the interrupted marker) and gives their replies
:data:`DELIVERY_GRACE_SECS` to land, then stops the channels. SIGHUP reads the config file again
(:mod:`orchestrator.ops.reload`): when it validates, channels and providers that were added,
removed or changed are stopped and started, the others keep their running answers; otherwise the
running config stays and one line says why.

:class:`DaemonSignals` is mixed into :class:`~orchestrator.ops.daemon.Daemon`, which provides
the state the handlers act on (its task group, its stopping event, the grace of running
answers, its channels and :meth:`~orchestrator.ops.daemon.Daemon.reload`).
"""

from __future__ import annotations

import gc
import logging
import signal

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskGroup, TaskStatus

from channels.base import Channel
from orchestrator.chats.dispatch import Dispatcher
from orchestrator.chats.shared_queue import SharedDispatcher
from orchestrator.ops.process import refreeze, take_held_hangup
from orchestrator.turn.runner import TurnRunner

__all__ = ["DELIVERY_GRACE_SECS", "SHUTDOWN_GRACE_SECS", "DaemonSignals"]

log = logging.getLogger("orchestrator.ops.daemon")

SHUTDOWN_GRACE_SECS = 30.0
"""How long running turns may go on after SIGINT/SIGTERM, in seconds."""
DELIVERY_GRACE_SECS = 10.0
"""After cutting the model work, how long interrupted replies may take to reach the chat."""


class DaemonSignals:
    """The signal watchers of the daemon (module docstring)."""

    _tg: TaskGroup | None
    _grace: anyio.CancelScope | None
    stopping: anyio.Event
    _serving: anyio.Event
    channels: dict[str, Channel]

    _dispatcher: Dispatcher | SharedDispatcher | None
    turns: TurnRunner

    async def reload(self) -> bool:
        raise NotImplementedError  # the daemon's

    async def _stop_channels(self, names: list[str] | None = None) -> None:
        raise NotImplementedError  # the daemon's

    async def _watch_reload(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """SIGHUP reads the config file again (:mod:`orchestrator.ops.reload`); one received while
        the daemon starts, once it has started (the watcher starts before any channel). Once it
        stops watching (it is stopping), a SIGHUP does nothing: its default action would end the
        process in the middle of its stop (a closed terminal sends one, which may come after the
        failed read that ended the console; a no-op handler, not ``SIG_IGN``, which children
        would inherit)."""
        try:
            with anyio.open_signal_receiver(signal.SIGHUP) as signals:
                task_status.started()
                if take_held_hangup():  # one came while the process started
                    await self._reload_once_serving()
                async for _ in signals:
                    await self._reload_once_serving()
        finally:
            signal.signal(signal.SIGHUP, _ignore_signal)

    async def _reload_once_serving(self) -> None:
        """Start a reload once the daemon has started (at once when it has), unless stopping."""
        await self._serving.wait()
        if self._tg is not None and not self.stopping.is_set():
            self._tg.start_soon(self._reload_and_refreeze)

    async def _reload_and_refreeze(self) -> None:
        """A reload; then, while the heap is kept frozen, what the reload replaced is freed at
        once (:func:`~orchestrator.ops.process.refreeze`), not within the hour."""
        if await self.reload() and gc.get_freeze_count():
            refreeze()

    async def _watch_signals(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """The first SIGINT/SIGTERM starts the graceful stop; a second one cuts the grace short
        (running answers end at once with the interrupted marker) instead of killing the
        process, so no cut answer is ever left looking complete. Reports started once the
        handlers are installed."""
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for signum in signals:
                if signum == signal.SIGINT and await self._offer_interrupt():
                    continue
                name = signal.Signals(signum).name
                if not self.stopping.is_set():
                    log.info("received %s; finishing running answers, then stopping", name)
                    self.stopping.set()
                else:
                    log.warning("received %s again; interrupting running answers now", name)
                    if self._grace is not None:
                        self._grace.cancel()

    async def _offer_interrupt(self) -> bool:
        """SIGINT is Ctrl-C at a terminal: each channel may take it first (the console stops its
        running answer, architecture §3 "Stop"). True when one did: the daemon goes on. Once
        the daemon is stopping, SIGINT is a stop signal only."""
        if self.stopping.is_set():
            return False
        for channel in self.channels.values():
            try:
                if await channel.interrupt():
                    return True
            except Exception:
                log.exception("channel %s: Ctrl-C not handled", channel.name)
        return False

    async def _shutdown(self) -> None:
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
            await self._stop_channels()


def _ignore_signal(signum: int, frame: object) -> None:
    """A signal handler that does nothing."""
