"""One channel's life in the daemon (architecture §7): start, retry, serve, restart, stop.

Theory of operation
-------------------
:class:`ChannelSupervisor` owns one :class:`~channels.base.Channel`. Its :meth:`run` (a task of
the daemon's task group, started with ``task_group.start``) makes the first start attempt before
it reports started, so the daemon knows after its first pass which channels came up:

* a start that fails for a **permanent** cause (``ChannelStartError.permanent``: a rejected
  token; or the kind has no adapter) ends the supervisor: state ``failed``, never retried;
* a **transient** cause (server unreachable, 5xx, a timeout) is retried with backoff
  (:data:`RETRY_FIRST_SECS` doubling to :data:`RETRY_MAX_SECS`) while the other channels serve;
  ``/healthz`` shows the channel ``degraded`` with the cause meanwhile;
* once up, the channel's :meth:`~channels.base.Channel.serve` runs; when it raises (the
  connection was lost for good) the channel is stopped and started again the same way. A serve
  that ends by itself is the end of the channel's input (the console: end of stdin, or a
  reader of stdout that went away, :class:`LosesOutput`): the supervisor reports it through
  ``on_input_ended`` and ends.

:meth:`stop` (shutdown, or a reload that removes or changes the channel) cancels any retry and
stops the channel within :data:`STOP_BOUND_SECS`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal, Protocol, runtime_checkable

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from channels.base import Channel, ChannelHealth
from channels.errors import ChannelError, ChannelStartError

__all__ = [
    "RETRY_FIRST_SECS",
    "RETRY_MAX_SECS",
    "STOP_BOUND_SECS",
    "ChannelSupervisor",
    "LosesOutput",
    "SupervisorState",
    "retry_delay",
]

log = logging.getLogger(__name__)

RETRY_FIRST_SECS = 1.0
"""The first wait before a failed channel is started again, in seconds; it doubles."""
RETRY_MAX_SECS = 60.0
"""The longest wait between two start attempts, in seconds."""
STOP_BOUND_SECS = 5.0
"""How long stopping one channel may take (a long poll being cut, a socket closing), seconds."""

SupervisorState = Literal["starting", "up", "retrying", "failed", "ended", "stopped"]


def retry_delay(failures: int, *, first: float = RETRY_FIRST_SECS) -> float:
    """Seconds before the next start after ``failures`` (≥ 1) failed ones in a row: ``first``,
    doubling, at most :data:`RETRY_MAX_SECS`."""
    return float(min(first * 2.0 ** max(failures - 1, 0), RETRY_MAX_SECS))


@runtime_checkable
class LosesOutput(Protocol):
    """A channel whose output can go away for good (the console's stdout: its reader closed the
    pipe); its :meth:`~channels.base.Channel.serve` then ends as at the end of its input, with
    :attr:`output_gone` set."""

    output_gone: bool


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ChannelSupervisor:
    """Starts ``channel`` and keeps it up (module docstring).

    Args:
        channel: the channel (built, not started).
        on_input_ended: called when the channel's serve ended by itself (end of input).
        on_restart: called with the channel's name before each start attempt after a failure
            (metrics).
        first_retry_secs: the first backoff, in seconds (:data:`RETRY_FIRST_SECS`).
    """

    def __init__(
        self,
        channel: Channel,
        *,
        on_input_ended: Callable[[Channel], None] | None = None,
        on_restart: Callable[[str], None] | None = None,
        first_retry_secs: float = RETRY_FIRST_SECS,
    ) -> None:
        self.channel = channel
        self.state: SupervisorState = "starting"
        self.cause: str | None = None
        """The last start or serve failure, one line (never a token: adapters leave it out)."""
        self.ever_up = False
        self._on_input_ended = on_input_ended
        self._on_restart = on_restart
        self._first_retry = first_retry_secs
        self._failures = 0
        self._next_retry: float | None = None  # anyio.current_time() of the next attempt
        self._scope = anyio.CancelScope()

    @property
    def name(self) -> str:
        return self.channel.name

    @property
    def up(self) -> bool:
        return self.state == "up"

    def health(self) -> ChannelHealth:
        """``ok``/``degraded`` as the channel says while it is up; ``degraded`` with the cause
        while it retries or failed."""
        if self.state == "up":
            return self.channel.health()
        if self.state in ("ended", "stopped"):
            return ChannelHealth()
        if self.state == "starting":
            return ChannelHealth("degraded", "starting")
        if self.state == "failed":
            return ChannelHealth("degraded", f"cannot start: {self.cause}")
        wait = ""
        if self._next_retry is not None:
            wait = f"; retrying in {max(self._next_retry - anyio.current_time(), 0.0):.0f} s"
        return ChannelHealth("degraded", f"{self.cause}{wait}")

    async def run(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """Start, retry, serve and restart until stopped (module docstring). Reports started
        after the first start attempt, whatever its result."""
        with self._scope:
            reported = False
            try:
                while True:
                    started = await self._start_once()
                    if not reported:
                        task_status.started()
                        reported = True
                    if self.state == "failed":
                        return
                    if not started:
                        await self._wait_to_retry()
                        continue
                    if not await self._serve():
                        return
                    await self._wait_to_retry()
            finally:
                if not reported:
                    task_status.started()

    async def _start_once(self) -> bool:
        if self._failures and self._on_restart is not None:
            self._on_restart(self.name)
        self.state = "starting" if not self._failures else "retrying"
        try:
            await self.channel.start()
        except NotImplementedError as exc:
            return self._failed(_one_line(exc), permanent=True)
        except ChannelStartError as exc:
            return self._failed(_one_line(exc), permanent=exc.permanent)
        except (ChannelError, OSError) as exc:
            return self._failed(_one_line(exc), permanent=False)
        self.state, self.cause, self.ever_up = "up", None, True
        self._failures, self._next_retry = 0, None
        log.info("channel %s: up", self.name)
        return True

    def _failed(self, cause: str, *, permanent: bool) -> bool:
        self.cause = cause
        if permanent:
            self.state = "failed"
            log.error("channel %s: cannot start: %s", self.name, cause)
            return False
        self._failures += 1
        self.state = "retrying"
        delay = retry_delay(self._failures, first=self._first_retry)
        self._next_retry = anyio.current_time() + delay
        log.warning("channel %s: cannot start: %s; retrying in %g s", self.name, cause, delay)
        return False

    async def _wait_to_retry(self) -> None:
        if self._next_retry is None:  # a serve failure: the first backoff
            self._failures += 1
            delay = retry_delay(self._failures, first=self._first_retry)
            self._next_retry = anyio.current_time() + delay
        await anyio.sleep(max(self._next_retry - anyio.current_time(), 0.0))

    async def _serve(self) -> bool:
        """Serve the channel; False when its input ended (the supervisor ends), True when the
        connection was lost (it is started again)."""
        try:
            await self.channel.serve()
        except (ChannelError, OSError) as exc:
            self.cause = f"disconnected: {_one_line(exc)}"
            self.state = "retrying"
            log.warning("channel %s: %s; starting it again", self.name, self.cause)
            await self._stop_channel()
            return True
        self.state = "ended"
        if self._on_input_ended is not None:
            self._on_input_ended(self.channel)
        return False

    async def stop(self) -> None:
        """Cancel any retry, stop the channel (bounded by :data:`STOP_BOUND_SECS`). Idempotent."""
        self._scope.cancel()
        previous, self.state = self.state, "stopped"
        if previous in ("up", "ended", "retrying", "starting"):
            await self._stop_channel()

    async def _stop_channel(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_BOUND_SECS) as bound:
            try:
                await self.channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", self.name)
        if bound.cancelled_caught:
            log.warning("channel %s: stopping took over %g s; left", self.name, STOP_BOUND_SECS)
