"""Look-alike characters read as the ASCII ones they resemble (architecture §4 "What the reader
sees is what is checked"): the folding of :func:`folded`, one of the readings of
:mod:`~orchestrator.policy.views`; pure functions. Apart from the views because its one reason
to change is the confusables data.
"""

from __future__ import annotations

import functools
import string
import unicodedata

import regex
from confusable_homoglyphs import confusables

__all__ = ["folded"]


# Quote variants a reader reads as the ASCII quote (the confusables data has no single-character
# look-alike of ``"``): curly, low, prime and full-width quotes.
_QUOTES = dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\uff02", '"') | dict.fromkeys(
    "\u2018\u2019\u201a\u201b\u2032\uff07", "'"
)


@functools.cache
def _fold_table() -> dict[int, str]:
    """Code point → the ASCII character it reads as (built once, on first use, in ~0.1 s)."""
    table: dict[int, str] = {}
    every = "".join(map(chr, range(0x80, 0x110000)))  # every plane: a dash of plane 1 too
    for char in regex.findall(r"[\p{Zs}\p{Pd}]", every):
        table[ord(char)] = " " if unicodedata.category(char) == "Zs" else "-"
    for target in string.ascii_letters + string.digits + "-_+":
        for glyph in confusables.confusables_data.get(target, ()):
            char = glyph["c"]
            if len(char) == 1 and not char.isascii():
                table.setdefault(ord(char), _cased(char, target))
    for code in list(table):
        compat = unicodedata.normalize("NFKC", chr(code))
        if len(compat) == 1 and compat.isascii() and compat.isalnum():
            table[code] = compat  # a compatibility form reads as itself: full-width Ｉ is I
    for quote, ascii_quote in _QUOTES.items():
        table[ord(quote)] = ascii_quote
    return table


def _cased(char: str, target: str) -> str:
    """The skeleton folds case (``I`` and ``l`` share one); a secret's prefix does not: a
    capital look-alike reads as a capital."""
    if char.isupper() and target.islower():
        return "I" if target == "l" else target.upper()
    if char.islower() and target.isupper():
        return "l" if target == "I" else target.lower()
    return target


@functools.cache
def _foldable() -> frozenset[str]:
    # A set, not a character class: ``re`` tests a class of 1,400 code points at ~350 ns a
    # non-ASCII character, ``frozenset.isdisjoint`` at ~8 ns.
    return frozenset(map(chr, _fold_table()))


def folded(text: str, begin: int = 0) -> str:
    """``text`` with every space variant read as a space, every dash variant as ``-`` and every
    look-alike of an ASCII letter or digit as that letter (UTS #39 confusables); the same length,
    so every index stays as it is. ``text`` itself when ``text[begin:]`` has nothing to fold."""
    if text.isascii() or _foldable().isdisjoint(text[begin:] if begin else text):
        return text
    return text[:begin] + text[begin:].translate(_fold_table())
