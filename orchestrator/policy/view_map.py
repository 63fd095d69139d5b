"""How a view's characters map back to the raw text (architecture §4 "What the reader sees is
what is checked"): :class:`View`, and :func:`aligned`, a renderer's output aligned with the raw
text it showed. Pure; a view never changes once built.

A view of the raw text is mostly runs of raw characters copied as they are, with a few decoded
tokens and breaks between them, so a view built by one pass over the raw text is held as *runs*
(one entry per copied run or decoded token: a few per link, not one per character); a view built
from another view (the second decoding pass, a joined view, a renderer's alignment) holds one
raw span per character.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = ["View", "aligned"]


class View:
    """A view of a raw text: view character ``i`` came from raw ``[starts[i], ends[i])``
    (nondecreasing in ``i``).

    Build it from per-character lists (``View(text, starts, ends)``) or from runs
    (:meth:`of_runs`). ``starts`` and ``ends`` are lists built on request; the queries
    :meth:`raw_start`, :meth:`raw_end` and :meth:`view_index` answer from the runs directly.
    """

    __slots__ = ("_ends", "_firsts", "_lasts", "_raws", "_run_ends", "_starts", "text")

    def __init__(self, text: str, starts: list[int], ends: list[int]) -> None:
        self.text = text
        self._starts: list[int] | None = starts
        self._ends: list[int] | None = ends
        self._firsts: list[int] = []
        self._raws: list[int] = []
        self._run_ends: list[int] = []
        self._lasts: list[int] = []

    @classmethod
    def of_runs(cls, text: str, firsts: list[int], raws: list[int], run_ends: list[int]) -> View:
        """A view held as runs: run ``k`` holds view characters ``firsts[k]`` up to the next
        run's first (or ``len(text)``; each run holds one at least); with ``run_ends[k] < 0``
        they are raw characters copied from ``raws[k]`` on (character ``i`` came from
        ``[raws[k] + i - firsts[k], … + 1)``), else each came from ``[raws[k], run_ends[k])``
        (a decoded token, or a break where both are its raw position)."""
        view = cls(text, [], [])
        view._starts = view._ends = None
        view._firsts, view._raws, view._run_ends = firsts, raws, run_ends
        nexts = [*firsts[1:], len(text)] if firsts else []
        view._lasts = [
            raw + after - first - 1 if end < 0 else raw
            for first, raw, end, after in zip(firsts, raws, run_ends, nexts, strict=True)
        ]
        return view

    @property
    def starts(self) -> list[int]:
        """Where each view character came from in the raw text (a new list for a run view)."""
        if self._starts is not None:
            return self._starts
        return [self.raw_start(i) for i in range(len(self.text))]

    @property
    def ends(self) -> list[int]:
        """Where each view character's raw characters end (a new list for a run view)."""
        if self._ends is not None:
            return self._ends
        return [self.raw_end(i + 1) for i in range(len(self.text))]

    def raw_start(self, index: int) -> int:
        """The raw index where view index ``index`` begins (``index`` may be ``len(text)``)."""
        starts = self._starts
        if starts is not None:
            return starts[index] if index < len(starts) else self._end()
        if index >= len(self.text):
            return self._end()
        k = bisect.bisect_right(self._firsts, index) - 1
        raw = self._raws[k]
        return raw + index - self._firsts[k] if self._run_ends[k] < 0 else raw

    def raw_end(self, index: int) -> int:
        """The raw index where the view text up to ``index`` (exclusive) ends."""
        ends = self._ends
        if ends is not None:
            starts: Sequence[int] = self._starts or ()
            return ends[index - 1] if index > 0 else (starts[0] if starts else 0)
        if index <= 0:
            return self.raw_start(0) if self.text else 0
        k = bisect.bisect_right(self._firsts, index - 1) - 1
        end = self._run_ends[k]
        return self._raws[k] + index - self._firsts[k] if end < 0 else end

    def view_index(self, raw: int) -> int:
        """The first view index whose raw start is at or after ``raw``."""
        if self._starts is not None:
            return bisect.bisect_left(self._starts, raw)
        k = bisect.bisect_left(self._lasts, raw)
        if k == len(self._lasts):
            return len(self.text)
        first = self._firsts[k]
        if self._run_ends[k] < 0:
            return first + max(0, raw - self._raws[k])
        return first

    def _end(self) -> int:
        if self._ends is not None:
            return self._ends[-1] if self._ends else 0
        return self.raw_end(len(self.text)) if self.text else 0


def aligned(raw: str, shown: str, reach: int = 64) -> View:
    """A view of ``raw`` as a renderer showed it (``shown``: Markdown syntax gone, escapes
    resolved, bullets added): each shown character is aligned with the next equal raw character
    within ``reach`` characters, greedily; one that has none (a bullet the renderer added) maps
    to no raw character."""
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for char in shown:
        found = raw.find(char, pos, pos + reach)
        if found < 0:
            starts.append(pos)
            ends.append(pos)
        else:
            starts.append(found)
            ends.append(found + 1)
            pos = found + 1
    return View(shown, starts, ends)
