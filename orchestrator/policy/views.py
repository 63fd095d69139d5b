"""Views of a text as a reader sees it, each mapped back to the raw text (architecture §4 "What the
reader sees is what is checked"); pure functions.

Theory of operation
-------------------
A reader decodes at a glance what a client shows: ``sk&#45;ant-…`` is ``sk-ant-…``, a JSON
string's ``\\n`` is a line break, ``%22`` is a quote, a zero-width space inside a key is
invisible, ``ｓｋ`` (full width) reads as ``sk``, and Telegram renders ``sk\\_live\\_…`` as
``sk_live_…`` and ``[AAAA](https://x)BBBB`` as ``AAAABBBB``. The catalogue is therefore matched
on a *normalised view* of the text as well as on the raw text, and every match in the view is
mapped back to the raw characters it came from, which are then replaced.

:func:`normalised` builds the view in one left-to-right pass over *tokens* (everything else is
copied as it is):

==========================  ==================================================================
token                       in the view
==========================  ==================================================================
``&name;`` ``&#N;`` ``&#xH;``  the character (HTML 5 named and numeric character references;
                            numeric ones and ``&amp`` ``&lt`` ``&gt`` ``&quot`` ``&shy``
                            ``&nbsp`` also without the ``;``, as HTML 5 §13.2.5.72 reads them)
``\\uXXXX``                 the character (JSON, RFC 8259 §7)
``\\n \\r \\t \\b \\f``         the control character (JSON)
``\\`` + ASCII punctuation   the punctuation (JSON ``\\/`` ``\\"``; CommonMark §2.4 escapes)
``%HH`` below 0x80          the ASCII character (RFC 3986 §2.1)
``[`` and ``](url)``        nothing: a Markdown link shows its text (CommonMark §6.3)
``![alt](url)`` ``[^note]``  nothing: an image and a footnote reference render as a glyph or
                            a superscript, not as text of the line
``<tag>`` next to a non-space  nothing: inline HTML (CommonMark §6.6), ``sk-<b>ant</b>-…``,
                            ``Bearer<b></b> …``
``*`` ``~`` inside a word    nothing: emphasis delimiters (CommonMark §6.2), ``sk_live_**51…**``
invisible characters        nothing: soft hyphen, zero-width space/joiners, word joiner,
                            bidi controls, BOM
compatibility characters    their NFKC form (full-width letters, mathematical alphanumerics)
==========================  ==================================================================

A decoded character that is invisible or a compatibility character reads as it would written
directly (``\\u00ad`` is nothing). Decoding runs twice at most (one level of nesting: a
percent-encoded JSON value, an entity-escaped entity). A view is ``(text, starts, ends)``:
view character ``i`` came from raw characters ``[starts[i], ends[i])``. *Breaks* (raw
positions, e.g. the start of a round) can be inserted as a ``"\\x00"`` that maps to no raw
character: a keyword right after one stands at a word boundary.

The mapping is built per character only for views that differ from the raw text; the usual
text (no token, no break in the scanned region) costs one regular-expression search.

Three more readings keep the raw positions or cost nothing where they do not apply:

- :func:`folded` maps, character for character (so every index stays as it is), every space
  variant (Unicode ``Zs``: ``-----BEGIN\u00a0RSA…``) to a space, every dash variant (``Pd``) to
  ``-``, and every look-alike of an ASCII letter, digit, ``-`` or ``_`` to that character, as the
  confusables skeleton of `UTS #39 <https://www.unicode.org/reports/tr39/>`_ §4 reads it (the
  Cyrillic ``ѕ`` of ``ѕk-ant-…`` is an ``s``). ASCII text is returned as it is.
- :func:`orchestrator.policy.joints.joined` removes the *joints* a reader reads through: a line
  break inside a token run (a key hard-wrapped at a column: any Unicode line break, a Markdown hard
  break, indentation and quote prefixes ``> ``), and what stands between adjacent string pieces
  (``"sk-ant-api03-AbC" "dEf…"``, ``'…' + '…'``, ``f"…"``, backticks, ``.``, ``++``, across a line
  break too) — only where what follows reads as more of a key (8 token characters or more with a
  letter and a digit, or 16 letters): ``…KEY\nREADME``, ``…KEY\n2. Restart`` and ``"KEY" "done"``
  keep their text. With ``open_end`` a joint begun at the end of the text, or whose next run has not
  ended (``…AAAA\n``, ``…AAAA\nREA``), is removed as well, so a key before it stays open until the
  next run shows whether it continues. Every repeat of a joint is bounded and its groups are atomic:
  a search is linear in the text.
- :func:`unwrapped` decodes the tokens inside markup the view drops whole (``![i](…sk_**51…)``).
"""

