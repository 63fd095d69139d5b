"""Per-reply outbound policy: the seam the turn loop and the delivery engine use (architecture §4).

Theory of operation
-------------------
One :class:`ReplyPolicy` per reply. The turn loop feeds it the visible model text of every
round (``<think>`` already stripped), concatenated with no separator, and forwards what it
returns to delivery as ``TextEmitted``:

- :meth:`begin_round` checkpoints; :meth:`restart` goes back to the checkpoint when a round is
  served again (nothing of the failed attempt is ever returned after that);
- :meth:`feed` returns newly stable redacted text; :meth:`end_round` releases the rest of the
  round except a trailing possible secret start; :meth:`finish` flushes everything. Joined, the
  returns of a reply equal the catalogue's ``redact`` of its text.

Guardrails: while one that holds the stream is configured, :meth:`feed` returns ``""`` and the
round's text is released by :meth:`end_round` / :meth:`finish` once the complete text passed
the screen. A ``deny`` hit sets :attr:`refusal` (the notice to show) and releases nothing; from
then on the policy returns nothing. A non-holding guardrail screens at the same points, after the
text was shown; the caller then feeds ``AnswerRefused(refusal)`` to delivery.

Each delivered piece (``multi_message`` paragraphs and turns, the ``off`` message, the final
``partial`` text) is guarded once, in two steps the delivery driver takes
(:func:`orchestrator.delivery.hooks.guard_piece`): :meth:`hook_piece` awaits the hook's verdict
from a worker process (:mod:`orchestrator.policy.hook_pool`, bounded by
:attr:`hook_timeout_secs`; the event loop never runs hook code), then :meth:`redact_piece`
redacts that output again on the event loop, with the delivered history as context
(:mod:`orchestrator.policy.pieces`). Status lines and notices go
through :meth:`redact_line`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from orchestrator.policy.catalogue import Redactor
from orchestrator.policy.errors import HookFailed
from orchestrator.policy.guardrails import REFUSAL_NOTICE, TermList
from orchestrator.policy.hook import Hook, call_hook
from orchestrator.policy.pieces import PieceHistory
from orchestrator.policy.rendered import Renderer, redact_rendered
from orchestrator.policy.window import RedactionWindow

__all__ = ["HookCaller", "Renderer", "ReplyPolicy", "redact_rendered"]

_PARAGRAPH_BREAK = "\n\n"


log = logging.getLogger(__name__)


class HookCaller(Protocol):
    """Runs the hook out of process (:class:`~orchestrator.policy.hook_pool.HookWorkers`)."""

    async def call(self, channel: str, chat_id: str, text: str) -> str | None:
        """The hook's verdict on one piece. Raises ``HookFailed`` or ``HookTimedOut``."""
        ...


