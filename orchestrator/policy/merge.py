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
from orchestrator.policy.view_map import View

__all__ = ["TAIL_REACH", "Searcher", "merged_hits", "quiet_view"]

TAIL_REACH = 16
"""A match or partial match of a built-in shape holds a whole keyword after at most 13
characters (the digits before a bot token's ``1:``; others start with theirs): one of a text
without a keyword from where it starts on begins in its last 13 characters."""

Searcher = Callable[..., Head]
"""The redactor's search of one shape: ``search(shape, text, pos, partial, at_end=…)``."""


def merged_hits(
    found: Sequence[tuple[CompiledShape, int]],
    search: Searcher,
    may_be_inert: Callable[[str, int], bool],
    text: str,
    start: int,
    stop: int,
    *,
    open_end: bool,
    memo: SearchMemo | None = None,
    end_inert: bool = False,
    complete: Callable[[], Sequence[tuple[CompiledShape, int]]] | None = None,
) -> Iterator[Hit | int]:
    """Settled hits of ``text`` in order, from the candidates ``found`` (``(shape, where its
    search begins)``, in catalogue order); with ``open_end`` a final ``int`` marks an open
    match. ``may_be_inert(text, start)``: whether a hit at or after ``start`` may be a marker
    (asked at the first full match).

    ``memo`` (open scans of the raw text only): where each shape's first search may begin,
    updated with what this scan's first searches found. ``end_inert``: the end of ``text`` is
    the end of the raw text, where an open position is none (a scan's stop is at most the
    end, and a proof ends before it): a search whose lead does not occur is not run for the
    empty partial match at the end (as with a memo). ``complete`` (a *quiet tail*): the caller
    takes a match or a possible secret that starts in the last :data:`TAIL_REACH` characters
    for none (the live window's looks, whose proofs end before them), and ``found`` leaves out
    the built-in shapes let through only by a keyword's prefix at the end (searched from
    there): ``complete()`` gives all the candidates, searched only once a match reaches into
    those characters, when the merge goes on as if they had been searched from the start; and
    the merge ends where the next match or possible secret starts in them.
    """
    n = len(text)
    at_end = not end_inert
    tail_start = n - TAIL_REACH
    if memo is None:
        heads = [search(shape, text, at, open_end, at_end=at_end) for shape, at in found]
    else:
        heads = [memo.search(search, shape, text, at) for shape, at in found]
    shapes = [shape for shape, _ in found]
    markers: bool | None = None  # tested at the first full match
    while True:
        best = -1
        first = 0
        for index, candidate in enumerate(heads):
            if candidate is not None:
                at = candidate.start if isinstance(candidate, TimedOut) else candidate.start()
                if best < 0 or at < first:
                    best, first = index, at
        if best < 0:
            return
        head = heads[best]
        assert head is not None
        if complete is not None and head_start(head) >= tail_start:
            return  # all that is left starts in the tail: the caller takes it for none
        shape = shapes[best]
        if isinstance(head, TimedOut):
            # Conservative: everything from where the search began to the stop is masked.
            end = max(stop, head.start + 1) if stop > head.start else n
            if complete is not None and end > tail_start:
                shapes, heads = _completed(complete(), shapes, heads, search, memo, text, at_end)
                complete = None
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
                markers = may_be_inert(text, start)
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
            if complete is not None and end > tail_start:
                # the match reaches into the tail, where a left-out shape's match may start:
                # search them (as the merge would have from the start), take this match again
                shapes, heads = _completed(complete(), shapes, heads, search, memo, text, at_end)
                complete = None
                continue
            yield Hit(shape.name, begin, end, secret[0], secret[1])
        for index, other in enumerate(heads):
            if isinstance(other, TimedOut) and head_start(other) < end:
                heads[index] = None  # one time-out per scan: the rest is masked already
            elif other is not None and head_start(other) < end:
                heads[index] = search(shapes[index], text, end, open_end, at_end=at_end)


def _completed(
    found: Sequence[tuple[CompiledShape, int]],
    shapes: list[CompiledShape],
    heads: list[Head],
    search: Searcher,
    memo: SearchMemo | None,
    text: str,
    at_end: bool,
) -> tuple[list[CompiledShape], list[Head]]:
    """All the candidates ``found`` and their heads: those of ``shapes`` as they stand, the
    others searched as the merge's first searches would have (an open search)."""
    standing = dict(zip(shapes, heads, strict=True))
    completed: list[Head] = []
    for shape, at in found:
        if shape in standing:
            completed.append(standing[shape])
        elif memo is None:
            completed.append(search(shape, text, at, True, at_end=at_end))
        else:
            completed.append(memo.search(search, shape, text, at))
    return [shape for shape, _ in found], completed


def quiet_view(view: View, raw_end: int) -> bool:
    """Whether the last :data:`TAIL_REACH` characters of ``view`` came from the raw text's last
    as many (it ends at ``raw_end``)."""
    cut = len(view.text) - TAIL_REACH
    return cut > 0 and view.raw_start(cut) >= raw_end - TAIL_REACH
