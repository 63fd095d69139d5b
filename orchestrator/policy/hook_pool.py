"""The ``on_message_sending`` hook's worker processes (architecture §4 "The hook"): parent side.

Theory of operation
-------------------
A hook is admin code. Run in a thread of the bot's process, a hook that holds the GIL (a
catastrophically backtracking ``re.search`` is one C call) froze the event loop and with it
every chat, and the timeout that should have ended it could not fire: the loop that would fire
it was the one frozen. So the event loop never runs hook code: :class:`HookWorkers` keeps up to
``workers`` processes of :mod:`orchestrator.policy.hook_worker`, each of which imports the hook
by its path and answers one piece at a time over length-prefixed JSON on its stdin and stdout.

- :meth:`HookWorkers.call` takes an idle worker (waiting while all ``workers`` are busy; a
  worker that died or was killed is replaced by a fresh one started in the caller's task), sends
  the piece and awaits the answer on the event loop, which goes on serving every other chat;
- the parent enforces ``hook_timeout_secs``: at the timeout the worker is killed (SIGKILL: a
  GIL-holding or signal-ignoring hook cannot refuse it) and :class:`HookTimedOut` raised; the
  caller fails closed. A cancelled call kills its worker too (its answer would be nobody's);
- a hook that raises leaves its worker usable; a worker that exits mid-call is a
  :class:`HookFailed`.

The timeout bounds the hook's call alone, not the wait for a free worker nor a worker's
start-up (an import may be slow). Each chat's reply has at most one piece at the hook at a time
(architecture §3), so with two or more workers one chat's hung hook never makes another chat
wait; and however many are hung, each frees its worker within the timeout.

:meth:`HookWorkers.start` starts every worker and raises :class:`PolicyError` with the import's
message when the hook cannot be loaded; :meth:`HookWorkers.aclose` (after the daemon's drain)
kills every worker and reaps it. Workers also die with the bot's process if it is killed
(``PR_SET_PDEATHSIG``, Linux) or at the end of their stdin.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from orchestrator.policy.errors import HookFailed, HookTimedOut, PolicyError
from orchestrator.policy.hook_frames import FRAME_HEADER, decode_frame_length, encode_frame

__all__ = ["DEFAULT_HOOK_WORKERS", "WORKER_START_TIMEOUT_SECS", "HookWorkers"]

log = logging.getLogger(__name__)

DEFAULT_HOOK_WORKERS = 2
"""``policy.hook_workers`` by default: one chat's hung hook leaves another chat a worker."""
WORKER_START_TIMEOUT_SECS = 60.0
"""How long a worker may take to start and import the hook, in seconds."""
_KEY = "policy.on_message_sending"
_PIPE_ERRORS = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    OSError,
    ValueError,  # a malformed frame or JSON
)


class _Worker:
    """One worker process and the buffered reader of its stdout."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one frame and read the answer. Raises one of ``_PIPE_ERRORS``."""
        await self._stdin.send(encode_frame(message))
        header = await self._stdout.receive_exactly(FRAME_HEADER.size)
        body = await self._stdout.receive_exactly(decode_frame_length(header))
        message = json.loads(body)
        if not isinstance(message, dict):
            raise ValueError("a frame is a JSON object")
        return message

    async def kill(self) -> None:
        """SIGKILL the process (if still running) and reap it; shielded from cancellation."""
        with anyio.CancelScope(shield=True):
            try:
                self.process.kill()
            except ProcessLookupError:
                pass
            await self.process.aclose()


