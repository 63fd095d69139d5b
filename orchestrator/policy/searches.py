"""How the redactor searches one shape (architecture §4 "Leak catalogue"): a shape compiled,
its keyword probes grouped for the prefilter, and what earlier open searches ruled out.

The redactor (:mod:`~orchestrator.policy.catalogue`) merges the per-shape searches; this module
holds what one search needs, so a change to how a pattern is searched (time bounds, partial
matching, remembered searches) stays apart from how the views and the merge work.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import TypeAlias

import regex

from orchestrator.policy.shapes import SecretShape, compile_shape

__all__ = [
    "GATES",
    "CompiledShape",
    "Head",
    "KeywordProbes",
    "Search",
    "SearchMemo",
    "TimedOut",
    "gated",
    "head_start",
    "keyword_probes",
    "overlapping_head",
    "timed_out",
    "timed_search",
]

log = logging.getLogger("orchestrator.policy.catalogue")


class CompiledShape:
    """A shape compiled: its pattern, its keywords for the prefilter, its time bound, and its
    lead (``SecretShape.lead``), searched first when ``leads`` is set.

    A full or partial match of the pattern starts only where the lead matches, or as the empty
    partial match at the end of the text, so a search from ``pos`` finds what a search from the
    lead's first match (or from the end of the text, when there is none) finds: the ``regex``
    module reports the first full match, else the first partial one, and no position before
    that start holds either (tests/test_policy_prechecks.py compares the two on generated text).
    """

    __slots__ = (
        "always",
        "ignore_case",
        "keywords",
        "lead",
        "name",
        "pattern",
        "prefixes",
        "secret",
        "tail",
        "timed_out",
        "timeout",
    )

    def __init__(self, shape: SecretShape, *, leads: bool = True) -> None:
        self.name = shape.name
        self.pattern = compile_shape(shape)
        self.secret = self.pattern.groupindex.get("secret")
        self.ignore_case = shape.ignore_case
        words = tuple(k.lower() if shape.ignore_case else k for k in shape.keywords)
        self.keywords = words
        self.prefixes = tuple({k[:i] for k in words for i in range(1, len(k))})
        self.always = not words
        self.timeout = shape.timeout_secs
        self.timed_out = False
        self.tail = regex.compile(shape.open_tail) if shape.open_tail else None
        self.lead = re.compile(shape.lead) if leads and shape.lead else None

    def search(
        self, text: str, pos: int, partial: bool, *, at_end: bool = True
    ) -> regex.Match[str] | None:
        """The first full (else partial, with ``partial``) match from ``pos``; ``at_end``:
        also the empty partial match at the end of the text when the lead does not occur
        from ``pos`` on (``False``: ``None`` then, unsearched)."""
        if self.lead is not None:
            found = self.lead.search(text, pos)
            if found is not None:
                pos = found.start()
            elif partial and at_end:
                pos = max(pos, len(text))  # only the empty partial match at the end is left
            else:
                return None
        if self.timeout is None:
            return self.pattern.search(text, pos, partial=partial)
        # Once a pattern has run out of time, it is known to stall on some text: its later
        # searches get a tenth of the bound, so each costs the event loop a few ms at most.
        bound = self.timeout / 10 if self.timed_out else self.timeout
        return self.pattern.search(text, pos, partial=partial, timeout=bound)


class SearchMemo:
    """What the open searches of one growing text have ruled out, kept across scans (the live
    window's: its text only grows between two scans, and its front is cut off by
    :meth:`shift`).

    A partial search (``partial=True``) from ``pos`` that finds its first full or partial match
    at ``q`` (or none: ``q`` is the text's end) proves that no match of the shape starts in
    ``[pos, q)`` however the text continues: a start there fails before the text's end, and so
    fails in every longer text. The next scan's search of that shape therefore begins at ``q``
    (``ruled``), not at the scan's start: each held character is searched about once, not once
    per scan. Time-outs are not remembered.

    A shape with a lead whose lead does not occur from there on has no match or partial match
    left but the empty partial match at the end of the text (:class:`CompiledShape`); the memo
    does not search for it: it reports none. For an open scan of a growing text, an open
    position at the end of the text is none: a scan's stop is at most the end (the output up
    to it is the same), and a proof ends before the end (:class:`~orchestrator.policy.hits.Proof`)
    (tests/test_policy_prechecks.py compares windows with and without leads).
    """

    __slots__ = ("ruled",)

    def __init__(self) -> None:
        self.ruled: dict[CompiledShape, int] = {}

    def search(self, search: Search, shape: CompiledShape, text: str, start: int) -> Head:
        """``search(shape, text, pos, True)`` from ``start`` or from where it was ruled out."""
        pos = max(start, self.ruled.get(shape, start))
        if shape.lead is not None:
            lead = shape.lead.search(text, pos)
            if lead is None:  # no search for the empty partial match at the end
                self.ruled[shape] = len(text)
                return None
            pos = lead.start()
        head = search(shape, text, pos, True)
        if head is None:
            self.ruled[shape] = len(text)
        elif isinstance(head, regex.Match):
            self.ruled[shape] = head.start()
        else:
            self.ruled.pop(shape, None)
        return head

    def shift(self, drop: int) -> None:
        """The first ``drop`` characters of the text were cut off."""
        for shape, pos in self.ruled.items():
            self.ruled[shape] = pos - drop

    def clear(self) -> None:
        """Forget everything (the text was replaced, or scanned otherwise)."""
        self.ruled.clear()


class TimedOut:
    """A search of ``shape`` from ``start`` on that ran out of time."""

    __slots__ = ("shape", "start")

    def __init__(self, shape: CompiledShape, start: int) -> None:
        self.shape = shape
        self.start = start


def timed_search(
    shape: CompiledShape, text: str, pos: int, partial: bool, *, at_end: bool = True
) -> regex.Match[str] | TimedOut | None:
    """``shape``'s search from ``pos`` (partial matches too with ``partial``; ``at_end``: see
    :meth:`CompiledShape.search`), or :class:`TimedOut` when it ran out of time (logged once
    per shape: the text it searched is redacted)."""
    try:
        return shape.search(text, pos, partial, at_end=at_end)
    except TimeoutError:
        return timed_out(shape, pos)


def timed_out(shape: CompiledShape, pos: int) -> TimedOut:
    """What a search of ``shape`` from ``pos`` that ran out of time gives (logged once per
    shape: the text it searched is redacted)."""
    if not shape.timed_out:
        shape.timed_out = True
        log.warning(
            "secret pattern %r took longer than %s s: the text it searched is redacted",
            shape.name,
            shape.timeout,
        )
    return TimedOut(shape, pos)


GATES = ("//", "=", "_", ":", "-", ".")
"""Substrings that gate the keyword probes (see :func:`gated`), rare in prose first."""


def gated(
    probes: Sequence[tuple[str, int]], probes_ci: Sequence[tuple[str, int]]
) -> tuple[tuple[str, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]], ...]:
    """The keyword probes in groups ``(gate, probes, case-insensitive probes)``: each keyword
    of a group holds its gate (a run of punctuation, the same in every case), so a text
    without the gate holds none of them and the group's probes are skipped; the group with
    the gate ``""`` is always probed."""
    groups: dict[str, tuple[list[tuple[str, int]], list[tuple[str, int]]]] = {}
    for bucket, entries in ((0, probes), (1, probes_ci)):
        for keyword, index in entries:
            gate = next((g for g in GATES if g in keyword), "")
            groups.setdefault(gate, ([], []))[bucket].append((keyword, index))
    return tuple((gate, tuple(cs), tuple(ci)) for gate, (cs, ci) in groups.items())


class KeywordProbes:
    """The keyword prefilter of a catalogue one shape at a time, split so that each test is a
    single C call (see :func:`keyword_probes`): ``words`` and ``words_ci`` hold ``(keyword,
    index)`` for the shapes with one keyword, ``sets`` and ``sets_ci`` hold ``(gate, search,
    index)`` for those with several; ``_ci``: tested on the lowered text."""

    __slots__ = ("sets", "sets_ci", "words", "words_ci")

    def __init__(self) -> None:
        self.words: list[tuple[str, int]] = []
        self.words_ci: list[tuple[str, int]] = []
        self.sets: list[tuple[str, Callable[[str], re.Match[str] | None], int]] = []
        self.sets_ci: list[tuple[str, Callable[[str], re.Match[str] | None], int]] = []


def keyword_probes(shapes: Sequence[CompiledShape]) -> KeywordProbes:
    """The keyword prefilter of ``shapes`` one shape at a time. A shape with one keyword is
    probed with it (``in``); one with several by a pattern that finds a match in a text exactly
    when one of its keywords occurs in it: one search where the keywords each cost a ``str``
    search (the shape is a candidate if any occurs; which one does not matter), after a test of
    its gate (see :data:`GATES`), held by every keyword of the shape (``""``: none is). With a
    gate, the pattern is led by the gate (the standard engine skips to each one) and then reads
    each keyword around it: ``sk_live_`` is ``_`` with ``sk_`` behind it and ``live_`` ahead;
    without, it is the keywords' alternation."""
    probes = KeywordProbes()
    for index, shape in enumerate(shapes):
        words = shape.keywords
        if len(words) == 1:
            (probes.words_ci if shape.ignore_case else probes.words).append((words[0], index))
        elif words:
            gate = next((g for g in GATES if all(g in k for k in words)), "")
            if gate:
                around = []
                for word in words:
                    at = word.index(gate) + len(gate)
                    ahead = f"(?={re.escape(word[at:])})" if word[at:] else ""
                    around.append(f"(?<={re.escape(word[:at])}){ahead}")
                probe = re.compile(f"{re.escape(gate)}(?:{'|'.join(around)})")
            else:
                probe = re.compile("|".join(map(re.escape, words)))
            (probes.sets_ci if shape.ignore_case else probes.sets).append(
                (gate, probe.search, index)
            )
    return probes


def overlapping_head(
    heads: Sequence[regex.Match[str] | TimedOut | None], best: int, end: int
) -> regex.Match[str] | None:
    """A head other than ``best`` that starts before ``end`` and ends after it."""
    for index, other in enumerate(heads):
        if index != best and isinstance(other, regex.Match) and other.start() < end < other.end():
            return other
    return None


def head_start(head: regex.Match[str] | TimedOut) -> int:
    return head.start if isinstance(head, TimedOut) else head.start()


Head: TypeAlias = "regex.Match[str] | TimedOut | None"
"""A shape's next match (full or partial), a search that ran out of time, or none."""
Search: TypeAlias = Callable[[CompiledShape, str, int, bool], Head]
"""``search(shape, text, pos, partial)``: the redactor's search of one shape."""
