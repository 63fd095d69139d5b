"""Tokens begun at the end of a growing text (architecture §4): ``&#11``, ``\\u00``, ``%2``,
``](https://…`` of a link not closed yet, inline HTML and footnotes still open, ``**`` right
after a word character. More text may turn such a token into a character or into nothing, so
a view of a text that continues ends before it, and what precedes it stays a possible secret
start (:func:`held_from`, which the catalogue's open scans call). Pure functions.
"""

from __future__ import annotations

import bisect
import re
import sys

import regex

from orchestrator.policy.views import (
    INVISIBLE,
    INVISIBLE_SET,
    LINK_URL_CHARS,
    decode_token,
    tokens,
)

__all__ = ["held_from", "partial_token"]

# ASCII classes and literals only: the standard engine reads it as the ``regex`` module does,
# at a third of the cost (tests/test_policy_prechecks.py compares the two).
_PARTIAL = re.compile(
    r"(?:&(?:#[0-9]{0,7}|#[xX][0-9a-fA-F]{0,6}|[A-Za-z][A-Za-z0-9]{0,31})?"
    r"|\\(?:u[0-9a-fA-F]{0,3})?|%[0-7]?)\Z"
)
# Markup not closed yet that a view may drop whole: a footnote reference, an image's alt text,
# inline HTML inside a word, and inline HTML after a space or at the start (what follows it may
# be a non-space, which makes it vanish too: ``Bearer <b></b`` + ``>7111…`` reads as a token).
_CLOSED_MARKUP = regex.compile(r"(?:\[\^[^\[\]\s]{1,32}|!\[[^\[\]\n]{0,36})\]\Z")
_MARKUP_OPEN = regex.compile(
    r"(?:!?\[\^?[^\[\]\s]{0,32}|!"
    r"|(?<=\S)(?:<[^<>\n]{0,80}>){0,8}<[^<>\n]{0,80}>?"
    r"|(?:<[/!A-Za-z][^<>\n]{0,80}>){0,8}<(?:[/!A-Za-z][^<>\n]{0,80}>?)?)\Z"
)


# A run of emphasis delimiters right after a word character at the end (invisible characters
# after it read as nothing): the next word character makes it vanish (``sk-**`` + ``abc``).
_OPEN_DELIMITERS = re.compile(r"(?<=[A-Za-z0-9_-])[*~`]{1,3}[" + INVISIBLE + r"]*\Z")


def partial_token(text: str, begin: int = 0) -> int | None:
    """Where a token begun at the end of ``text`` starts (``&#11``, ``\\u00``, ``%2``, ``\\``,
    ``](https://…`` of a link not closed yet, ``**`` right after a word character), if at or
    after ``begin``: more text may turn it into a character or into nothing, so a view of a text
    that continues ends before it. A delimiter run that ends where such a token starts is held
    with it (``sk-**`` + ``![a](https://…``: once the image closes, ``sk-`` joins what follows)."""
    held = _partial_token(text, begin)
    end = len(text) if held is None else held
    if end > begin and (text[end - 1] in "*~`" or text[end - 1] in INVISIBLE_SET):
        run = _OPEN_DELIMITERS.search(text, max(begin, end - 8), end)
        if run is not None:
            return int(run.start())
    return held


def _partial_token(text: str, begin: int) -> int | None:
    n = len(text)
    floor = max(begin, n - 40)
    tail = text[floor:]
    if "&" in tail or "\\" in tail[-6:] or "%" in tail[-2:]:
        found = _PARTIAL.search(text, floor)
        if found is not None:
            return int(found.start())
    if "[" in tail or "!" in tail[-1:] or "<" in tail:
        found = _MARKUP_OPEN.search(text, floor)
        if found is not None:
            return int(found.start())
    # A link still open is the last "](" with no "(", ")" or space after it: so its "(" is the
    # last "(" of the text (one fast search for a character, not for a pair back over 2 KB).
    paren = text.rfind("(", max(begin, n - LINK_URL_CHARS - 2) + 1)
    link = -1
    if paren > 0 and text[paren - 1] == "]" and text.find(")", paren) < 0:  # ")": closed
        link = paren - 1
    if link >= 0 and _LINK_OPEN.fullmatch(text, link + 2) is not None:
        image = _CLOSED_MARKUP.search(text, max(begin, link - 40), link + 1)
        return link if image is None or text[image.start()] != "!" else int(image.start())
    if text.endswith("]", begin):
        closed = _CLOSED_MARKUP.search(text, floor)  # ``[^1]`` or ``![alt]``: may vanish whole
        return n - 1 if closed is None else int(closed.start())
    return None


_LINK_OPEN = regex.compile(r"[^()\s]*")


def held_from(text: str, begin: int = 0, *, tokens: bool = True) -> int | None:
    """Where a token begun at the end of ``text`` starts, in the raw text or once decoded (a
    percent-encoded ``\\`` of a JSON escape: ``%5Cu00``); ``None`` when there is none.
    ``tokens``: whether ``text[begin:]`` may hold tokens (:func:`has_tokens`)."""
    held = partial_token(text, begin)
    if not tokens:
        return held
    # Decoded with and without the raw token held: ``s\\`` + ``u00ad`` holds from the first
    # backslash, as the decoded ``\`` may become ``\u00ad``.
    for head in (text,) if held is None else (text, text[:held]):
        decoded = _decoded_tokens(head, begin)  # None as :func:`has_tokens` is false
        if decoded is None:
            continue
        once, pieces = decoded
        inner = partial_token(once)
        if inner is not None:
            raw = _raw_start(pieces, inner) if inner < len(once) else len(head)
            held = raw if held is None else min(raw, held)
    return held


def _decoded(text: str, begin: int) -> tuple[str, list[tuple[int, int, bool]]]:
    """The text of :func:`_pass` over ``text[begin:]`` without breaks, and where each of its
    pieces starts, ``(view index, raw index, decoded)``: a copied character ``i`` of a piece
    came from ``raw + i - view``, a decoded one from ``raw`` (what ``_pass``'s per-character
    lists hold, without building them)."""
    decoded = _decoded_tokens(text, begin)
    if decoded is not None:
        return decoded
    return text[begin:], [(0, begin, False)] if begin < len(text) else []


def _decoded_tokens(text: str, begin: int) -> tuple[str, list[tuple[int, int, bool]]] | None:
    """:func:`_decoded`, or ``None`` when ``text[begin:]`` holds no token (:func:`tokens`
    finds one exactly where :func:`has_tokens` is true)."""
    out: list[str] = []
    pieces: list[tuple[int, int, bool]] = []
    pos = begin
    size = 0
    found = False
    for match in tokens(text, begin):
        found = True
        a, b = match.span()
        if a > pos:
            pieces.append((size, pos, False))
            out.append(text[pos:a])
            size += a - pos
        decoded = decode_token(match.group())
        if decoded:
            pieces.append((size, a, True))
            out.append(decoded)
            size += len(decoded)
        pos = b
    if pos < len(text):
        pieces.append((size, pos, False))
        out.append(text[pos:])
    return ("".join(out), pieces) if found else None


def _raw_start(pieces: list[tuple[int, int, bool]], index: int) -> int:
    """The raw start of character ``index`` of a :func:`_decoded` text."""
    view_at, raw_at, decoded = pieces[bisect.bisect_right(pieces, (index, sys.maxsize)) - 1]
    return raw_at if decoded else raw_at + index - view_at
