"""Settled matches and the output a scan settles (architecture §4 "Leak catalogue", "Live
redaction window"); pure.

The redactor (:mod:`~orchestrator.policy.catalogue`) finds the matches of a text; this module
turns a sorted list of them into the redacted output up to a stop (:func:`settle`), so the
redactor's scans and the live window's looks that reuse a proof (:class:`Proof`) cut the same
text the same way. A change to how an output is cut stays apart from how matches are found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.policy.shapes import marker

__all__ = ["Hit", "Proof", "Scan", "masked_to", "settle", "settled"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One settled match: text ``[start, end)``; ``[secret_start, secret_end)`` is replaced."""

    name: str
    start: int
    end: int
    secret_start: int
    secret_end: int

    def replacement(self, text: str) -> str:
        return (
            text[self.start : self.secret_start]
            + marker(self.name)
            + text[self.secret_end : self.end]
        )


@dataclass(frozen=True, slots=True)
class Scan:
    """The settled part of an open scan.

    Attributes:
        text: the redacted output for the raw text ``[start, cut)``.
        cut: where the settled part ends (raw index).
        open_at: the start of the possible secret that stopped the scan, or ``None``.
        first_hit: the start of the first secret replaced in ``text``, or ``None``.
    """

    text: str
    cut: int
    open_at: int | None = None
    first_hit: int | None = None


def settle(
    text: str,
    hits: Sequence[Hit],
    start: int,
    stop: int,
    open_at: int | None,
    observer: Callable[[str], None] | None = None,
) -> Scan:
    """The output for ``text[start:stop]`` with ``hits`` (sorted, none overlapping; those
    before ``start`` were emitted already and are passed over) replaced, ended before
    ``open_at`` (a possible secret start) and before any hit that crosses the stop.
    ``observer`` is told the name of every hit replaced."""
    return Scan(*settled(text, hits, start, stop, open_at, observer))


def settled(
    text: str,
    hits: Sequence[Hit],
    start: int,
    stop: int,
    open_at: int | None,
    observer: Callable[[str], None] | None = None,
) -> tuple[str, int, int | None, int | None]:
    """:func:`settle`'s fields as a tuple ``(text, cut, open_at, first_hit)``: the live
    window's looks take them apart at once, and a tuple costs a fraction of a :class:`Scan`."""
    if open_at is not None and open_at < stop:
        stop = open_at
    else:
        open_at = None
    if not hits:
        return text[start:stop], stop, open_at, None
    out: list[str] = []
    last = start
    first_hit: int | None = None
    for hit in hits:
        if hit.start < start:
            continue
        if hit.start >= stop:
            break
        if hit.end > stop:
            stop = hit.start
            break
        out.append(text[last : hit.start])
        out.append(hit.replacement(text))
        if observer is not None:
            observer(hit.name)
        last = hit.end
        if first_hit is None:
            first_hit = hit.start
    out.append(text[last:stop])
    return "".join(out), stop, open_at, first_hit


def masked_to(hits: Sequence[Hit], start: int) -> int:
    """The end of the hits (sorted, none overlapping) that cover the text from ``start`` on
    without a gap; ``start`` when none begins there. The output for ``[start, masked_to)``
    shows nothing of that text but the hits' replacements."""
    end = start
    for hit in hits:
        if hit.start < end:
            continue  # before ``start``: emitted already
        if hit.start > end:
            break
        end = hit.end
    return end


@dataclass(frozen=True, slots=True)
class Proof:
    """What one open scan of a growing text proved, kept for the scans after it (the live
    window's): no match starts in the scanned text before ``limit``, however the text continues
    (a regular expression that neither matches nor partially matches from a position never
    matches there in a longer text). A later scan of the same text grown longer, from a settled
    position to a stop at or before ``limit``, therefore finds nothing, and its output is the
    raw text; a scan from ``limit`` on finds what one from an earlier settled position would.

    A proof ends before the first match the scan found: a match may still grow as text
    arrives (a password read up to a later ``@`` that proves a host), so the looks after it
    search it again, as they would without proofs.

    Attributes:
        open_at: the start of the first possible secret the scan found, or ``None``.
        limit: the raw index before which no match starts.
    """

    open_at: int | None
    limit: int

    @classmethod
    def of(cls, hits: Sequence[Hit], open_at: int | None, end: int) -> Proof:
        """The proof of a scan that found ``hits`` (sorted) and ``open_at``, held to ``end``
        at most (before the end of the text, where views may still change)."""
        limit = end if open_at is None else min(open_at, end)
        if hits:
            limit = min(limit, hits[0].start)
        return cls(open_at, limit)