from __future__ import annotations

import html
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

import regex

from orchestrator.policy.folding import folded
from orchestrator.policy.view_map import View, aligned

__all__ = [
    "BREAK",
    "INVISIBLE",
    "INVISIBLE_SET",
    "LINK_URL_CHARS",
    "TOKEN_LEADS",
    "VIEW_CONTEXT_CHARS",
    "WHITE_SPACE",
    "View",
    "aligned",
    "context_start",
    "decode_token",
    "first_pass",
    "folded",
    "has_tokens",
    "normalised",
    "token_spans",
    "tokens",
    "unwrapped",
]

BREAK = "\x00"
"""What a break is in a view: no pattern's character class holds it."""

INVISIBLE = (
    "\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"
    "\ufe00-\ufe0f\ufeff\U000e0000-\U000e007f"
)


# Characters whose NFKC form is ASCII and that a model writes: full-width forms (``ｓｋ－``) and
# mathematical alphanumerics (``𝐬𝐤``), circled letters (``ⓢⓚ``). Other compatibility characters
# are left as they are.
_COMPAT = "\u24b6-\u24e9\uff01-\uff5e\U0001d400-\U0001d7ff"
# What may start a token: a cheap test first (the standard ``re`` engine scans a small class
# at hundreds of MB/s), the full token pattern only where it finds something.
_TRIGGER = re.compile("[&\\\\%\\[\\]<" + INVISIBLE + _COMPAT + "]")
_ASCII_TRIGGER = re.compile(r"[&\\%\[\]<]")  # the same, for ASCII text
# An emphasis delimiter inside a word: a whole run of one to three of them between two word
# characters (led by the delimiter, so the search skips to the delimiters).
_INNER_DELIMITERS = re.compile(r"[*~`](?<=[A-Za-z0-9_-][*~`])[*~`]{0,2}(?=[A-Za-z0-9_-])")

