"""Joints: where a secret is split by a hard wrap or into adjacent string pieces, and the view
of a text with them removed (architecture §4, "What the reader sees is what is checked").

A key wrapped onto the next line (``…AAAA\\n    BBBB…``, a Markdown hard break, quote prefixes)
or written as adjacent string pieces (``"sk-…" + "…"``, f/r prefixes, ``.``, ``++``) reads as one
key to whoever copies it. :func:`joined` removes such joints, but only where what follows reads as
more of a key (8+ token characters with a letter and a digit, or 16 letters), so the next line
of ordinary text stays text. Every pattern is bounded and atomic: a search is linear in the text.
Pure: no I/O.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

import regex

from orchestrator.policy.views import View

__all__ = [
    "OPEN_JOINT_CHARS",
    "ends_in_a_joint",
    "joined",
    "may_end_in_a_joint",
    "spans_a_joint",
    "trailing_joint",
]


_TOKEN_CHAR = r"[A-Za-z0-9_+/=-]"
_LINE_BREAK = r"(?:\r\n|[\n\r\x0b\x0c\x85\u2028\u2029])"
# What continues a secret after a joint: 8 token characters or more, with a letter and a digit
# among them, or 16 letters in a row. A line or a piece that starts with a word (``README``,
# ``OPENAI_API_KEY=…``, ``2.``, ``3 retries``, ``--verbose``, ``"done"``) is text of its own.
_KEY_LIKE = (
    rf"(?={_TOKEN_CHAR}{{8}})(?:(?={_TOKEN_CHAR}{{0,255}}[0-9])(?={_TOKEN_CHAR}{{0,255}}[A-Za-z])"
    r"|(?=[A-Za-z]{16}))"
)
# A hard wrap: a Markdown hard break's "\", a line break (a blank line is a paragraph), the next
# line's indentation and quote prefix. Adjacent string pieces: a closing quote, an operator
# ("+", "++", ".", "..", "&", "||"), line breaks, a string prefix (f"…", r'…') and an opening
# quote. Every repeat is bounded and the groups are atomic: a search is linear in the text.
_WRAP = (
    rf"(?>\\?[ \t]{{0,16}}{_LINE_BREAK}[ \t]{{0,64}}"
    r"(?:>[ \t]{0,4}){0,8})"
)
_OPERATOR = r"(?:\+{1,2}|\.{1,2}|&{1,2}|\|{1,2})"
_BETWEEN = (
    rf"(?>[ \t]{{0,16}}(?:{_OPERATOR}[ \t]{{0,16}})?"
    rf"(?:{_LINE_BREAK}[ \t]{{0,64}}(?:{_LINE_BREAK}[ \t]{{0,64}})?(?:{_OPERATOR}[ \t]{{0,16}})?)?"
    r"(?:[rRbBfFuU]{1,2})?)"
)
_QUOTE = r"[\"'`]"
# How every joint ends (a necessary condition, in the standard engine, which skips to the line
# breaks and quotes it starts with): a line break and the next line's indentation and quote
# prefix, or a closing quote, then a key-like run. It is led by one class of both, so that the
# engine skips to them (an alternation of two classes it tries at every position); the
# indentation is read only after a line break (tests/test_policy_joint_end.py).
_JOINT_END = re.compile(
    rf"[\n\r\x0b\x0c\x85\u2028\u2029\"'`](?:(?<=[\n\r\x0b\x0c\x85\u2028\u2029])[ \t>]*)?{_KEY_LIKE}"
)
_JOINT = regex.compile(rf"(?<={_TOKEN_CHAR})(?:{_WRAP}|{_QUOTE}{_BETWEEN}{_QUOTE})(?={_KEY_LIKE})")
# A joint the text may still be inside of, or whose next run of token characters has not ended
# yet (``…AAAA\n``, ``…AAAA\nREAD``, ``"…AAAA" + '``): the text ends there.
_OPEN_JOINT = regex.compile(
    rf"(?<={_TOKEN_CHAR})(?:(?:{_WRAP}|{_QUOTE}{_BETWEEN}{_QUOTE})(?P<run>{_TOKEN_CHAR}{{0,255}})"
    rf"|{_QUOTE}{_BETWEEN}(?P<run>))\Z",
    flags=regex.REVERSE,  # searched from the end: one try at the end, ~10x faster than forward
)
_TRAILING_JOINT = regex.compile(r"(?:[ \t]{1,16}\\?|\\[ \t]{0,16})\Z")


def ends_in_a_joint(text: str, end: int) -> bool:
    """Whether ``text[end:]`` is the start of a joint the text ends inside of (spaces or a hard
    break's ``\\`` after a token: a line break may follow). A match that ends at ``end`` is
    then open, as if it reached the end (this is :func:`joined`'s open joint, for the case
    with nothing after it, at no cost to the text that has none)."""
    n = len(text)
    return 0 < n - end <= 17 and _TRAILING_JOINT.match(text, end) is not None


def trailing_joint(text: str, start: int) -> int | None:
    """Where a joint begun at the end of ``text`` starts, at or after ``start``: spaces or a
    hard break's ``\\`` right after a token character (a line break may follow, and the next
    line continue a key: ``sk-ant-api03-AbC `` + ``\\n`` + ``dEf…``); ``None`` when the text ends
    otherwise."""
    found = _TRAILING_JOINT.search(text, max(start, len(text) - 17))
    at: int = -1 if found is None else found.start()
    return at if at > start and text[at - 1] in _TOKEN_CHARS else None


OPEN_JOINT_CHARS = 640
"""The longest text an open joint and its run span: where :func:`joined` looks for one."""
_JOINT_HINT = re.compile("[\n\r\x0b\x0c\x85\u2028\u2029\"'`]")


_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=-"
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x85\u2028\u2029")
_QUOTES = frozenset("\"'`")


def may_end_in_a_joint(text: str) -> bool:
    """Whether ``text`` may end in an open joint (``_OPEN_JOINT``), a necessary condition read
    off the pattern in a few string operations: that match is a joint and then the trailing run
    of token characters (or, after string pieces, a run of ``+`` and string prefixes). A joint
    ends in a line break and the next line's spaces and ``>`` quote prefixes, or in a quote;
    between string pieces, in spaces after a quote, an operator or a line break, and before an
    operator stand spaces and a quote or a line break. So before the trailing run of token
    characters and then of spaces, tabs and ``>``, there stands a line break or a quote, or an
    operator with spaces and one of those before it (tests/test_policy_prechecks.py checks it)."""
    head = text.rstrip(_TOKEN_CHARS).rstrip(" \t>")
    if head[-1:] in ("+", ".", "&", "|"):
        head = head.rstrip("+.&|").rstrip(" \t")
    return head != "" and (head[-1] in _LINE_BREAKS or head[-1] in _QUOTES)


def joined(
    text: str,
    begin: int = 0,
    *,
    open_end: bool = False,
    base: View | None = None,
    prechecks: bool = True,
) -> tuple[View, tuple[int, ...]] | None:
    """The view of ``text[begin:]`` (or of the view ``base``, which starts at ``begin``) with its
    joints removed, and the view indices where a joint was; ``None`` when there is none.
    ``prechecks``: test :func:`may_end_in_a_joint` before searching for an open joint
    (``False``: search it always, the reference the tests compare with)."""
    source = base.text if base is not None else text
    start = 0 if base is not None else begin
    hint = _JOINT_HINT.search(source, start)
    if hint is None:
        return None
    # Every joint holds a hint (its line break, or its opening quote) at most 17 characters
    # after its start (a "\\" and 16 spaces before the line break): none starts earlier; and
    # each ends as _JOINT_END finds it, at or after the first hint: without that, none.
    spans = (
        [m.span() for m in _JOINT.finditer(source, max(start, hint.start() - 17))]
        if _JOINT_END.search(source, hint.start()) is not None
        else []
    )
    if open_end and (not prechecks or may_end_in_a_joint(source)):
        tail = _OPEN_JOINT.search(source, max(start, len(source) - OPEN_JOINT_CHARS))
        if tail is not None:
            a = tail.start()
            spans = [*(s for s in spans if s[0] < a), (a, tail.start("run"))]
    if not spans:
        return None
    if base is not None:
        raw_starts: Sequence[int] = base.starts
        raw_ends: Sequence[int] = base.ends
    else:
        raw_starts, raw_ends = range(len(text)), range(1, len(text) + 1)
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    joints: list[int] = []
    pos = start
    for a, b in spans:
        out.append(source[pos:a])
        starts.extend(raw_starts[pos:a])
        ends.extend(raw_ends[pos:a])
        joints.append(len(starts))
        pos = b
    out.append(source[pos:])
    starts.extend(raw_starts[pos:])
    ends.extend(raw_ends[pos:])
    return View("".join(out), starts, ends), tuple(joints)


def spans_a_joint(joints: Sequence[int], start: int, end: int) -> bool:
    """Whether one of ``joints`` (sorted view indices, as :func:`joined` gives them) lies
    inside ``[start, end)`` (a match in the joined view): after its first character, before its
    end."""
    at = bisect.bisect_right(joints, start)
    return at < len(joints) and joints[at] < end
