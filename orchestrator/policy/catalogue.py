"""The leak catalogue and the redactor (architecture §4 "Leak catalogue").

Theory of operation
-------------------
A :class:`SecretShape` is a regular expression (the third-party ``regex`` module's syntax, which
is Python's ``re`` plus partial matching and variable-width look-behind), the literal keywords
that every match contains, and a name. A match is replaced by ``[REDACTED:<name>]``; when the
pattern has a group named ``secret``, only that group is replaced and the rest of the match (the
non-secret part: ``Bearer ``, ``token=``, ``//`` … ``@``) stays as written.

The catalogue is ordered. Redaction scans left to right: at each position the shapes are tried
in catalogue order and the first that matches wins (``sk-ant-…`` is an ``anthropic_key``, not an
``openai_key``); scanning resumes after the match. Each shape is searched on its own and the
leftmost hit of all shapes wins, ties going to the earlier shape — the same result as one big
alternation, without its cost: Python's engines run a 16-way alternation at a few MB/s, while a
literal-led single pattern runs at hundreds of MB/s.

Prefilter: a shape is searched only if one of its keywords occurs in the text (case-insensitive
keywords for shapes marked so), so text without any candidate keyword costs one ``str`` search
per keyword and no regular expression at all. A keyword counts only at a word boundary; the
patterns enforce that with ``(?<![A-Za-z0-9])``, an ASCII boundary, so a key glued to Japanese
text or opened by a Markdown ``_`` is still a key while ``task-list`` holds no ``sk-`` key.
*Breaks* (round starts) are boundaries too: the text is matched once more with a break there.

Views: each text is also matched as a reader reads it (:mod:`~orchestrator.policy.views`) and
each match is mapped back to the raw characters it came from. With ``open_end``, a token begun at
the end of the text (``&#11``) ends the views before it and is held as a possible secret start;
a shape's ``open_tail`` keeps open a complete match that more text could still extend.

Prefix closure (for the live window): scanning with ``open_end=True`` treats the text as a prefix
of a longer text. A shape whose match is *partial* (the ``regex`` module's ``partial=True``: the
text ended while the pattern could still match) or whose match touches the end (a greedy run that
more text could extend) is *open*: everything from its start on is unsettled and the scan stops
there. Every keyword of a shape lies inside its match (for the built-in shapes: at its start,
or after the digits of a ``telegram_bot_token``), so an open match either contains a whole keyword
or the text ends with a proper prefix of one; the prefilter checks both.
Any prefix of a secret, from its first keyword character on, is therefore recognised as a possible
secret start. Every repetition is bounded, so an open match is at most a few KB long.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import regex

from orchestrator.policy.hits import Hit, Scan, settle
from orchestrator.policy.joints import joined, spans_a_joint
from orchestrator.policy.merge import TAIL_REACH, merged_hits, quiet_view
from orchestrator.policy.open_tokens import held_from, partial_token
from orchestrator.policy.searches import (
    CompiledShape,
    SearchMemo,
    TimedOut,
    gated,
    keyword_probes,
    timed_out,
)
from orchestrator.policy.shapes import (
    BUILTIN_SHAPES,
    EXTRA_PATTERN_TIMEOUT_SECS,
    MARKER_OPEN,
    SecretShape,
    check_backtracking,
    compile_shape,
    inert,
    marker,
    may_be_inert,
)
from orchestrator.policy.views import (
    View,
    context_start,
    folded,
    has_tokens,
    normalised,
    unwrapped,
)

__all__ = [
    "BUILTIN_SHAPES",
    "EXTRA_PATTERN_TIMEOUT_SECS",
    "TAIL_REACH",
    "Hit",
    "Redactor",
    "Scan",
    "SecretShape",
    "check_backtracking",
    "compile_shape",
    "marker",
]


class Redactor:
    """Redacts text with an ordered catalogue of shapes; sans-I/O and reusable.

    Every text is matched as it is and as a reader sees it (:mod:`~orchestrator.policy.views`:
    entities, JSON escapes and percent-encoding decoded, Markdown escapes and link syntax gone,
    invisible characters removed, NFKC); a match in a view replaces the raw characters it came
    from. Overlapping matches of different views are merged into one replacement.

    *Breaks* (raw positions, e.g. where a round of the reply starts) are word boundaries for
    keywords: the text is matched once more with a break inserted there, while a key running
    across the break is still caught in the text as it is.

    A shape with a time bound whose search times out redacts the searched text from where the
    search began up to the scan's stop (conservatively), and is logged once per shape.

    Args:
        shapes: the catalogue, in order (default: :data:`BUILTIN_SHAPES`).
        prechecks: search each shape's lead before its pattern (``SecretShape.lead``); ``False``
            searches the patterns alone (the reference the tests compare with: the same
            results, slower).

    Raises:
        ValueError: a shape's pattern does not compile or matches the empty string.
    """

    def __init__(
        self, shapes: Iterable[SecretShape] = BUILTIN_SHAPES, *, prechecks: bool = True
    ) -> None:
        self._shapes = tuple(shapes)
        self._compiled = tuple(CompiledShape(shape, leads=prechecks) for shape in self._shapes)
        # The prefilter, flattened: (keyword, shape index), per case sensitivity.
        self._always = frozenset(i for i, c in enumerate(self._compiled) if c.always)
        self._probes = tuple(
            (k, i) for i, c in enumerate(self._compiled) if not c.ignore_case for k in c.keywords
        )
        self._probes_ci = tuple(
            (k, i) for i, c in enumerate(self._compiled) if c.ignore_case for k in c.keywords
        )
        self.gated = gated(self._probes, self._probes_ci)
        self._longest = max((len(k) for k, _ in (*self._probes, *self._probes_ci)), default=1)
        self._prefixes = tuple(p for c in self._compiled if not c.ignore_case for p in c.prefixes)
        self._prefixes_ci = tuple(p for c in self._compiled if c.ignore_case for p in c.prefixes)
        # Per shape, its prefixes by last character: the few a tail can end with.
        self._prechecks = prechecks
        self._ending: tuple[dict[str, list[tuple[int, tuple[str, ...]]]], ...] = ({}, {})
        for index, shape in enumerate(self._compiled):
            for last in sorted({p[-1] for p in shape.prefixes}):
                ending = tuple(p for p in sorted(shape.prefixes) if p[-1] == last)
                self._ending[shape.ignore_case].setdefault(last, []).append((index, ending))
        self._shape_probes = keyword_probes(self._compiled)  # the pre-checked prefilter
        self._builtin = frozenset(i for i, s in enumerate(self._shapes) if s in BUILTIN_SHAPES)
        # The same for the shapes but the built-in ones (a scan with a quiet tail leaves those out).
        self._ending_extra = tuple(
            {
                last: kept
                for last, entries in by.items()
                if (kept := [e for e in entries if e[0] not in self._builtin])
            }
            for by in self._ending
        )
        self._timeouts = 0  # searches that ran out of time, ever
        self.prefix_closed = all(not s.keywords or s in BUILTIN_SHAPES for s in self._shapes)
        """Whether an open scan recognises every possible secret from its first character
        (the built-in shapes, whose keywords or their prefixes stand there, and shapes without
        keywords, searched in every text): then what it settles stays settled however the
        text continues (:class:`~orchestrator.policy.hits.Proof`)."""
        self.observer: Callable[[str], None] | None = None
        """Told the shape name of every secret a scan replaces (the daemon's metrics)."""
        self.overmask_observer: Callable[[str, str], None] | None = None
        """Told ``(shape, scope)`` when a last resort masked more than a secret: its ``line``
        or the whole ``piece`` (:func:`~orchestrator.policy.rendered.redact_rendered`)."""

    @property
    def shapes(self) -> tuple[SecretShape, ...]:
        return self._shapes

    def redact(self, text: str, breaks: Sequence[int] = ()) -> str:
        """Replace every secret in ``text`` by its marker (``breaks``: see the class)."""
        return self.scan(text, 0, len(text), open_end=False, breaks=breaks).text

    def candidates(self, text: str, *, open_end: bool = False) -> tuple[str, ...]:
        """Names of the shapes the keyword prefilter lets through for ``text`` as it is; with
        ``open_end`` a text ending with a proper prefix of a keyword lets that shape through.
        Empty: ``text`` has no candidate keyword and no regular expression runs on it."""
        return tuple(shape.name for shape, _ in self._candidates(text, 0, open_end))

    def hits(self, text: str, start: int = 0, breaks: Sequence[int] = ()) -> Iterator[Hit]:
        """The settled matches of ``text[start:]`` in order, merged across views (characters
        before ``start`` serve as look-behind context only)."""
        hits, _ = self._collect(text, start, len(text), False, breaks)
        yield from hits

    def scan(
        self,
        text: str,
        start: int,
        stop: int,
        *,
        open_end: bool,
        breaks: Sequence[int] = (),
        memo: SearchMemo | None = None,
        context: int | None = None,
    ) -> Scan:
        """Redact ``text[start:stop]`` as far as it is settled.

        With ``open_end`` the text may continue: the scan ends before ``stop`` at the first
        possible secret that reaches the end of ``text`` (in any view), and at the start of any
        match that crosses ``stop``. ``start`` must be a settled position (no match spans it).
        ``breaks``: raw positions that are word boundaries (sorted). ``memo``: what earlier
        open scans of the same growing text learnt (:class:`SearchMemo`), used and updated.
        ``context``: where its views begin at the latest (:func:`~.lookbehind.view_context`).

        Returns:
            the output for ``text[start:cut]``; joining the outputs of consecutive scans gives
            :meth:`redact` of the whole text, whatever follows.
        """
        hits, open_at = self._collect(text, start, stop, open_end, breaks, memo, context)
        return settle(text, hits, start, stop, open_at, self.observer)

    def open_hits(
        self,
        text: str,
        start: int,
        *,
        breaks: Sequence[int] = (),
        memo: SearchMemo | None = None,
        context: int | None = None,
        quiet_tail: bool = False,
    ) -> tuple[list[Hit], int | None] | None:
        """What :meth:`scan` of ``text[start:]`` with ``open_end`` finds before it cuts: the
        settled matches (sorted) and the first possible secret start (or ``None``), the same
        for every stop; ``None`` when a search ran out of time (its masked span depends on
        the stop: scan with the stop instead). ``quiet_tail``: the caller takes a match or a
        possible secret that starts in the last :data:`TAIL_REACH` characters for none (the
        live window's proofs end before them), and those may be left out."""
        timeouts = self._timeouts
        found = self._collect(
            text, start, len(text), True, breaks, memo, context, quiet_tail=quiet_tail
        )
        return found if self._timeouts == timeouts else None

    # -- views ------------------------------------------------------------------------------

    def _collect(
        self,
        text: str,
        start: int,
        stop: int,
        open_end: bool,
        breaks: Sequence[int],
        memo: SearchMemo | None = None,
        context: int | None = None,
        *,
        quiet_tail: bool = False,
    ) -> tuple[list[Hit], int | None]:
        """Hits of every view in raw coordinates, merged, and the first open position."""
        begin = min(context_start(text, start), start if context is None else context)
        unfolded = text
        if not text.isascii():  # (ASCII text folds to itself)
            text = folded(text, begin)  # space, dash and look-alike variants; every index kept
        held: int | None = None
        tokens = has_tokens(text, begin)
        if open_end:
            # A token begun at the end (``&#11``) may become any character: the views end before
            # it, so what precedes it stays a possible secret start, and it is held itself.
            held = held_from(text, start) if tokens else partial_token(text, start)
            if held is not None:
                text = text[:held]
                stop = min(stop, held)
                tokens = has_tokens(text, begin)
        cuts = [b for b in breaks if start <= b <= len(text)] if breaks else breaks
        joints = joined(text, begin, open_end=open_end, prechecks=self._prechecks)
        quiet_tail = quiet_tail and held is None  # the raw view's tail is the text's
        if memo is not None and not (open_end and text is unfolded):
            memo.ruled.clear()  # only the raw text's open searches are remembered
            memo = None
        if not tokens and not cuts and joints is None:  # the usual text: the raw view alone
            raw_hits: list[Hit] = []
            open_raw: int | None = held
            for hit in self._hits(
                text,
                start,
                stop,
                open_end=open_end,
                memo=memo,
                end_inert=True,
                quiet_tail=quiet_tail,
            ):
                if isinstance(hit, int):
                    open_raw = hit if open_raw is None else min(open_raw, hit)
                    break
                raw_hits.append(hit)
            return raw_hits, open_raw
        views: list[View | None] = [None]
        decoded = normalised(text, begin) if tokens else None
        if decoded is not None:
            views.append(decoded)
            # the tokens inside markup the decoded view drops whole, decoded
            inside_markup = unwrapped(text, begin)
            if inside_markup is not None:
                views.append(inside_markup)
        first_broken = len(views)  # the views from here on have the breaks in them
        if cuts:
            views.append(normalised(text, begin, cuts, decode=False))
            if tokens:
                views.append(normalised(text, begin, cuts))
        first_joined = len(views)  # the views from here on have their joints removed
        at_joint: list[tuple[int, ...]] = []
        for found_joints in (
            joints,
            joined(text, begin, open_end=open_end, base=decoded, prechecks=self._prechecks)
            if decoded is not None
            else None,
        ):
            if found_joints is not None:
                views.append(found_joints[0])
                at_joint.append(found_joints[1])
        at_break = frozenset(cuts)
        raw_text = text
        # a hit (at or after ``start``) may be a marker: pre-checked, where one opens near it
        # (tested at the first hit a view adds)
        markers: bool | None = None
        found: list[tuple[int, int, Hit]] = []
        open_at: int | None = None
        timeouts = self._timeouts
        for order, view in enumerate(views):
            if self._timeouts != timeouts:
                break  # a view timed out and masked the scanned text: the others add nothing
            searches = memo  # the raw text's remembered searches (the first view) only
            memo = None
            if view is None:
                vtext, vstart, vstop = text, start, stop
                end_inert = True
            else:
                vtext, vstart = view.text, view.view_index(start)
                vstop = view.view_index(stop)
                end_inert = view.raw_start(len(vtext)) == len(text)
            for hit in self._hits(
                vtext,
                vstart,
                vstop,
                open_end=open_end,
                memo=searches,
                end_inert=end_inert,
                quiet_tail=quiet_tail and (view is None or quiet_view(view, len(text))),
            ):
                if isinstance(hit, int):
                    raw = hit if view is None else view.raw_start(hit)
                    open_at = raw if open_at is None else min(open_at, raw)
                    break
                joints_at = at_joint[order - first_joined] if order >= first_joined else None
                if joints_at is not None and not spans_a_joint(joints_at, hit.start, hit.end):
                    continue  # a joined view adds only the matches that run across a joint
                if view is not None:
                    hit = Hit(
                        hit.name,
                        view.raw_start(hit.start),
                        view.raw_end(hit.end),
                        view.raw_start(hit.secret_start),
                        view.raw_end(hit.secret_end),
                    )
                    if hit.end <= hit.start:
                        continue
                    if markers is None:
                        markers = self._may_be_inert(raw_text, start)
                    if markers and inert(raw_text, hit.secret_start, hit.secret_end):
                        continue
                    if first_broken <= order < first_joined and not (
                        hit.start in at_break or hit.end in at_break
                    ):
                        continue  # a break view adds only the matches a break bounds
                found.append((hit.start, order, hit))
        if held is not None:
            open_at = held if open_at is None else min(open_at, held)
        if len(views) == 1:
            return [hit for _, _, hit in found], open_at
        found.sort(key=lambda item: (item[0], item[1]))
        merged: list[Hit] = []
        for _, _, hit in found:
            if merged and hit.start < merged[-1].end:
                top = merged[-1]
                merged[-1] = Hit(
                    top.name,
                    top.start,
                    max(top.end, hit.end),
                    min(top.secret_start, hit.secret_start),
                    max(top.secret_end, hit.secret_end),
                )
            else:
                merged.append(hit)
        return merged, open_at

    # -- the merge of per-shape searches ----------------------------------------------------

    def _candidates(
        self, text: str, start: int, open_end: bool, *, late: bool = True
    ) -> list[tuple[CompiledShape, int]]:
        """The shapes to search, each with where its search begins: ``start``, or (pre-checked)
        for a built-in shape let through only by a keyword's prefix at the end, the last
        :data:`TAIL_REACH` characters (tests/test_policy_prechecks.py compares them); without
        ``late``, not those (pre-checked: for a scan with a quiet tail)."""
        region = text[start:] if start else text
        lowered: str | None = None
        found = set(self._always)
        if self._prechecks:
            # One test per shape (its keyword, or its keywords' pattern): the same shapes as
            # the probes of every keyword below (tests/test_policy_prechecks.py compares them).
            shaped = self._shape_probes
            for keyword, index in shaped.words:
                if keyword in region:
                    found.add(index)
            for gate, search, index in shaped.sets:
                if (not gate or gate in region) and search(region) is not None:
                    found.add(index)
            lowered = region.lower()
            for keyword, index in shaped.words_ci:
                if keyword in lowered:
                    found.add(index)
            for gate, search, index in shaped.sets_ci:
                if (not gate or gate in region) and search(lowered) is not None:
                    found.add(index)
        else:
            for gate, probes, probes_ci in self.gated:
                if gate and gate not in region:
                    continue  # every keyword of the group holds ``gate``
                for keyword, index in probes:
                    if keyword in region:
                        found.add(index)
                if probes_ci:
                    if lowered is None:
                        lowered = region.lower()
                    for keyword, index in probes_ci:
                        if keyword in lowered:
                            found.add(index)
        ending: set[int] = set()
        if open_end and region and self._prechecks:
            # A proper prefix of a keyword the tail ends with ends with the tail's last character.
            endings = self._ending if late else self._ending_extra
            tail = region[-self._longest :]
            for index, prefixes in endings[False].get(tail[-1], ()):
                if tail.endswith(prefixes):
                    ending.add(index)
            if endings[True]:
                low_tail = tail.lower()
                for index, prefixes in endings[True].get(low_tail[-1], ()):
                    if low_tail.endswith(prefixes):
                        ending.add(index)
            ending -= found
            found |= ending
        elif open_end:
            # Lowering maps each character on its own (a final sigma aside, never ASCII), so
            # the tail lowered ends as the whole region lowered does.
            tail = region[-self._longest :]
            low_tail = tail.lower()
            if tail.endswith(self._prefixes) or low_tail.endswith(self._prefixes_ci):
                for index, shape in enumerate(self._compiled):  # rare: which shapes end it
                    if (low_tail if shape.ignore_case else tail).endswith(shape.prefixes):
                        found.add(index)
        compiled = self._compiled
        if not ending:
            return [(compiled[i], start) for i in sorted(found)]
        at, tail_only = max(start, len(text) - TAIL_REACH), ending & self._builtin
        return [(compiled[i], at if i in tail_only else start) for i in sorted(found)]

    def _may_be_inert(self, text: str, start: int) -> bool:
        """Whether a hit at or after ``start`` may be a marker (pre-checked: one opens near)."""
        return may_be_inert(text, start) if self._prechecks else MARKER_OPEN in text

    def _search(
        self, shape: CompiledShape, text: str, pos: int, partial: bool, *, at_end: bool = True
    ) -> regex.Match[str] | TimedOut | None:
        try:
            return shape.search(text, pos, partial, at_end=at_end)
        except TimeoutError:
            self._timeouts += 1
            return timed_out(shape, pos)

    def _hits(
        self,
        text: str,
        start: int,
        stop: int,
        *,
        open_end: bool,
        memo: SearchMemo | None = None,
        end_inert: bool = False,
        quiet_tail: bool = False,
    ) -> Iterator[Hit | int]:
        """Settled hits in order; with ``open_end`` a final ``int`` marks an open match
        (:func:`~orchestrator.policy.merge.merged_hits`, which says what the flags do)."""
        quiet = quiet_tail and self._prechecks
        found = self._candidates(text, start, open_end, late=not quiet)
        if not found:
            return iter(())  # (with a quiet tail, what the left-out shapes find starts in it)
        return merged_hits(
            found,
            self._search,
            self._may_be_inert,
            text,
            start,
            stop,
            open_end=open_end,
            memo=memo,
            end_inert=end_inert,
            complete=(lambda: self._candidates(text, start, open_end)) if quiet else None,
        )
