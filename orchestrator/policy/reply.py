"""Per-reply outbound policy: the seam the turn loop and the delivery engine use (DESIGN §4).

This is the interface; the redaction window, catalogue, hook and guardrails fill it in.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["PieceGuard", "ReplyPolicy"]


class PieceGuard(Protocol):
    """What the delivery engine needs of the policy for each delivered piece."""

    def guard_piece(self, text: str) -> str | None:
        """Run the hook once on a delivered piece and redact its output again with the suffix of
        the already-delivered history as context. ``None`` cancels the piece."""
        ...

    def redact_line(self, text: str) -> str:
        """Redact a status line or notice on its own."""
        ...


class ReplyPolicy:
    """One reply's policy state: the redaction window across all rounds and the piece guard.

    The turn loop calls :meth:`feed` with visible model text and forwards what it returns;
    :meth:`begin_round` / :meth:`restart` bracket a round that may be served again;
    :meth:`end_round` releases the holdback except a trailing possible secret start;
    :meth:`finish` flushes everything. ``refusal`` is set when a guardrail refused.
    """

    def __init__(self) -> None:
        self.refusal: str | None = None
        self._checkpoint = 0
        self._emitted = 0

    def begin_round(self) -> None:
        self._checkpoint = self._emitted

    def restart(self) -> None:
        self._emitted = self._checkpoint

    def feed(self, text: str) -> str:
        self._emitted += len(text)
        return text

    def end_round(self) -> str:
        return ""

    def finish(self) -> str:
        return ""

    def guard_piece(self, text: str) -> str | None:
        return text

    def redact_line(self, text: str) -> str:
        return text