class HookWorkers:
    """Up to ``workers`` processes running the hook named by ``path`` (see the module docstring).

    Args:
        path: ``"package.module:function"``.
        workers: how many pieces may be at the hook at once (``policy.hook_workers``).
        timeout_secs: how long one call may take, in seconds (``policy.hook_timeout_secs``).
        start_timeout_secs: how long a worker may take to start and import the hook, seconds.

    Usable as ``async with`` (:meth:`start`, then :meth:`aclose`).
    """

    def __init__(
        self,
        path: str,
        *,
        workers: int = DEFAULT_HOOK_WORKERS,
        timeout_secs: float = 5.0,
        start_timeout_secs: float = WORKER_START_TIMEOUT_SECS,
    ) -> None:
        if workers < 1:
            raise ValueError("at least one hook worker")
        self.path = path
        self.workers = workers
        self.timeout_secs = timeout_secs
        self.start_timeout_secs = start_timeout_secs
        self._slots: anyio.Semaphore | None = None
        self._idle: list[_Worker] = []
        self._alive: set[_Worker] = set()
        self._closed = False
        self.replaced = 0
        """Workers killed at a timeout or a cancellation, or found dead (a count, for tests)."""

    async def start(self) -> None:
        """Start every worker.

        Raises:
            PolicyError: a worker could not import the hook (the message says why), did not
                start within ``start_timeout_secs``, or exited before it was ready.
        """
        self._slots = anyio.Semaphore(self.workers)
        self._closed = False
        for _ in range(self.workers):
            self._idle.append(await self._spawn())

    async def call(self, channel: str, chat_id: str, text: str) -> str | None:
        """The hook's verdict on one piece: its output (already cut to the maximum) or ``None``.

        Waits for a free worker (starting one if a worker was lost), then at most
        ``timeout_secs`` for the answer. Cancelling it kills the worker that had the piece.

        Raises:
            HookTimedOut: no answer within ``timeout_secs``; the worker was killed.
            HookFailed: the hook raised or returned neither ``str`` nor ``None``, the worker
                died, a new worker could not start, or the workers are not running.
        """
        if self._slots is None or self._closed:
            raise HookFailed("the hook's worker processes are not running")
        async with self._slots:
            worker = self._idle.pop() if self._idle else await self._replacement()
            answer: dict[str, Any] | None = None
            try:
                with anyio.move_on_after(self.timeout_secs):
                    answer = await worker.ask(
                        {"channel": channel, "chat_id": chat_id, "text": text}
                    )
            except _PIPE_ERRORS as exc:  # it died mid-call (os._exit, a crash, the OOM killer)
                raise HookFailed(
                    f"the hook's worker process exited mid-call ({type(exc).__name__})"
                ) from exc
            finally:
                if answer is not None and not self._closed:
                    self._idle.append(worker)
                else:
                    await self._discard(worker)
            if answer is None:
                raise HookTimedOut(self.timeout_secs)
        if "error" in answer:
            raise HookFailed(str(answer["error"]), str(answer.get("trace", "")))
        verdict = answer.get("text")
        if verdict is not None and not isinstance(verdict, str):
            raise HookFailed(f"the hook's worker answered {type(verdict).__name__}")
        return verdict

    async def aclose(self) -> None:
        """Kill and reap every worker; later calls raise :class:`HookFailed`. Idempotent."""
        self._closed = True
        self._idle.clear()
        for worker in list(self._alive):
            await self._discard(worker)

    async def __aenter__(self) -> HookWorkers:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers alive now (for tests and diagnostics)."""
        return sorted(w.process.pid for w in self._alive)

    async def _replacement(self) -> _Worker:
        try:
            return await self._spawn()
        except PolicyError as exc:
            raise HookFailed(f"a new worker could not start: {exc.message}") from exc

    async def _discard(self, worker: _Worker) -> None:
        if worker in self._alive:
            self._alive.discard(worker)
            if not self._closed:
                self.replaced += 1
                log.warning(
                    "on_message_sending's worker process %d ended; a new one starts when needed",
                    worker.process.pid,
                )
        await worker.kill()

    async def _spawn(self) -> _Worker:
        process = await anyio.open_process(
            [sys.executable, "-m", "orchestrator.policy.hook_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the hook's prints and the worker's own failures: the bot's stderr
        )
        worker = _Worker(process)
        self._alive.add(worker)
        hello = {"path": self.path, "sys_path": sys.path}
        answer: dict[str, Any] | None = None
        try:
            with anyio.move_on_after(self.start_timeout_secs):
                answer = await worker.ask(hello)
        except _PIPE_ERRORS:
            answer = {"error": "its worker process exited before it was ready"}
        finally:
            if answer is None or "ready" not in answer:
                self._alive.discard(worker)
                await worker.kill()
        if answer is None:
            raise PolicyError(
                _KEY, f"its worker did not start within {self.start_timeout_secs:g} s"
            )
        if "ready" not in answer:
            raise PolicyError(_KEY, str(answer.get("error", "its worker failed to start")))
        return worker
