"""Per delivered piece: redact again with the delivered history as context (architecture §4).

Theory of operation
-------------------
The delivery engine cuts pieces (``multi_message`` paragraphs and turns, the ``off`` message,
the final ``partial`` text) from the window's emitted text only, so a trailing possible secret
start is still inside the window and moves into the next piece. Each piece then crosses the
``on_message_sending`` hook once; the hook's output may complete a secret that began in an
earlier piece, so it is redacted again with the last 512 characters of the already-delivered,
already-guarded history in front of it. Only the new part is returned:

- a match lying wholly in the history is left alone (it was delivered as it is: a marker in the
  history is never re-flagged, and a clean piece after a redaction is sent unchanged);
- a match that starts in the history and ends in the piece has its part in the piece replaced
  (the marker opens the piece);
- a match inside the piece is replaced as usual.

The returned text is appended to the history. Only the history's suffix is kept.
"""

from __future__ import annotations

from orchestrator.policy.catalogue import Redactor, marker

__all__ = ["HISTORY_CONTEXT_CHARS", "PieceHistory"]

HISTORY_CONTEXT_CHARS = 512
"""Characters of delivered history put in front of a piece when it is redacted again."""
_LOOKBEHIND_CHARS = 64  # kept before the context so the scan's look-behinds see what precedes it


class PieceHistory:
    """The delivered history of one reply.

    Args:
        redactor: the catalogue to apply.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._history = ""

    @property
    def history(self) -> str:
        """The suffix of the delivered history that is kept (at least 512 characters of it)."""
        return self._history

    def guard(self, text: str, separator: str = "") -> str:
        """Redact ``text`` with the history as context, joined by ``separator`` (what was
        delivered between the last piece and this one: ``""`` where the model's text ran on,
        a paragraph break between messages), record it as delivered, return it."""
        context = self._history + separator if self._history else ""
        joined = context + text
        start = max(0, len(context) - HISTORY_CONTEXT_CHARS)
        new = len(context)
        out: list[str] = []
        last = new
        breaks = (new,) if context and not separator else ()
        for hit in self._redactor.hits(joined, start, breaks):
            if hit.end <= new:
                continue
            out.append(joined[last : max(hit.start, new)])
            out.append(joined[max(hit.start, new) : max(hit.secret_start, new)])
            if hit.secret_end > new:
                out.append(marker(hit.name))
            out.append(joined[max(hit.secret_end, new) : hit.end])
            last = hit.end
        out.append(joined[last:])
        guarded = "".join(out)
        keep = HISTORY_CONTEXT_CHARS + _LOOKBEHIND_CHARS
        self._history = (context + guarded)[-keep:]
        return guarded