class ReplyPolicy:
    """One reply's policy state: the redaction window across all rounds and the piece guard.

    Args:
        redactor: the catalogue (default: the built-in shapes). For ``redact`` guardrails it
            must already contain their shapes (:class:`~orchestrator.policy.OutboundPolicy`
            builds it so).
        hook: the ``on_message_sending`` hook, or ``None``: called in this thread by
            :meth:`hook_piece_here` only (a caller with no event loop); the driver's
            :meth:`hook_piece` uses ``hooks``.
        hooks: the hook's worker processes, or ``None``.
        guardrails: the configured guardrails.
        channel: the channel name passed to the hook.
        chat_id: the chat id passed to the hook.
        render: the channel's renderer of the final text (text as displayed); each delivered
            piece is also checked as it displays. ``None``: the raw text only.
        hook_timeout_secs: how long one call of the hook may take (``policy.hook_timeout_secs``).
    """

    def __init__(
        self,
        redactor: Redactor | None = None,
        *,
        hook: Hook | None = None,
        hooks: HookCaller | None = None,
        guardrails: Sequence[TermList] = (),
        channel: str = "",
        chat_id: str = "",
        render: Renderer | None = None,
        hook_timeout_secs: float = 5.0,
    ) -> None:
        self.hook_timeout_secs = hook_timeout_secs
        self._redactor = redactor if redactor is not None else Redactor()
        self._render = render
        # What the window emitted since the last delivered piece, as the parts it came in (a
        # list, so that a release appends its own length and never copies the text so far),
        # and their length in characters.
        self._emitted: list[str] = []
        self._emitted_chars = 0
        self._trimmed = 0  # characters of emitted text dropped from the front of ``_emitted``
        self._window = RedactionWindow(self._redactor)
        self._pieces = PieceHistory(self._redactor)
        self._hook = hook
        self._hooks = hooks
        self._channel = channel
        self._chat_id = chat_id
        self._holds = any(g.holds_stream for g in guardrails)
        self._deny = tuple(g for g in guardrails if g.action == "deny")
        self.refusal: str | None = None
        self._raw: list[str] = []  # the reply's raw text, kept only to screen it
        self._withheld: list[str] = []  # emitted text held back by a holding guardrail
        self._checkpoint = (self._window.checkpoint(), 0, 0)
        self._checkpoint_emitted = 0

    # -- the stream ---------------------------------------------------------------------------

    def begin_round(self) -> None:
        """A round starts: remember where to come back to on :meth:`restart`."""
        self._checkpoint = (self._window.begin_round(), len(self._raw), len(self._withheld))
        self._checkpoint_emitted = self._trimmed + self._emitted_chars

    def restart(self) -> None:
        """The round is served again: forget everything fed since :meth:`begin_round`."""
        state, raw, withheld = self._checkpoint
        self._window.rollback(state)
        keep = self._checkpoint_emitted - self._trimmed
        if keep >= 0:
            self._keep_emitted("".join(self._emitted)[:keep])
        else:  # a piece of the forgotten text was delivered: the next gap starts here
            self._keep_emitted("")
            self._trimmed = self._checkpoint_emitted
        del self._raw[raw:]
        del self._withheld[withheld:]

    def feed(self, text: str) -> str:
        """Visible model text in; newly stable redacted text out (often ``""``)."""
        if self.refusal is not None:
            return ""
        if self._deny:
            self._raw.append(text)
        emitted = self._window.feed(text)
        if emitted:
            self._emitted.append(emitted)
            self._emitted_chars += len(emitted)
        if self._holds:
            self._withheld.append(emitted)
            return ""
        return emitted

    def bytes_before_output(self) -> int:
        """How many UTF-8 bytes more :meth:`feed` can take and still return ``""``: a lower
        bound (:meth:`RedactionWindow.bytes_before_output`). A query."""
        return self._window.bytes_before_output()

    def end_round(self) -> str:
        """The round ended with tool calls: release all but a trailing possible secret start."""
        if self.refusal is not None:
            return ""
        return self._screened(self._window.release())

    def finish(self) -> str:
        """The reply ended (answered, interrupted or refused): release everything."""
        if self.refusal is not None:
            return ""
        return self._screened(self._window.flush())

    def _screened(self, released: str) -> str:
        if released:
            self._emitted.append(released)
            self._emitted_chars += len(released)
        if self._holds:
            released = "".join(self._withheld) + released
            self._withheld.clear()
        if self._deny:
            text = "".join(self._raw)
            if any(g.refuses(text) for g in self._deny):
                self.refusal = REFUSAL_NOTICE
                log.info("reply in %s:%s refused by a guardrail", self._channel, self._chat_id)
                return ""
        return released

    # -- delivered pieces ---------------------------------------------------------------------

    def _guarded(self, text: str, separator: str) -> str:
        guarded = self._pieces.guard(text, separator)
        if self._render is not None:
            guarded = redact_rendered(self._redactor, guarded, self._render)
        return guarded

    def _separator(self, span: tuple[int, int] | None) -> str:
        """What was delivered between the last piece and the piece at ``span`` (offsets into
        the emitted text, ``GuardPiece.span``): the gap between them when it is whitespace
        (``""`` where the model's text ran on), a paragraph break when something else lies
        between them; ``""`` (the cautious choice: a key split there is one key) when the span
        is not known or not in the emitted text kept. The emitted text up to the span's end is
        then dropped: the next piece's gap starts there."""
        if span is None:
            return ""
        start, end = span[0] - self._trimmed, span[1] - self._trimmed
        if not 0 <= start <= end <= self._emitted_chars:
            return ""
        emitted = "".join(self._emitted)  # once per piece: the text since the last one
        gap = emitted[:start]
        self._keep_emitted(emitted[end:])
        self._trimmed += end
        return gap if not gap.strip() else _PARAGRAPH_BREAK

    def _keep_emitted(self, text: str) -> None:
        """Make ``text`` the whole emitted text kept (one part)."""
        self._emitted = [text] if text else []
        self._emitted_chars = len(text)

    @property
    def has_hook(self) -> bool:
        return self._hook is not None or self._hooks is not None

    async def hook_piece(self, text: str) -> str | None:
        """The hook alone on one piece, in a worker process (``text`` unchanged without a hook);
        it touches no policy state.

        Raises:
            HookTimedOut: the hook did not answer within :attr:`hook_timeout_secs`.
            HookFailed: the hook raised or returned neither ``str`` nor ``None``, its worker
                died, or a hook is configured but no worker processes were given (failing
                closed: the event loop never calls the hook itself).
        """
        if self._hooks is not None:
            return await self._hooks.call(self._channel, self._chat_id, text)
        if self._hook is None:
            return text
        raise HookFailed("a hook is configured but its worker processes are not running")

    def hook_piece_here(self, text: str) -> str | None:
        """The hook alone on one piece, called in this thread (``text`` unchanged without one):
        for a caller with no event loop to keep running (a fake-clock delivery run). The
        daemon never calls it.

        Raises:
            Exception: whatever the hook raised, or ``TypeError`` for an output that is neither
                ``str`` nor ``None``.
        """
        if self._hook is None:
            return text
        return call_hook(self._hook, self._channel, self._chat_id, text)

    def redact_piece(self, text: str, span: tuple[int, int] | None = None) -> str:
        """The hook's output redacted again with the delivered history as context, joined by
        the separator delivered before it (read in the emitted text at ``span``, the piece's
        place there, ``GuardPiece.span``; ``None``: a text the hook rewrote, or a caller that
        does not know it, is joined directly), and checked as the channel renders it; recorded
        as delivered."""
        return self._guarded(text, self._separator(span))

    def redact_line(self, text: str) -> str:
        """A status line, notice or approval prompt, redacted on its own (as it is and as it
        reads: a tool's JSON arguments are decoded by the views, and as the channel renders
        it)."""
        redacted = self._redactor.redact(text)
        if self._render is None:
            return redacted
        return redact_rendered(self._redactor, redacted, self._render)
