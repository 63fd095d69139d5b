"""The hook's verdict on a piece, off the event loop (DESIGN §1, §4 "The hook"): the I/O half.

Theory of operation
-------------------
The engine returns ``GuardPiece(piece_id, text)``; :func:`guard_piece` answers it with the event
to feed back. The ``on_message_sending`` hook is user code that may block, so it runs in a worker
thread, bounded by the policy's ``hook_timeout_secs``:

- it returns text: the policy redacts that output again (with the delivered history as context)
  → ``PieceGuarded(piece_id, redacted)``; it returns ``None`` → ``PieceGuarded(piece_id, None)``
  (the piece is cancelled);
- it raises, or does not answer in time: it fails closed → ``PieceWithheld(piece_id)`` (logged).
  The thread is abandoned; whatever it returns later is never used.

With no hook configured the output is only redacted, on the loop, without a thread.

Delivery imports nothing from the policy: the driver is handed any object of the shape of
:class:`PiecePolicy`.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio
import anyio.to_thread

from orchestrator.delivery.events import GuardPiece, PieceGuarded, PieceWithheld

__all__ = ["DEFAULT_HOOK_TIMEOUT_SECS", "PiecePolicy", "guard_piece"]

log = logging.getLogger(__name__)

DEFAULT_HOOK_TIMEOUT_SECS = 5.0
"""``policy.hook_timeout_secs`` by default (DESIGN §4 "The hook")."""


class PiecePolicy(Protocol):
    """What delivery needs of the reply's outbound policy (DESIGN §4)."""

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
            verdict = await anyio.to_thread.run_sync(
                policy.hook_piece, piece.text, abandon_on_cancel=True
            )
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