_HTML_TAG = r"(?:</?[A-Za-z][A-Za-z0-9]{0,15}(?:\s[^<>\n]{0,64})?/?>|<!--[^\n]{0,64}?-->)"
# Every token pattern, in order, with the characters it starts with (where "" is: the invisible
# and compatibility characters).
_TOKEN_PARTS: tuple[tuple[str, str], ...] = (
    (
        "&",
        r"&(?:#[0-9]{1,7};?|#[xX][0-9a-fA-F]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};"
        r"|amp|AMP|lt|LT|gt|GT|quot|QUOT|shy|nbsp)",
    ),
    ("\\", r"\\u[0-9a-fA-F]{4}|\\[nrtbf]|\\[!-/:-@\[-`{-~]"),
    ("%", r"%[0-7][0-9A-Fa-f]"),
    ("!", r"!\[[^\[\]\n]{0,64}\]\([^()\s]{0,2048}\)"),
    ("[", r"\[\^[^\[\]\s]{1,32}\]"),
    ("]", r"\]\([^()\s]{0,2048}\)|\]\[(?!REDACTED:)[^\[\]\s]{0,64}\]"),
    ("[", r"\[(?!REDACTED:)"),
    ("*~`", r"(?<=[A-Za-z0-9_-])[*~`]{1,3}(?=[A-Za-z0-9_-])"),
    ("<", rf"(?<=\S){_HTML_TAG}{{1,8}}|{_HTML_TAG}{{1,8}}(?=\S)"),
    ("", r"[" + INVISIBLE + r"]+|[" + _COMPAT + r"]"),
)
_TOKEN = regex.compile("|".join(pattern for _, pattern in _TOKEN_PARTS))
TOKEN_LEADS = frozenset("".join(leads for leads, _ in _TOKEN_PARTS))
"""The ASCII characters a token begins with or holds as its delimiters."""
# The tokens but the markup dropped whole, which they may stand inside of (see :func:`unwrapped`).
_INNER_TOKEN = regex.compile("|".join(p for c, p in _TOKEN_PARTS if c not in "![]<" or not c))
# The tokens that start with one ASCII character: only they can match where it stands, in the
# same order, in the standard engine, which costs a third of the ``regex`` module's set-up per
# call. Both read these patterns alike but for ``\s``: the ``regex`` module's is Unicode
# White_Space (``str.isspace`` but U+001C..U+001F), written out here for the standard engine
# (tests/test_policy_prechecks.py compares it at every code point, and the tokens with _TOKEN).
WHITE_SPACE = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def _standard(pattern: str) -> str:
    """A token pattern for the standard engine: ``\\s`` and ``\\S`` as the ``regex`` module
    reads them (in the classes the patterns hold, and alone)."""
    for inside in ("[^()\\s]", "[^\\[\\]\\s]"):
        pattern = pattern.replace(inside, inside[:-3] + WHITE_SPACE + "]")
    return pattern.replace("\\S", f"[^{WHITE_SPACE}]").replace("\\s", f"[{WHITE_SPACE}]")


_TOKEN_AT = {
    char: re.compile(
        _standard("|".join(pattern for leads, pattern in _TOKEN_PARTS if char in leads))
    )
    for char in "".join(leads for leads, _ in _TOKEN_PARTS)
}
# The same tokens in ASCII text (where the invisible and compatibility characters are not) as one
# pattern for the standard engine, each alternative rewritten to begin with its first character
# (a look-behind moved after it), in the same order: at each position only the alternatives of
# that character can match, as with _TOKEN_AT, and the engine skips to the next such character
# itself, so ``finditer`` finds the tokens :func:`tokens` finds, at one C call a token.
_TAG_AFTER_LT = r"(?:/?[A-Za-z][A-Za-z0-9]{0,15}(?:\s[^<>\n]{0,64})?/?>|!--[^\n]{0,64}?-->)"
_LEAD_FIRST_DELIMITERS = tuple(
    rf"{re.escape(lead)}(?<=[A-Za-z0-9_-]{re.escape(lead)})[*~`]{{0,2}}(?=[A-Za-z0-9_-])"
    for lead in "*~`"
)
_ASCII_TOKENS = re.compile(
    _standard(
        "|".join(
            (
                *(pattern for leads, pattern in _TOKEN_PARTS if leads and leads in "&\\%![]"),
                *_LEAD_FIRST_DELIMITERS,
                rf"<(?<=\S<){_TAG_AFTER_LT}{_HTML_TAG}{{0,7}}|<{_TAG_AFTER_LT}{_HTML_TAG}{{0,7}}(?=\S)",
            )
        )
    )
)
# The same for the tokens markup may hold (see :func:`unwrapped`): ``_INNER_LEAD``'s characters.
_ASCII_INNER_TOKENS = re.compile(
    _standard(
        "|".join(
            (
                *(pattern for leads, pattern in _TOKEN_PARTS if leads in ("&", "\\", "%")),
                *_LEAD_FIRST_DELIMITERS,
            )
        )
    )
)
_JSON_CONTROL = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}
# The first character of every token (each part of _TOKEN starts with one of them): the standard
# engine skips to the next, where _TOKEN's own search tries every position (~40 ns a character).
_TOKEN_LEAD = re.compile("[&\\\\%!\\[\\]*~`<" + INVISIBLE + _COMPAT + "]")
_ASCII_TOKEN_LEAD = re.compile(r"[&\\%!\[\]*~`<]")  # the same, for ASCII text (twice as fast)
_INNER_LEAD = (re.compile("[&\\\\%*~`" + INVISIBLE + _COMPAT + "]"), re.compile(r"[&\\%*~`]"))


