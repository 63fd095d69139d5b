"""The forms a secret may be written in (architecture §4 "What the reader sees is what is checked")
and a reader's view of a shown text, for the outbound-policy tests.

Each *form* rewrites a planted secret as a model may write it: as Markdown (emphasis, escapes,
split by a link, quoted), HTML entities, JSON string escapes, percent-encoding, with invisible
characters inside or full-width letters. :func:`reader_view` decodes a text as a reader does at a
glance — an implementation of its own (the standard library's ``html``, ``urllib.parse`` and
``unicodedata``), independent of the policy's views.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable
from urllib.parse import unquote

from hypothesis import strategies as st

__all__ = ["FORMS", "reader_view", "wrapped"]

Form = Callable[[str, st.DrawFn], str]


def _at(text: str, draw: st.DrawFn, low: int = 1) -> int:
    return draw(st.integers(min(low, len(text) - 1), len(text) - 1))


def _plain(text: str, draw: st.DrawFn) -> str:
    return text


def _italic(text: str, draw: st.DrawFn) -> str:
    return f"_{text}_"


def _bold(text: str, draw: st.DrawFn) -> str:
    return f"**{text}**"


def _md_escapes(text: str, draw: st.DrawFn) -> str:
    return re.sub(r"([_\-.*])", r"\\\1", text)


def _entity(text: str, draw: st.DrawFn) -> str:
    pos = _at(text, draw, 0)
    return text[:pos] + f"&#{ord(text[pos])};" + text[pos + 1 :]


def _entity_hex(text: str, draw: st.DrawFn) -> str:
    return "".join(f"&#x{ord(c):x};" if c in "-_:." else c for c in text)


def _json_string(text: str, draw: st.DrawFn) -> str:
    body = text.replace("\\", "\\\\").replace("\n", "\\n").replace("/", "\\/")
    body = body.replace("-", "\\u002d") if draw(st.booleans()) else body
    return '{"note": "see\\n' + body + '"}'


def _percent(text: str, draw: st.DrawFn) -> str:
    body = text.replace("-", "%2D").replace(":", "%3A").replace("\n", "%0A")
    return "%22" + body + "%22"


def _percent_json(text: str, draw: st.DrawFn) -> str:  # one level of nesting
    return "q=%22" + text.replace("-", "%5Cu002d").replace("\n", "%5Cn") + "%22"


def _invisible(text: str, draw: st.DrawFn) -> str:
    pos = _at(text, draw)
    char = draw(st.sampled_from(["\u200b", "\u00ad", "\u200d", "\u2060", "\u202e", "\ufeff"]))
    return text[:pos] + char + text[pos:]


def _full_width(text: str, draw: st.DrawFn) -> str:
    stop = _at(text, draw)
    wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text[:stop])
    return wide + text[stop:]


def _link_split(text: str, draw: st.DrawFn) -> str:
    head = _at(text, draw)
    tail = draw(st.integers(head, len(text)))
    return f"{text[:head]}[{text[head:tail]}](https://example.com/x){text[tail:]}"


def _entity_bare(text: str, draw: st.DrawFn) -> str:
    """A numeric character reference without its ``;`` (HTML 5 still reads it) where no digit
    follows it."""
    pos = _at(text, draw, 0)
    end = "" if not text[pos + 1 : pos + 2].isdigit() else ";"
    return text[:pos] + f"&#{ord(text[pos])}{end}" + text[pos + 1 :]


def _markup_split(text: str, draw: st.DrawFn) -> str:
    """A footnote reference, an image or inline HTML inside the secret."""
    pos = _at(text, draw)
    markup = ["[^1]", "![x](https://example.com/i.png)", "<b></b>", "<!-- -->"]
    return text[:pos] + draw(st.sampled_from(markup)) + text[pos:]


def _nested_invisible(text: str, draw: st.DrawFn) -> str:  # a JSON value inside a JSON string
    pos = _at(text, draw)
    return '{"args": "{\\"k\\": \\"' + text[:pos] + "\\\\u00ad" + text[pos:] + '\\"}"}'


def _quoted(text: str, draw: st.DrawFn) -> str:
    return "\n".join("> " + line for line in text.split("\n"))


FORMS: dict[str, Form] = {
    "plain": _plain,
    "italic": _italic,
    "bold": _bold,
    "markdown_escapes": _md_escapes,
    "entity": _entity,
    "entity_hex": _entity_hex,
    "json_string": _json_string,
    "percent": _percent,
    "percent_json": _percent_json,
    "invisible": _invisible,
    "full_width": _full_width,
    "link_split": _link_split,
    "quoted": _quoted,
    "entity_bare": _entity_bare,
    "markup_split": _markup_split,
    "nested_invisible": _nested_invisible,
}
"""Every form of the issue's list; each keeps the secret readable to a reader."""

_LINE_FORMS = ("plain", "quoted", "json_string", "percent", "percent_json", "entity")
"""Forms that keep a multi-line secret (a PEM block) readable."""


@st.composite
def wrapped(draw: st.DrawFn, text: str) -> tuple[str, str]:
    """``text`` in a random form; returns ``(form name, text as written)``."""
    names = _LINE_FORMS if "\n" in text else tuple(FORMS)
    name = draw(st.sampled_from(names))
    return name, FORMS[name](text, draw)


_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\([nrtbf])|\\([^A-Za-z0-9\s])")
_CONTROL = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}


def _json_unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match[1]:
            return chr(int(match[1], 16))
        return _CONTROL[match[2]] if match[2] else match[3]

    return _JSON_ESCAPE.sub(one, text)


def reader_view(text: str) -> str:
    """``text`` as a reader reads it: entities, JSON escapes and percent-encoding decoded (two
    levels), Markdown link syntax and emphasis gone, invisible characters removed, NFKC."""
    for _ in range(2):
        text = unquote(_json_unescape(html.unescape(text)))
    text = re.sub(r"!\[[^\]]*\]\([^()\s]*\)|\[\^[^\]\s]*\]|<[^<>\n]*>", "", text)
    text = re.sub(r"\]\([^()\s]*\)", "", text).replace("[", "")
    text = re.sub(r"[*_~`]", "", text)
    return unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))
