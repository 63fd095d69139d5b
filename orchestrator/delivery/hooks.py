"""The hook's verdict on a piece, off the event loop (architecture §1, §4 "The hook"): the I/O half.

Theory of operation
-------------------
The engine returns ``GuardPiece(piece_id, text)``; :func:`guard_piece` answers it with the event
to feed back. The ``on_message_sending`` hook is admin code that may block, or hold the GIL in
one long C call, so the event loop never runs it: the policy's ``hook_piece`` awaits it from a
worker process, which the policy kills at ``hook_timeout_secs`` (a thread could not be stopped,
and a GIL-holding hook in one froze every chat together with the timer meant to end it):

- it returns text: the policy redacts that output again (with the delivered history as context)
  → ``PieceGuarded(piece_id, redacted)``; it returns ``None`` → ``PieceGuarded(piece_id, None)``
  (the piece is cancelled);
- it raises, or does not answer in time: it fails closed → ``PieceWithheld(piece_id)`` (logged).

With no hook configured the output is only redacted, on the loop.

Delivery imports nothing from the policy: the driver is handed any object of the shape of
:class:`PiecePolicy`.
"""

from __future__ import annotations

import logging
from typing import Protocol

from orchestrator.delivery.events import GuardPiece, PieceGuarded, PieceWithheld

__all__ = ["DEFAULT_HOOK_TIMEOUT_SECS", "PiecePolicy", "guard_piece", "span_of"]

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

    async def hook_piece(self, text: str) -> str | None:
        """Run the hook on one piece: its output (cut to the policy's maximum) or ``None`` (cancel).
        User code, run outside the event loop (a worker process) and bounded by
        :attr:`hook_timeout_secs`. Raises ``TimeoutError`` when the hook ran out of time, any
        other ``Exception`` when it failed (its own error, an output that is neither ``str`` nor
        ``None``, a worker that died)."""
        ...

    def redact_piece(self, text: str, span: tuple[int, int] | None = None) -> str:
        """The hook's output redacted again, with the already-delivered history as context, and
        recorded as delivered. ``span``: where the piece lies in the emitted text
        (``GuardPiece.span``), given when the hook left it unchanged; ``None``: unknown (a text
        the hook rewrote is joined to the history directly). Called on the event loop, once per
        verdict used."""
        ...

    def redact_line(self, text: str) -> str:
        """A status line or notice, redacted on its own."""
        ...


async def guard_piece(
    policy: PiecePolicy, piece: GuardPiece, *, where: str
) -> PieceGuarded | PieceWithheld:
    """The verdict on ``piece`` (see the module docstring); ``where`` names the chat in logs.

    Cancelling it cancels the hook's call (its worker is killed); nothing is recorded as
    delivered."""
    if not policy.has_hook:
        return PieceGuarded(piece.piece_id, policy.redact_piece(piece.text, piece.span))
    try:
        verdict = await policy.hook_piece(piece.text)
    except TimeoutError:
        log.error(
            "on_message_sending did not answer within %g s in %s; that piece is withheld",
            policy.hook_timeout_secs,
            where,
        )
        return PieceWithheld(piece.piece_id)
    except Exception as exc:
        trace = getattr(exc, "trace", "")
        log.error(
            "on_message_sending failed in %s; that piece is withheld: %s%s",
            where,
            exc,
            f"\n{trace.rstrip()}" if trace else "",
        )
        return PieceWithheld(piece.piece_id)
    if verdict is None:
        return PieceGuarded(piece.piece_id, None)
    return PieceGuarded(piece.piece_id, policy.redact_piece(verdict, span_of(piece, verdict)))


def span_of(piece: GuardPiece, verdict: str) -> tuple[int, int] | None:
    """``piece``'s span for redacting ``verdict`` again: its place in the emitted text when the
    hook left the text unchanged, else ``None`` (a rewritten text is joined directly, the
    cautious choice: a key split there is one key)."""
    return piece.span if verdict == piece.text else None
