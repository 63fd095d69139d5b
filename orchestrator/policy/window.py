"""The live redaction window (architecture §4 "Live redaction window"); sans-I/O.

Theory of operation
-------------------
One window serves one reply. It is fed the raw visible model text of all rounds, concatenated
as the model produced it, and returns redacted text that will never change: the *stable prefix*.
It never re-redacts its own output; it always redacts raw text, from the last settled position
on, with a few characters before it kept as look-behind context.

``feed`` appends and, once 32 new bytes (UTF-8) have arrived since the last look, emits up to a
*ceiling*, the lowest of:

- the start of the last 128 bytes (the holdback), moved back to a code point start;
- the start of the trailing run without whitespace, until that run reaches 4096 bytes (then it
  is released and the next 4096 bytes of the run are held again), so a token is masked whole
  and text without spaces arrives line by line or every 4 KB;
- what the catalogue scan settles (:meth:`Redactor.scan` with ``open_end``): it stops before a
  possible secret that reaches the end and before any match crossing the ceiling.

The first two are moved back further so they never cut a user-perceived character apart (an
emoji ZWJ sequence, a skin tone, a flag, a combining mark): a draft never shows half an emoji.

Round starts after the first are *breaks* for the catalogue (word boundaries for keywords:
"Looking it up now" + a round opening with ``AKIA…`` is caught, while a key split across the
round start is still one key in the text as it is).

``release`` (end of a round) emits everything except a trailing possible secret start (one
followed only by spaces too: a line break and the rest of a hard-wrapped key may follow);
``flush`` (end of the reply) emits everything. Invariant: the concatenation of everything
emitted equals ``Redactor.redact(everything fed)``.

Proofs (:class:`~orchestrator.policy.hits.Proof`): a look that scans, scans the held text to
its end, not just to its ceiling, and keeps what that proves: no match starts before the first
match or possible secret it found, nor before the last 32 characters (where a view may still
change: ``sk_live_**`` reads as a key once ``51…`` follows). The looks after it whose ceiling lies
within the proof emit the raw text up to the ceiling without searching; the next scan starts
where the proof ends (a settled position), not at ``settled``. So each held character is scanned
about once, not at every look. A look after a small feed (fewer than ``SCAN_STEP_CHARS``, 64,
new bytes: a caller that feeds each delta) whose ceiling passed the proof by fewer than 64
characters emits up to the proof and leaves the scan to a later look: a scan costs about as much
for 100 characters as for 200 (its fixed part: candidates, views, context), so each scan covers
~160 new characters, not ~100, for ~10 characters more held on average (at most 64). A look
after a larger feed (the round's sink feeds the text held for a write at once) scans, so the
write shows all but the holdback. This needs a catalogue that recognises every possible secret
from its first character (:attr:`Redactor.prefix_closed`: the built-in shapes, and extra ones
without keywords); with another, every look scans from ``settled`` as before.

While a long possible secret (a PEM block, say) stays open, the next look is deferred until the
text has grown by a quarter of its length (at least 32 bytes), so holding it costs linear time.

Memory: the text before the last settled position is dropped, except the look-behind context.
A settled position is one no match spans, so the cut provably splits no match. What remains is
the holdback, a held run (≤ 4 KB) or an open possible secret (each shape is bounded) — or, in
the rare round held behind a carried possible secret start (below), that round's text.

Restart: :meth:`begin_round` returns the whole state (strings are immutable, so it is cheap)
and :meth:`rollback` reinstates it; a failed attempt is never flushed. A possible secret start
carried over from the previous round is shared by every attempt at the next one, and one attempt
may turn it into plain text ("AKIA" + " is a prefix") while the next completes the key; so
during a round the carried text is emitted only as far as it has become secrets (masked), and
otherwise waits for the round to end (``carried``: the round is then held, as by a guardrail).
The carried text may hold more than one possible secret start (a password in a URL, then a key
start): masking the first does not show the rest (:func:`~orchestrator.policy.hits.masked_to`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from orchestrator.policy.catalogue import TAIL_REACH, Redactor
from orchestrator.policy.folding import folded
from orchestrator.policy.graphemes import grapheme_start
from orchestrator.policy.hits import Proof, masked_to, settled
from orchestrator.policy.joints import trailing_joint
from orchestrator.policy.lookbehind import view_context
from orchestrator.policy.searches import SearchMemo

__all__ = [
    "HOLDBACK_BYTES",
    "RESCAN_BYTES",
    "RUN_LIMIT_BYTES",
    "RedactionWindow",
    "WindowState",
    "after_last_space",
]

HOLDBACK_BYTES = 128
"""The window never emits the last 128 bytes (UTF-8) of what it was fed, until a round ends."""
RESCAN_BYTES = 32
"""The window looks again after 32 new bytes (a reader is waiting: smaller than a batch's 256)."""
RUN_LIMIT_BYTES = 4096
"""A trailing run without whitespace is held until it ends or reaches 4096 bytes."""
CONTEXT_CHARS = 64
"""Characters kept before the settled position as look-behind context (the catalogue's
look-behinds reach at most 14 characters back)."""
PROOF_MARGIN_CHARS = HOLDBACK_BYTES // 4
"""A look's proof ends this many characters before the end of the text it scanned, or earlier
(at a possible secret or a match): where a view may still change (``sk_live_**`` + ``51…``).
The holdback holds at least this many characters, so the margin never stops a look short of
its own ceiling. What a scan finds starting in these characters changes no look, so the
redactor may leave out what starts in the last :data:`~.catalogue.TAIL_REACH` (``quiet_tail``)."""
assert PROOF_MARGIN_CHARS >= TAIL_REACH
SCAN_STEP_CHARS = 64
"""A look after a feed of fewer new bytes whose ceiling passed the last proof by fewer characters
emits up to the proof and leaves the scan to a later look: fed delta by delta, a scan then
covers ~160 new characters of prose (the holdback less the proof's margin, plus this), not
~100."""
_PRUNE_CHARS = 4096


def after_last_space(text: str) -> int | None:
    """The index after the last whitespace character of ``text`` (what ``re``'s ``\\s``
    matches: ``str.isspace``, the whitespace ``str.split`` splits at), or ``None`` when there
    is none; in C string operations, not a regular-expression search back from the end."""
    if not text:
        return None
    if text[-1].isspace():
        return len(text)
    word = text.rsplit(None, 1)[-1]  # the trailing run without whitespace
    return len(text) - len(word) if len(word) < len(text) else None


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


@dataclass(slots=True)
class WindowState:
    """Everything a window knows; indices are into ``text``. A window mutates its own state;
    :meth:`RedactionWindow.checkpoint` hands out copies.

    Attributes:
        text: raw text from the look-behind context on.
        settled: the raw index up to which output has been emitted (a settled position).
        unsettled_bytes: UTF-8 length of what was fed after ``settled``.
        fresh_bytes: bytes fed since the last look.
        next_look_bytes: how many fresh bytes trigger the next look.
        run_from: where the held trailing run starts (``len(text)`` when there is none).
        run_bytes: UTF-8 length of the run from ``run_from`` on.
        carried: what the text at ``settled`` is, when it was carried over from an earlier
            round: ``"open"`` (a possible secret start, unresolved), ``"held"`` (this attempt
            would show some of it unmasked: held to the end of the round); ``None`` otherwise.
        carried_end: where the carried text ends (while ``carried`` is set).
        breaks: where rounds after the first start (indices into ``text``, at or after
            ``settled``): word boundaries for keywords (architecture §4 "Scope").
        context: a position at or before ``settled`` that no token spans, where the views of
            the last scan began (:func:`view_context`: its look-behind counted in view
            characters): the next scan's context is found from there, and the front is never
            dropped past it.
    """

    text: str = ""
    settled: int = 0
    unsettled_bytes: int = 0
    fresh_bytes: int = 0
    next_look_bytes: int = RESCAN_BYTES
    run_from: int = 0
    run_bytes: int = 0
    carried: Literal["open", "held"] | None = None
    carried_end: int = 0
    breaks: tuple[int, ...] = ()
    context: int = 0


class RedactionWindow:
    """The live redaction window of one reply.

    Args:
        redactor: the catalogue to apply.
        reuse_proofs: let a look take its output from the last look's proof when that reaches
            its ceiling (see the module); ``False`` scans the held text at every look (the
            reference the tests compare with: the same text in the end, and after every call
            one window has emitted a prefix of what the other has, as a look may stop at
            another possible secret start).
        remember_searches: let a look search each shape from where the last look's search
            of it stopped (:class:`~orchestrator.policy.searches.SearchMemo`); ``False``
            searches from the scan's start at every look (the reference the tests compare
            with: the same output after every call).
    """

    def __init__(
        self, redactor: Redactor, *, reuse_proofs: bool = True, remember_searches: bool = True
    ) -> None:
        self._redactor = redactor
        self._reuse = reuse_proofs and redactor.prefix_closed
        self._state = WindowState()
        self._pending: list[str] = []  # fed but not yet joined into ``_state.text``
        # The first ``_counted`` pending parts (``_pending_chars`` characters) are counted in
        # ``unsettled_bytes`` and the held run; the rest only in ``fresh_bytes``: a delta costs
        # an append and a byte count, the rest is done once per look (:meth:`_count`).
        self._counted = 0
        self._pending_chars = 0
        # What the looks' searches ruled out in the held text (positions into ``_state.text``):
        # a look searches each shape from where the last one stopped, not from ``settled``.
        self._memo = SearchMemo() if remember_searches else None
        # What the last full scan proved (positions into ``_state.text``): looks whose ceiling
        # lies within it cut their output from it without searching again.
        self._proof: Proof | None = None
        self.scans = 0
        """How many looks scanned (the others emitted from a proof, or nothing): a count."""

    # -- the public operations ----------------------------------------------------------------

    def feed(self, text: str) -> str:
        """Add raw model text; returns newly stable redacted text (often ``""``)."""
        if not text:
            return ""
        self._pending.append(text)
        s = self._state
        fresh = s.fresh_bytes + (len(text) if text.isascii() else len(text.encode("utf-8")))
        s.fresh_bytes = fresh
        if fresh < s.next_look_bytes:
            return ""
        return self._look()

    def release(self) -> str:
        """End of a round: emit all but a trailing possible secret start."""
        return self._scan_rest(open_end=True)

    def flush(self) -> str:
        """End of the reply: emit everything."""
        return self._scan_rest(open_end=False)

    def begin_round(self) -> WindowState:
        """A round starts; returns the state to :meth:`rollback` to if it is served again.

        A possible secret start carried over from the last round is emitted during this round
        only once it has become a secret (and so is masked): another attempt at the round could
        complete it differently, so text that only this attempt made harmless is held until
        the round ends.
        """
        s = self._join()
        self._forget()
        if s.settled < len(s.text):
            s.carried = "open"
            s.carried_end = len(s.text)
        if s.text:
            s.breaks = (*s.breaks, len(s.text))
        return replace(s)

    def checkpoint(self) -> WindowState:
        """A copy of the current state, for :meth:`rollback`."""
        return replace(self._join())

    def rollback(self, state: WindowState) -> None:
        """Return to ``state``: what was fed since is forgotten, never emitted."""
        self._pending.clear()
        self._counted = self._pending_chars = 0
        self._forget()
        self._state = replace(state)

    def bytes_before_output(self) -> int:
        """How many UTF-8 bytes more :meth:`feed` can take, in any pieces, and still emit
        nothing: a lower bound (``0``: the next feed may emit). Feeds emit only from a look,
        which comes once ``next_look_bytes`` were fed since the last, and a look emits nothing
        while the unsettled text is within the holdback. A query: the caller that holds text
        for the window (the round's sink) wakes delivery only once the text could show."""
        s = self._state
        fresh = s.fresh_bytes  # counted in ``unsettled_bytes`` too, or not yet: at most twice
        return max(0, s.next_look_bytes - fresh, HOLDBACK_BYTES + 1 - s.unsettled_bytes - fresh)

    @property
    def held(self) -> str:
        """The raw text fed but not emitted yet."""
        s = self._join()
        return s.text[s.settled :]

    # -- internals --------------------------------------------------------------------------

    def _forget(self) -> None:
        """The text was replaced or will be scanned otherwise: what earlier looks learnt about
        it no longer holds."""
        if self._memo is not None:
            self._memo.clear()
        self._proof = None

    def _count(self) -> None:
        """Count the pending parts fed since the last count: their UTF-8 length in
        ``unsettled_bytes``, and the trailing run without whitespace (``run_from``,
        ``run_bytes``), as if each part had been counted as it was fed."""
        pending = self._pending
        if self._counted == len(pending):
            return
        s = self._state
        # The parts not counted yet are joined once, and kept joined for :meth:`_join`.
        if self._counted:
            new = "".join(pending[self._counted :])
            del pending[self._counted :]
            pending.append(new)
        else:
            new = "".join(pending)
            pending.clear()
            pending.append(new)
        plain = new.isascii()
        size = len(new) if plain else _utf8_len(new)
        s.unsettled_bytes += size
        space = after_last_space(new)
        if space is None:
            s.run_bytes += size
        else:
            s.run_from = len(s.text) + self._pending_chars + space
            s.run_bytes = len(new) - space if plain else _utf8_len(new[space:])
        self._pending_chars += len(new)
        self._counted = len(pending)

    def _join(self) -> WindowState:
        s = self._state
        if self._pending:
            self._count()
            pending = self._pending
            s.text += pending[0] if len(pending) == 1 else "".join(pending)
            self._pending.clear()
            self._counted = self._pending_chars = 0
        return s

    def _scan_rest(self, *, open_end: bool) -> str:
        """Scan and emit all held text, but with ``open_end`` a trailing possible secret start
        (the end of a round, where more text may follow; else the end of the reply)."""
        s = self._join()
        s.carried = None
        self._forget()
        context, s.context = self._context(s, s.settled)
        stop = len(s.text)
        if open_end and (joint := trailing_joint(folded(s.text, s.settled), s.settled)):
            # a start before (not at) spaces a hard wrap may continue is held with them
            before = s.text[:joint]
            found = self._redactor.open_hits(before, s.settled, breaks=s.breaks, context=context)
            if found is None:  # a search timed out: all from the spaces on
                stop = joint
            elif found[1] is not None and found[1] < joint:
                stop = found[1]
        scan = self._redactor.scan(
            s.text, s.settled, stop, open_end=open_end, breaks=s.breaks, context=context
        )
        return self._advance(scan.text, scan.cut, scan.open_at if open_end else None)

    def _look(self) -> str:
        self._count()
        s = self._state
        fresh, s.fresh_bytes = s.fresh_bytes, 0
        if s.unsettled_bytes <= HOLDBACK_BYTES or s.carried == "held":
            return ""
        run_held = s.run_bytes < RUN_LIMIT_BYTES
        if run_held and s.run_from <= s.settled:
            return ""  # all unsettled text is one run still held: nothing to look at
        pending = self._pending
        if pending:  # counted above: join it (what :meth:`_join` does)
            s.text += pending[0] if len(pending) == 1 else "".join(pending)
            pending.clear()
            self._counted = self._pending_chars = 0
        text = s.text
        if text.isascii():  # (O(1)) no code point is cut apart, no character extends another
            ceiling = len(text) - min(HOLDBACK_BYTES, len(text) - s.settled)
            if run_held and s.run_from < ceiling:
                ceiling = s.run_from
        else:
            ceiling = self._holdback_start(s)
            if run_held:
                ceiling = min(ceiling, s.run_from)
            ceiling = grapheme_start(text, ceiling, s.settled)
        if ceiling <= s.settled:
            return ""
        proof = self._proof
        if (
            proof is not None
            and fresh < SCAN_STEP_CHARS
            and proof.limit < ceiling < proof.limit + SCAN_STEP_CHARS
        ):
            # a look after a small feed whose ceiling passed the proof by little: the scan
            # waits for a look whose ceiling passed it by SCAN_STEP_CHARS (or that follows a
            # feed of as many bytes), and this one emits up to the proof
            ceiling = (
                proof.limit if text.isascii() else grapheme_start(text, proof.limit, s.settled)
            )
            if ceiling <= s.settled:
                return ""
        if proof is not None and ceiling <= proof.limit:
            # the last scan's proof reaches the ceiling: the raw text up to it, unsearched
            # (what :func:`~orchestrator.policy.hits.settled` gives without hits), no mask
            open_at = proof.open_at
            if open_at is not None and open_at <= ceiling:
                ceiling = open_at  # (kept, so the next look waits as after the scan)
            else:
                open_at = None
            out, cut, masked = text[s.settled : ceiling], ceiling, s.settled
        else:
            self.scans += 1
            out, cut, open_at, masked = self._scan(s, ceiling)
        if s.carried and cut > s.settled and masked < min(cut, s.carried_end):
            s.carried = "held"  # it would show carried text unmasked
            return ""
        emitted = self._advance(out, cut, open_at)
        if not run_held and s.run_from < s.settled:
            # the run reached 4 KB and was released: hold its next 4 KB from here
            s.run_from, s.run_bytes = s.settled, s.unsettled_bytes
        return emitted

    def _scan(self, s: WindowState, ceiling: int) -> tuple[str, int, int | None, int]:
        """The catalogue's open scan of ``text[settled:ceiling]`` when the last proof does not
        reach the ceiling (:meth:`_look` cuts from it when it does): its output, cut and
        possible secret start (those of :class:`~orchestrator.policy.hits.Scan`), and, while
        ``carried`` is set, how far from ``settled`` the output masks the text without a gap
        (:func:`~orchestrator.policy.hits.masked_to`; else ``settled``). The text after the
        proof (from ``settled`` when there is none) is scanned to its end, and what that proves
        kept for the next looks."""
        observer = self._redactor.observer
        proof = self._proof
        start = s.settled
        if proof is not None and proof.limit > s.settled:
            start = proof.limit  # no match starts before it: a settled position
        found = None
        if self._reuse:
            context, s.context = view_context(s.text, s.context, start, s.settled)  # _context
            # What starts in the text's last PROOF_MARGIN_CHARS (>= TAIL_REACH) characters
            # changes no look (the proof and the ceiling end before it): the redactor may
            # leave it out (``quiet_tail``).
            found = self._redactor.open_hits(
                s.text, start, breaks=s.breaks, memo=self._memo, context=context, quiet_tail=True
            )
        if found is None:  # not reused, or a search ran out of time: its mask needs the stop
            self._proof = None
            context, s.context = self._context(s, s.settled)
            scan = self._redactor.scan(
                s.text,
                s.settled,
                ceiling,
                open_end=True,
                breaks=s.breaks,
                memo=self._memo,
                context=context,
            )
            masked = s.settled
            if s.carried and scan.first_hit == s.settled:
                found = self._redactor.open_hits(
                    s.text, s.settled, breaks=s.breaks, context=context
                )
                masked = s.settled if found is None else masked_to(found[0], s.settled)
            return scan.text, scan.cut, scan.open_at, masked
        hits, open_at = found
        self._proof = Proof.of(hits, open_at, len(s.text) - PROOF_MARGIN_CHARS)
        out, cut, open_at, _ = settled(s.text, hits, s.settled, ceiling, open_at, observer)
        return out, cut, open_at, masked_to(hits, s.settled) if s.carried else s.settled

    @staticmethod
    def _context(s: WindowState, start: int) -> tuple[int, int]:
        """Where the views of a scan from ``start`` begin, and where those of a scan from
        ``settled`` do: the caller keeps the latter in ``s.context`` for the next scan to look
        back from (:func:`view_context`)."""
        return view_context(s.text, s.context, start, s.settled)

    @staticmethod
    def _holdback_start(s: WindowState) -> int:
        """The start of the last ``HOLDBACK_BYTES`` bytes, at a code point boundary."""
        n = len(s.text)
        chars = min(HOLDBACK_BYTES, n - s.settled)
        if s.text.isascii():
            return n - chars
        tail = s.text[n - chars :].encode("utf-8")
        excess = len(tail) - HOLDBACK_BYTES
        if excess <= 0:
            return n - chars
        while excess > 0 and tail[excess] & 0xC0 == 0x80:  # a UTF-8 continuation byte
            excess -= 1
        return n - chars + len(tail[:excess].decode("utf-8"))

    def _advance(self, emitted: str, cut: int, open_at: int | None) -> str:
        s = self._state
        if cut > s.settled:
            text = s.text
            s.unsettled_bytes = len(text) - cut if text.isascii() else _utf8_len(text[cut:])
            if cut >= s.carried_end:
                s.carried = None  # the carried text is all shown
        s.next_look_bytes = RESCAN_BYTES
        if open_at is not None:
            s.next_look_bytes = max(RESCAN_BYTES, (len(s.text) - open_at) // 4)
        if cut > _PRUNE_CHARS + CONTEXT_CHARS:
            drop = min(cut - CONTEXT_CHARS, s.context)
            s.context -= drop
            s.text = s.text[drop:]
            if self._memo is not None:
                self._memo.shift(drop)
            self._proof = None
            cut -= drop
            s.carried_end = max(0, s.carried_end - drop)
            s.run_from = max(0, s.run_from - drop)
            s.breaks = tuple(b - drop for b in s.breaks)
        if s.breaks and s.breaks[0] < cut:
            s.breaks = tuple(b for b in s.breaks if b >= cut)
        s.settled = cut
        return emitted
