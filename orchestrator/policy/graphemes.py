"""Where a user-perceived character starts (architecture §4 "Live redaction window"): the live
window never cuts one apart, so a draft never shows half an emoji; pure functions."""

from __future__ import annotations

import unicodedata

__all__ = ["grapheme_start"]


def _extends_previous(char: str) -> bool:
    """True for a code point that belongs to the character before it on screen: a combining
    mark, a variation selector, an emoji skin-tone modifier or tag, or a zero-width joiner."""
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or char == "\u200d"
        or 0xFE00 <= code <= 0xFE0F
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
    )


def grapheme_start(text: str, pos: int, floor: int) -> int:
    """``pos``, moved back (not below ``floor``) so that it does not cut a user-perceived
    character apart (``👨‍👩‍👧`` shown as ``👨‍👩``, a flag as one letter). An approximation of
    Unicode UAX #29 extended grapheme clusters, enough for what a chat shows."""
    if pos < len(text) and text[pos] < "\u0300" and text[pos - 1] != "\u200d":
        return pos  # the usual case: nothing below U+0300 extends the character before it
    while (
        pos > floor
        and pos < len(text)
        and (
            _extends_previous(text[pos])
            or text[pos - 1] == "\u200d"
            or (_is_regional_indicator(text[pos]) and _is_regional_indicator(text[pos - 1]))
        )
    ):
        pos -= 1
    return pos


def _is_regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF
