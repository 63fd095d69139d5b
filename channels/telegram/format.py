"""Telegram formatting: the model's Markdown as text + entities, and its canonical HTML form.

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
* Nothing here splits text: the delivery engine decides every message boundary, measuring each
  message with the channel's renderer (``TelegramChannel.render``), so each formatted write is
  one message (architecture §3 "Formatting and splitting").
* :func:`to_html` renders a :class:`FormattedText` as Telegram HTML: the canonical form used to
  compare formatted states and for logs.

Pure functions, no I/O (architecture §1).
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import telegramify_markdown
from telegramify_markdown.config import RenderConfig

from channels.base import utf16_len

__all__ = [
    "FormattedText",
    "TextEntity",
    "markdown_to_telegram",
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


def _utf16_offsets(text: str) -> list[int]:
    """``offsets[i]`` = UTF-16 offset of code point ``i``; ``offsets[len(text)]`` = total."""
    offsets = [0] * (len(text) + 1)
    total = 0
    for i, ch in enumerate(text):
        offsets[i] = total
        total += 2 if ord(ch) > 0xFFFF else 1
    offsets[len(text)] = total
    return offsets


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
