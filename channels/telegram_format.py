"""Telegram formatting: the model's Markdown as text + entities, and splitting of formatted text.

Theory of operation
-------------------
Telegram shows a message as plain *visible text* plus a list of ``MessageEntity`` spans (bold,
code, links, …) whose ``offset``/``length`` count UTF-16 code units of that visible text (Bot API,
"MessageEntity"). The 4096 limit applies to the visible text after entity parsing. We send
entities directly instead of ``parse_mode``: markup can then never fail to parse ("can't parse
entities"), and lengths, limits and cuts are plain arithmetic on the visible text in the unit
Telegram counts.

* :func:`markdown_to_telegram` converts CommonMark/GFM with telegramify-markdown (≥ 1.0) into a
  :class:`FormattedText`. Heading emoji are switched off so a heading costs no extra length.
* :func:`split_formatted` cuts a :class:`FormattedText` whose visible text exceeds the limit into
  parts that are each valid on their own: a part's text is a slice of the visible text, and each
  entity crossing a cut is clipped into both parts (a code block is "closed at the cut and
  reopened" in the next part). Cuts fall at a paragraph boundary, else a line, else a word, else
  between code points (never inside a surrogate pair, and not inside an emoji sequence when
  avoidable), preferring boundaries outside code. The parts' texts concatenate to the whole text.
* :func:`to_html` renders a :class:`FormattedText` as Telegram HTML: the canonical form used to
  compare formatted states and for logs.

Pure functions, no I/O (DESIGN §1: splitters are sans-I/O).
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

import telegramify_markdown
from telegramify_markdown.config import RenderConfig

from channels.base import utf16_len
from channels.limits import TELEGRAM_MAX_TEXT_LENGTH

__all__ = [
    "FormattedText",
    "TextEntity",
    "markdown_to_telegram",
    "split_formatted",
    "to_html",
]

_CODE_TYPES = frozenset({"pre", "code"})


@dataclass(frozen=True, slots=True)
class TextEntity:
    """One Bot API ``MessageEntity``; ``offset`` and ``length`` in UTF-16 code units."""

    type: str
    offset: int
    length: int
    url: str | None = None
    language: str | None = None
    custom_emoji_id: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The Bot API JSON object (optional fields only when set)."""
        out: dict[str, object] = {"type": self.type, "offset": self.offset, "length": self.length}
        for key in ("url", "language", "custom_emoji_id"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class FormattedText:
    """Visible text and its entities, sorted by ``(offset, -length)``."""

    text: str
    entities: tuple[TextEntity, ...] = ()

    @property
    def utf16_length(self) -> int:
        """Length of the visible text in UTF-16 code units (what Telegram's limit counts)."""
        return utf16_len(self.text)


def _sorted(entities: Sequence[TextEntity]) -> tuple[TextEntity, ...]:
    return tuple(sorted(entities, key=lambda e: (e.offset, -e.length)))


def _render_config() -> RenderConfig:
    """An isolated config (the library's global one is shared mutable state) without heading
    emoji: a heading is bold + underline and costs no extra length."""
    config = RenderConfig.isolated()
    for level in range(1, 7):
        setattr(config.markdown_symbol, f"heading_level_{level}", "")
    return config


_CONFIG = _render_config()


def markdown_to_telegram(markdown: str) -> FormattedText:
    """Convert the model's Markdown (CommonMark + GFM) to visible text and entities.

    Never raises for any input: should the converter fail, the Markdown is returned as plain
    text without entities.
    """
    try:
        text, raw = telegramify_markdown.convert(markdown, config=_CONFIG)
    except Exception:  # a converter bug must not lose the answer: show it unformatted
        return FormattedText(markdown)
    limit = utf16_len(text)
    entities = [
        TextEntity(e.type, e.offset, e.length, e.url, e.language, e.custom_emoji_id)
        for e in raw
        if e.length > 0 and e.offset >= 0 and e.offset + e.length <= limit
    ]
    return FormattedText(text, _sorted(entities))


# -- splitting -------------------------------------------------------------------------------


def _utf16_offsets(text: str) -> list[int]:
    """``offsets[i]`` = UTF-16 offset of code point ``i``; ``offsets[len(text)]`` = total."""
    offsets = [0] * (len(text) + 1)
    total = 0
    for i, ch in enumerate(text):
        offsets[i] = total
        total += 2 if ord(ch) > 0xFFFF else 1
    offsets[len(text)] = total
    return offsets


def _joins_previous(ch: str) -> bool:
    """True for code points that belong to the preceding one (a cut before them would tear an
    emoji or accent apart): combining marks, ZWJ, variation selectors, skin-tone modifiers."""
    cp = ord(ch)
    return (
        0x0300 <= cp <= 0x036F
        or cp == 0x200D
        or 0xFE00 <= cp <= 0xFE0F
        or 0x1F3FB <= cp <= 0x1F3FF
        or 0xE0020 <= cp <= 0xE007F
    )


def _hard_cut(text: str, start: int, max_end: int) -> int:
    cut = max_end
    for _ in range(16):  # an emoji sequence is at most a handful of code points
        if cut - 1 <= start:
            return max_end
        if not _joins_previous(text[cut]) and text[cut - 1] != "\u200d":
            return cut
        cut -= 1
    return max_end


def _best_cut(
    text: str, start: int, max_end: int, offsets: list[int], protected: list[tuple[int, int]]
) -> int:
    """The cut (code point index in ``(start, max_end]``) for a part beginning at ``start``."""

    def outside(i: int) -> bool:
        u = offsets[i]
        return not any(lo < u < hi for lo, hi in protected)

    def last(kind: str, need_outside: bool) -> int | None:
        for i in range(max_end, start, -1):
            prev = text[i - 1]
            if kind == "paragraph":
                hit = prev == "\n" and i - 2 >= start and text[i - 2] == "\n"
            elif kind == "line":
                hit = prev == "\n"
            else:
                hit = prev in " \t"
            if hit and i < len(text) and (not need_outside or outside(i)):
                # A part must show something; shorter prefixes would be blank too.
                return i if text[start:i].strip() else None
        return None

    for kind, need_outside in (
        ("paragraph", True),
        ("line", True),
        ("paragraph", False),
        ("line", False),
        ("word", True),
        ("word", False),
    ):
        cut = last(kind, need_outside)
        if cut is not None:
            return cut
    return _hard_cut(text, start, max_end)


def split_formatted(
    formatted: FormattedText, limit: int = TELEGRAM_MAX_TEXT_LENGTH
) -> list[FormattedText]:
    """Cut ``formatted`` into parts of at most ``limit`` UTF-16 code units of visible text.

    Args:
        formatted: the whole text and its entities.
        limit: the maximum visible length of one part, in UTF-16 code units (≥ 2, so that a
            surrogate pair always fits).

    Returns:
        One part when it fits; otherwise parts whose texts concatenate to ``formatted.text``
        (a trailing run of only whitespace, which Telegram cannot show, is dropped). Each
        entity is clipped to the parts it overlaps, keeping its type, URL and language.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2 UTF-16 code units")
    text = formatted.text
    offsets = _utf16_offsets(text)
    if offsets[-1] <= limit:
        return [formatted]
    protected = [
        (e.offset, e.offset + e.length) for e in formatted.entities if e.type in _CODE_TYPES
    ]
    bounds: list[tuple[int, int]] = []
    start = 0
    while offsets[-1] - offsets[start] > limit:
        max_end = bisect.bisect_right(offsets, offsets[start] + limit) - 1
        cut = _best_cut(text, start, max_end, offsets, protected)
        bounds.append((start, cut))
        start = cut
    if text[start:].strip():
        bounds.append((start, len(text)))
    parts = []
    for lo, hi in bounds:
        lo16, hi16 = offsets[lo], offsets[hi]
        clipped = []
        for e in formatted.entities:
            s, t = max(e.offset, lo16), min(e.offset + e.length, hi16)
            if t > s:
                clipped.append(replace(e, offset=s - lo16, length=t - s))
        parts.append(FormattedText(text[lo:hi], _sorted(clipped)))
    return parts


# -- HTML (canonical form) ------------------------------------------------------------------

_TAGS: dict[str, tuple[str, str]] = {
    "bold": ("<b>", "</b>"),
    "italic": ("<i>", "</i>"),
    "underline": ("<u>", "</u>"),
    "strikethrough": ("<s>", "</s>"),
    "spoiler": ("<tg-spoiler>", "</tg-spoiler>"),
    "code": ("<code>", "</code>"),
    "blockquote": ("<blockquote>", "</blockquote>"),
    "expandable_blockquote": ("<blockquote expandable>", "</blockquote>"),
}


def _open_tag(e: TextEntity) -> tuple[str, str]:
    if e.type == "pre":
        if e.language:
            lang = html.escape(e.language, quote=True)
            return f'<pre><code class="language-{lang}">', "</code></pre>"
        return "<pre>", "</pre>"
    if e.type == "text_link" and e.url:
        return f'<a href="{html.escape(e.url, quote=True)}">', "</a>"
    if e.type == "custom_emoji" and e.custom_emoji_id:
        return f'<tg-emoji emoji-id="{html.escape(e.custom_emoji_id)}">', "</tg-emoji>"
    return _TAGS.get(e.type, ("", ""))


def to_html(formatted: FormattedText) -> str:
    """Telegram HTML (``parse_mode=HTML``) that parses back to exactly ``formatted``.

    Entities that cross each other are closed and reopened around the crossing so the HTML is
    always balanced. Types without an HTML form (``mention``, ``url``, …) render as text.
    """
    text = formatted.text
    narrow = not text or max(text) <= "\uffff"  # no code point takes two UTF-16 units
    offsets = list(range(len(text) + 1)) if narrow else _utf16_offsets(text)
    starts: dict[int, list[TextEntity]] = {}
    for e in formatted.entities:
        starts.setdefault(e.offset, []).append(e)
    out: list[str] = []
    stack: list[TextEntity] = []

    def boundary(u: int) -> None:
        ending = [e for e in stack if e.offset + e.length == u]
        if ending:
            reopen: list[TextEntity] = []
            while ending:
                top = stack.pop()
                out.append(_open_tag(top)[1])
                if top in ending:
                    ending.remove(top)
                else:
                    reopen.append(top)
            for e in reversed(reopen):
                out.append(_open_tag(e)[0])
                stack.append(e)
        for e in starts.get(u, ()):
            out.append(_open_tag(e)[0])
            stack.append(e)

    # Only entity edges matter: the text between two of them is escaped in one piece.
    total = offsets[-1]
    edges = {0, total}
    for e in formatted.entities:
        edges.update(u for u in (e.offset, e.offset + e.length) if u <= total)
    for lo, hi in pairwise(sorted(edges)):
        boundary(lo)
        start, end = (
            (lo, hi)
            if narrow
            else (bisect.bisect_left(offsets, lo), bisect.bisect_left(offsets, hi))
        )
        out.append(html.escape(text[start:end], quote=False))
    boundary(total)
    return "".join(out)