def tokens(text: str, begin: int = 0) -> Iterator[re.Match[str] | regex.Match[str]]:
    """The tokens of ``text[begin:]``, as ``_TOKEN.finditer(text, begin)`` finds them: each
    is tried only where a token's first character stands (tests/test_policy_prechecks.py
    compares the two on generated text)."""
    if text.isascii():
        return _ASCII_TOKENS.finditer(text, begin)
    return _tokens(text, begin)


def _tokens(text: str, begin: int) -> Iterator[re.Match[str] | regex.Match[str]]:
    lead = _TOKEN_LEAD.search(text, begin)
    while lead is not None:
        found = _TOKEN_AT.get(text[lead.start()], _TOKEN).match(text, lead.start())
        if found is None:
            lead = _TOKEN_LEAD.search(text, lead.start() + 1)
        else:
            yield found
            lead = _TOKEN_LEAD.search(text, found.end())


def token_spans(text: str, begin: int, end: int) -> list[tuple[int, int, int]]:
    """The tokens of ``text[begin:]`` that start before ``end``, as :func:`tokens` finds them:
    ``(start, end, view characters)`` each (a token may end after ``end``)."""
    leads = _ASCII_TOKEN_LEAD if text.isascii() else _TOKEN_LEAD
    lead = leads.search(text, begin, end)
    spans: list[tuple[int, int, int]] = []
    while lead is not None:
        a = lead.start()
        found = _TOKEN_AT.get(text[a], _TOKEN).match(text, a)
        if found is None:
            lead = leads.search(text, a + 1, end)
            continue
        b = found.end()
        empty = text[a] in "[]*~`!<" or text[a] in INVISIBLE_SET  # read as nothing
        spans.append((a, b, 0 if empty else len(decode_token(found.group()))))
        lead = leads.search(text, b, end) if b < end else None
    return spans


LINK_URL_CHARS = 2048
"""The longest link URL a view reads through (``](…)``)."""


def has_tokens(text: str, start: int = 0) -> bool:
    """Whether ``text[start:]`` holds anything a view would change."""
    if text.isascii():  # whether :func:`tokens` finds one (it does where the tests below do)
        return _ASCII_TOKENS.search(text, start) is not None
    found = (_ASCII_TRIGGER if text.isascii() else _TRIGGER).search(text, start)
    if found is not None and next(tokens(text, found.start()), None) is not None:
        return True
    if text.find("*", start) < 0 and text.find("~", start) < 0 and text.find("`", start) < 0:
        return False
    return _INNER_DELIMITERS.search(text, start) is not None


def unwrapped(text: str, begin: int = 0) -> View | None:
    """``text[begin:]`` decoded once, with the markup :func:`normalised` drops whole (an image,
    a link's URL, an HTML tag, a footnote) kept as a client that does not render it shows it
    (``![i](…sk_**51…)``); ``None`` when no such markup holds a token."""
    if text.isascii():  # any token markup may hold?
        if _ASCII_INNER_TOKENS.search(text, begin) is None:
            return None
    elif not any(
        _TOKEN_AT.get(m[0], _TOKEN).match(text, m.start())
        for m in _INNER_LEAD[0].finditer(text, begin)
    ):
        return None
    if not any(m[0][0] in "![]<" and _INNER_TOKEN.search(m[0]) for m in tokens(text, begin)):
        return None
    return _run_pass(text, begin, (), _INNER_TOKEN.finditer(text, begin))


def decode_token(token: str) -> str:
    lead = token[0]
    if lead == "&":
        decoded = html.unescape(token)
        return _settled(decoded) if len(decoded) <= 2 else token
    if lead == "\\":
        second = token[1]
        if second == "u":
            return _settled(chr(int(token[2:], 16)))
        return _JSON_CONTROL.get(second, second) if len(token) == 2 else token
    if lead == "%":
        return chr(int(token[1:], 16))
    if lead in "[]*~`!<" or lead in INVISIBLE_SET:
        return ""
    return unicodedata.normalize("NFKC", token)


def _settled(decoded: str) -> str:
    """A decoded character as it reads: nothing when invisible (``\\u00ad``, ``&shy;``), its
    NFKC form when it is a compatibility character (``&#xff53;``)."""
    if decoded in INVISIBLE_SET:
        return ""
    if _COMPAT_CHAR.fullmatch(decoded) is not None:
        return unicodedata.normalize("NFKC", decoded)
    return decoded


_COMPAT_CHAR = regex.compile("[" + _COMPAT + "]")
INVISIBLE_SET = frozenset(
    regex.findall(
        "[" + INVISIBLE + "]", "".join(map(chr, [*range(0x10000), *range(0xE0000, 0xE0080)]))
    )
)


def _pass(
    text: str,
    starts: Sequence[int],
    ends: Sequence[int],
    begin: int,
    breaks: Sequence[int],
    found: Iterable[re.Match[str] | regex.Match[str]] | None = None,
) -> tuple[str, list[int], list[int]]:
    """One decoding pass over ``text[begin:]`` (character ``i`` came from raw
    ``[starts[i], ends[i])``), with a break before each position of ``breaks`` (indices into
    ``text``, sorted); ``found``: the tokens to decode (default: :func:`tokens`)."""
    out: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    pending = [at for at in reversed(breaks) if at >= begin]
    pos = begin

    def copy(stop: int) -> None:
        nonlocal pos
        while pending and pending[-1] < stop:
            at = max(pending.pop(), pos)
            out.append(text[pos:at])
            new_starts.extend(starts[pos:at])
            new_ends.extend(ends[pos:at])
            pos = at
            raw = starts[at] if at < len(starts) else (ends[-1] if len(ends) else 0)
            out.append(BREAK)
            new_starts.append(raw)
            new_ends.append(raw)
        out.append(text[pos:stop])
        new_starts.extend(starts[pos:stop])
        new_ends.extend(ends[pos:stop])
        pos = stop

    for match in tokens(text, begin) if found is None else found:
        a, b = match.span()
        copy(a)
        decoded = decode_token(match.group())
        out.append(decoded)
        new_starts.extend([starts[a]] * len(decoded))
        new_ends.extend([ends[b - 1]] * len(decoded))
        pos = b
    copy(len(text))
    while pending:  # breaks at the very end
        pending.pop()
        out.append(BREAK)
        raw = ends[-1] if len(ends) else 0
        new_starts.append(raw)
        new_ends.append(raw)
    return "".join(out), new_starts, new_ends


def first_pass(text: str, begin: int = 0) -> View:
    """The view of ``text[begin:]`` after one decoding pass (:func:`normalised` decodes what
    that view still holds once more)."""
    return _run_pass(text, begin, ())


def normalised(
    text: str, begin: int = 0, breaks: Sequence[int] = (), *, decode: bool = True
) -> View:
    """The view of ``text[begin:]``: decoded (twice at most) when ``decode``, with a break
    before each raw position in ``breaks`` (sorted)."""
    starts = range(len(text))
    ends = range(1, len(text) + 1)
    if not decode:
        view_text, v_starts, v_ends = _pass_breaks(text, starts, ends, begin, breaks)
        return View(view_text, v_starts, v_ends)
    view = _run_pass(text, begin, breaks)
    if next(tokens(view.text), None) is None:
        return view
    return View(*_pass(view.text, view.starts, view.ends, 0, ()))


