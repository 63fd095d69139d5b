"""The merge of one text's per-shape searches into its settled hits (architecture §4 "Leak
catalogue"); pure but for the searches it is handed.

Each candidate shape is searched on its own (:mod:`~orchestrator.policy.searches`); the leftmost
match of all wins, ties going to the earlier shape, and the search resumes after it — the
result of one big alternation, without its cost. An open scan stops at the first possible secret
(a partial match, or a match that more text could extend). The redactor
(:mod:`~orchestrator.policy.catalogue`) picks the candidates and the views; this module only
merges, so a change to how matches are ordered and joined stays apart from both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from orchestrator.policy.hits import Hit
from orchestrator.policy.joints import ends_in_a_joint
from orchestrator.policy.searches import (
    CompiledShape,
    Head,
    SearchMemo,
    TimedOut,
    head_start,
    overlapping_head,
)
from orchestrator.policy.shapes import inert

__all__ = ["TAIL_REACH", "Searcher", "merged_hits"]

TAIL_REACH = 16
"""A match or partial match of a built-in shape holds a whole keyword after at most 13
characters (the digits before a bot token's ``1:``; others start with theirs): one of a text
without a keyword from where it starts on begins in its last 13 characters."""

Searcher = Callable[..., Head]
"""The redactor's search of one shape: ``search(shape, text, pos, partial, at_end=…)``."""


def merged_hits(
    found: Sequence[tuple[CompiledShape, int]],
    search: Searcher,
    may_be_inert: Callable[[], bool],
    text: str,
    start: int,
    stop: int,
    *,
    open_end: bool,
    memo: SearchMemo | None = None,
    end_inert: bool = False,
    quiet_tail: bool = False,
) -> Iterator[Hit | int]:
    """Settled hits of ``text`` in order, from the candidates ``found`` (``(shape, where its
    search begins)``, in catalogue order); with ``open_end`` a final ``int`` marks an open
    match. ``may_be_inert``: whether a hit at or after ``start`` may be a marker (asked at the
    first full match).

    ``memo`` (open scans of the raw text only): where each shape's first search may begin,
    updated with what this scan's first searches found. ``end_inert``: the end of ``text`` is
    the end of the raw text, where an open position is none (a scan's stop is at most the
    end, and a proof ends before it): a search whose lead does not occur is not run for the
    empty partial match at the end (as with a memo). ``quiet_tail``: the caller takes a match
    or a possible secret that starts in the last :data:`TAIL_REACH` characters for none (the
    live window's looks, whose proofs end before them): a built-in shape let through only by a
    keyword's prefix at the end (searched from there) is searched only once a match reaches
    into them, when the merge goes on as if it had been searched from the start; and the
    merge ends where the next match or possible secret starts in them.
    """
    n = len(text)
    at_end = not end_inert
    heads: list[Head] = []
    tail_start = n - TAIL_REACH
    deferred = [i for i, (_, at) in enumerate(found) if at != start] if quiet_tail else []
    for index, (shape, at) in enumerate(found):
        if deferred and index in deferred:
            heads.append(None)  # searched once a match reaches into the tail
        elif memo is None:
            heads.append(search(shape, text, at, open_end, at_end=at_end))
        else:
            heads.append(memo.search(search, shape, text, at))
    shapes = [shape for shape, _ in found]
    markers: bool | None = None  # tested at the first full match
    while True:
        best = -1
        for index, head in enumerate(heads):
            if head is not None and (best < 0 or head_start(head) < head_start(heads[best])):
                best = index
        if best < 0:
            return
        head = heads[best]
        assert head is not None
        if deferred and head_start(head) >= tail_start:
            return  # all that is left starts in the tail: the caller takes it for none
        shape = shapes[best]
        if isinstance(head, TimedOut):
            # Conservative: everything from where the search began to the stop is masked.
            end = max(stop, head.start + 1) if stop > head.start else n
            if deferred and end > tail_start:
                deferred = _search_deferred(
                    deferred, heads, found, search, memo, text, open_end, at_end
                )
                continue
            yield Hit(shape.name, head.start, end, head.start, end)
        else:
            begin, end = head.span()
            if open_end and (
                head.partial
                or end >= n
                or (shape.tail is not None and shape.tail.fullmatch(text, end) is not None)
                or ends_in_a_joint(text, end)
            ):
                yield begin
                return
            if end == begin:  # an empty match of a look-around pattern: not a secret
                heads[best] = search(shape, text, begin + 1, open_end, at_end=at_end)
                continue
            secret = head.span(shape.secret) if shape.secret is not None else (begin, end)
            if secret[0] < 0:
                secret = (begin, end)
            if markers is None:
                markers = may_be_inert()
            if markers and inert(text, *secret):
                # a marker where a secret would be (an extra pattern's hit inside one): text
                # already redacted is never redacted again
                heads[best] = search(shape, text, begin + 1, open_end, at_end=at_end)
                continue
            # A match of another shape that begins inside this one and runs past its end
            # (a key right after a PEM body the match read into) is one secret with it.
            overlapping = overlapping_head(heads, best, end)
            while overlapping is not None:
                if open_end and (overlapping.partial or overlapping.end() >= n):
                    yield begin
                    return
                end = overlapping.end()
                secret = (secret[0], end)
                overlapping = overlapping_head(heads, best, end)
            if deferred and end > tail_start:
                # the match reaches into the tail, where a deferred head may start: search them
                # (as the merge would have from the start) and take this match again
                deferred = _search_deferred(
                    deferred, heads, found, search, memo, text, open_end, at_end
                )
                continue
            yield Hit(shape.name, begin, end, secret[0], secret[1])
        for index, other in enumerate(heads):
            if isinstance(other, TimedOut) and head_start(other) < end:
                heads[index] = None  # one time-out per scan: the rest is masked already
            elif other is not None and head_start(other) < end:
                heads[index] = search(shapes[index], text, end, open_end, at_end=at_end)


def _search_deferred(
    deferred: list[int],
    heads: list[Head],
    found: Sequence[tuple[CompiledShape, int]],
    search: Searcher,
    memo: SearchMemo | None,
    text: str,
    open_end: bool,
    at_end: bool,
) -> list[int]:
    """Search the deferred candidates as the merge's first searches would have; returns the
    empty list (none is deferred any more)."""
    for index in deferred:
        shape, at = found[index]
        if memo is None:
            heads[index] = search(shape, text, at, open_end, at_end=at_end)
        else:
            heads[index] = memo.search(search, shape, text, at)
    return []
