"""The hook's verdict on a piece, off the event loop (architecture §1, §4 "The hook"): the I/O half.

Theory of operation
-------------------
The engine returns ``GuardPiece(piece_id, text)``; :func:`guard_piece` answers it with the event
to feed back. The ``on_message_sending`` hook is user code that may block, so it runs in a worker
thread, bounded by the policy's ``hook_timeout_secs``:

- it returns text: the policy redacts that output again (with the delivered history as context)
  → ``PieceGuarded(piece_id, redacted)``; it returns ``None`` → ``PieceGuarded(piece_id, None)``
  (the piece is cancelled);
- it raises, or does not answer in time: it fails closed → ``PieceWithheld(piece_id)`` (logged).
  The thread is abandoned; whatever it returns later is never used. It is a daemon thread, so
  a hook that never returns cannot keep the process alive past a shutdown.

With no hook configured the output is only redacted, on the loop, without a thread.

Delivery imports nothing from the policy: the driver is handed any object of the shape of
:class:`PiecePolicy`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

import anyio

from orchestrator.delivery.events import GuardPiece, PieceGuarded, PieceWithheld

__all__ = ["DEFAULT_HOOK_TIMEOUT_SECS", "PiecePolicy", "guard_piece"]

log = logging.getLogger(__name__)

DEFAULT_HOOK_TIMEOUT_SECS = 5.0
"""``policy.hook_timeout_secs`` by default (architecture §4 "The hook")."""


class PiecePolicy(Protocol):
    """What delivery needs of the reply's outbound policy (architecture §4)."""

    @property
    def has_hook(self) -> bool:
        """An ``on_message_sending`` hook is configured."""
        ...

    @property
    def hook_timeout_secs(self) -> float:
        """How long one call of the hook may take, in seconds."""
        ...

    def hook_piece(self, text: str) -> str | None:
        """Run the hook on one piece: its output (cut to the policy's maximum) or ``None`` (cancel).
        User code: called in a worker thread. Raises whatever makes the hook fail (its own
        exception, or an error for an output that is neither ``str`` nor ``None``)."""
        ...

    def redact_piece(self, text: str) -> str:
        """The hook's output redacted again, with the already-delivered history as context, and
        recorded as delivered. Called on the event loop, once per verdict used."""
        ...

    def redact_line(self, text: str) -> str:
        """A status line or notice, redacted on its own."""
        ...


async def guard_piece(
    policy: PiecePolicy, piece: GuardPiece, *, where: str
) -> PieceGuarded | PieceWithheld:
    """The verdict on ``piece`` (see the module docstring); ``where`` names the chat in logs.

    Cancelling it abandons the hook's thread; nothing is recorded as delivered."""
    if not policy.has_hook:
        return PieceGuarded(piece.piece_id, policy.redact_piece(piece.text))
    timeout = policy.hook_timeout_secs
    try:
        with anyio.fail_after(timeout):
            verdict = await _run_in_daemon_thread(policy.hook_piece, piece.text)
    except TimeoutError:
        log.error(
            "on_message_sending did not answer within %g s in %s; that piece is withheld",
            timeout,
            where,
        )
        return PieceWithheld(piece.piece_id)
    except Exception:
        log.exception("on_message_sending failed in %s; that piece is withheld", where)
        return PieceWithheld(piece.piece_id)
    if verdict is None:
        return PieceGuarded(piece.piece_id, None)
    return PieceGuarded(piece.piece_id, policy.redact_piece(verdict))


_T = TypeVar("_T")


async def _run_in_daemon_thread(func: Callable[[str], _T], arg: str) -> _T:
    """``func(arg)`` in a thread of its own, awaited without blocking the loop.

    Unlike a pooled worker thread, a daemon thread that never returns neither holds a worker
    nor delays the interpreter's exit. Cancelling the wait abandons the thread.

    Raises:
        Exception: whatever ``func`` raised.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():  # else the wait was cancelled: nobody reads the verdict
            outcome()

    def work() -> None:
        result: Callable[[], None]
        try:
            result = functools.partial(future.set_result, func(arg))
        except BaseException as exc:  # handed to the awaiting task
            result = functools.partial(future.set_exception, exc)
        try:
            loop.call_soon_threadsafe(settle, result)
        except RuntimeError:  # the loop is closed (shutdown): nobody waits any more
            pass

    threading.Thread(target=work, name="on_message_sending", daemon=True).start()
    return await future