def _run_pass(
    text: str,
    begin: int,
    breaks: Sequence[int],
    found: Iterable[re.Match[str] | regex.Match[str]] | None = None,
) -> View:
    """:func:`_pass` over the raw ``text[begin:]`` (character ``i`` came from ``[i, i + 1)``), its
    view held as runs (:meth:`View.of_runs`): one per copied run, decoded token and break."""
    out: list[str] = []
    firsts: list[int] = []
    raws: list[int] = []
    run_ends: list[int] = []
    pending = [at for at in reversed(breaks) if at >= begin]
    pos = begin
    size = 0

    def copy(stop: int) -> None:
        nonlocal pos, size
        while pending and pending[-1] < stop:
            at = max(pending.pop(), pos)
            if at > pos:
                out.append(text[pos:at])
                firsts.append(size)
                raws.append(pos)
                run_ends.append(-1)
                size += at - pos
            pos = at
            out.append(BREAK)
            firsts.append(size)
            raws.append(at)
            run_ends.append(at)
            size += 1
        if stop > pos:
            out.append(text[pos:stop])
            firsts.append(size)
            raws.append(pos)
            run_ends.append(-1)
            size += stop - pos
        pos = stop

    for match in tokens(text, begin) if found is None else found:
        a, b = match.span()
        copy(a)
        decoded = decode_token(match.group())
        if decoded:
            out.append(decoded)
            firsts.append(size)
            raws.append(a)
            run_ends.append(b)
            size += len(decoded)
        pos = b
    copy(len(text))
    while pending:  # breaks at the very end
        pending.pop()
        out.append(BREAK)
        firsts.append(size)
        raws.append(len(text))
        run_ends.append(len(text))
        size += 1
    return View.of_runs("".join(out), firsts, raws, run_ends)


def _pass_breaks(
    text: str, starts: Sequence[int], ends: Sequence[int], begin: int, breaks: Sequence[int]
) -> tuple[str, list[int], list[int]]:
    out: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    pos = begin
    for at in breaks:
        if at < begin:
            continue
        out.append(text[pos:at])
        new_starts.extend(starts[pos:at])
        new_ends.extend(ends[pos:at])
        out.append(BREAK)
        new_starts.append(at)
        new_ends.append(at)
        pos = at
    out.append(text[pos:])
    new_starts.extend(starts[pos:])
    new_ends.extend(ends[pos:])
    return "".join(out), new_starts, new_ends


VIEW_CONTEXT_CHARS = 16
"""Raw characters before a scan's start from which its views are built (look-behind context)."""


def context_start(text: str, start: int) -> int:
    """Where the views of a scan from ``start`` begin: :data:`VIEW_CONTEXT_CHARS` before it, or
    at the ``[`` of a link or image whose syntax ends there (``[postgres](https://…)://admin:…``
    reads as ``postgres://admin:…``, and the ``[`` may lie far back behind a long URL)."""
    begin = max(0, start - VIEW_CONTEXT_CHARS)
    if begin and text.find(")", begin, start) >= 0:
        link = text.rfind("](", max(0, begin - LINK_URL_CHARS - 2), start)
        if link >= 0:
            opener = text.rfind("[", max(0, link - VIEW_CONTEXT_CHARS * 4), link)
            if 0 <= opener < begin:
                begin = opener - 1 if opener and text[opener - 1] == "!" else opener
    return begin


if sys.flags.optimize == 0:  # a cheap self-check of the table at import
    assert (
        decode_token("&#45;") == "-"
        and decode_token("\\u002d") == "-"
        and decode_token("%2D") == "-"
    )
