"""How the local Bot API peer reads a message's markup: ``parse_mode=HTML`` or ``entities``.

Theory of operation
-------------------
Telegram turns a message's ``text`` plus either ``parse_mode`` or ``entities`` into *visible
text* and a list of ``MessageEntity`` spans whose offsets count UTF-16 code units (Bot API,
"Formatting options"). The limit of 4096 applies to the visible text. This module does the same
for the peer, strictly: anything the real server rejects as "can't parse entities" is rejected
here with a :class:`MarkupError` whose message follows Telegram's wording, e.g.
``Can't find end tag corresponding to start tag "b"``.

HTML: the tags of the Bot API's "HTML style" (``b strong i em u ins s strike del tg-spoiler
span.tg-spoiler a code pre blockquote tg-emoji``), ``<pre><code class="language-x">`` as one
``pre`` entity with a language, the four named character references (``&lt; &gt; &amp;
&quot;``) and numeric ones. A bare ``<`` or ``&`` that does not start a tag or a reference is
rejected, as Telegram does.

Entities: each must have a known ``type``, integer ``offset`` ≥ 0 and ``length`` > 0, end
within the text, and carry the field its type needs (``url``, ``custom_emoji_id``, ``user``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ENTITY_TYPES", "MarkupError", "Parsed", "parse_entities", "parse_html", "utf16_len"]

ENTITY_TYPES = frozenset(
    {
        "mention",
        "hashtag",
        "cashtag",
        "bot_command",
        "url",
        "email",
        "phone_number",
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "blockquote",
        "expandable_blockquote",
        "code",
        "pre",
        "text_link",
        "text_mention",
        "custom_emoji",
    }
)

_SIMPLE_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "code": "code",
    "pre": "pre",
}
_NAMED_REFS = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_TAG_RE = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^<>]*?)?)\s*>")
_ATTR_RE = re.compile(r"""([a-zA-Z-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""")
_REF_RE = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]+);")


class MarkupError(ValueError):
    """The markup cannot be parsed; ``str(error)`` is Telegram's detail after
    ``Bad Request: can't parse entities: ``."""


@dataclass(frozen=True)
class Parsed:
    """Visible text and entities (Bot API JSON dicts, sorted by offset then longest first)."""

    text: str
    entities: tuple[dict[str, Any], ...]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (Telegram's unit for lengths and offsets)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _sort(entities: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(sorted(entities, key=lambda e: (e["offset"], -e["length"], e["type"])))


def _attrs(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _ATTR_RE.finditer(raw):
        value = next((g for g in m.group(2, 3, 4) if g is not None), "")
        out[m.group(1).lower()] = _REF_RE.sub(lambda r: _decode_ref(r.group(1)) or r[0], value)
    return out


def _decode_ref(body: str) -> str | None:
    if body.startswith("#"):
        code = int(body[2:], 16) if body[1:2] in "xX" else int(body[1:])
        return chr(code) if 0 < code <= 0x10FFFF else None
    return _NAMED_REFS.get(body)


def parse_html(source: str) -> Parsed:
    """Parse ``source`` as Telegram HTML.

    Raises:
        MarkupError: unsupported or unbalanced tags, a tag left open, a bare ``<`` or ``&``.
    """
    out: list[str] = []
    length16 = 0
    # Each open element: (tag name, its entity; None for the <code> inside a <pre>).
    stack: list[tuple[str, dict[str, Any] | None]] = []
    entities: list[dict[str, Any]] = []
    i = 0

    def byte_offset(pos: int) -> int:
        return len(source[:pos].encode("utf-8"))

    while i < len(source):
        ch = source[i]
        if ch == "<":
            m = _TAG_RE.match(source, i)
            if m is None:
                raise MarkupError(f"Unclosed start tag at byte offset {byte_offset(i)}")
            closing, name, raw_attrs = m.group(1) == "/", m.group(2).lower(), m.group(3)
            if closing:
                if not stack:
                    raise MarkupError(f"Unexpected end tag at byte offset {byte_offset(i)}")
                open_name, entity = stack.pop()
                if open_name != name:
                    raise MarkupError(
                        f"Unmatched end tag at byte offset {byte_offset(i)}, expected "
                        f'"</{open_name}>", found "</{name}>"'
                    )
                if entity is not None:
                    entity["length"] = length16 - entity["offset"]
                    if entity["length"] > 0:
                        entities.append(entity)
            else:
                attrs = _attrs(raw_attrs)
                entity: dict[str, Any] | None = {"offset": length16}
                if name == "code" and stack and stack[-1][0] == "pre" and stack[-1][1]:
                    language = attrs.get("class", "")
                    if language.startswith("language-"):
                        stack[-1][1]["language"] = language.removeprefix("language-")
                    entity = None  # the <pre> carries it
                elif name in _SIMPLE_TAGS:
                    entity["type"] = _SIMPLE_TAGS[name]
                elif name == "span" and attrs.get("class") == "tg-spoiler":
                    entity["type"] = "spoiler"
                elif name == "a" and "href" in attrs:
                    entity.update(type="text_link", url=attrs["href"])
                elif name == "blockquote":
                    quote = "expandable_blockquote" if "expandable" in attrs else "blockquote"
                    entity["type"] = quote
                elif name == "tg-emoji" and "emoji-id" in attrs:
                    entity.update(type="custom_emoji", custom_emoji_id=attrs["emoji-id"])
                else:
                    raise MarkupError(
                        f'Unsupported start tag "{name}" at byte offset {byte_offset(i)}'
                    )
                stack.append((name, entity))
            i = m.end()
            continue
        if ch == "&":
            m = _REF_RE.match(source, i)
            decoded = _decode_ref(m.group(1)) if m else None
            if m is None or decoded is None:
                raise MarkupError(
                    f"Can't find end of the entity starting at byte offset {byte_offset(i)}"
                )
            ch, i = decoded, m.end()
        else:
            i += 1
        out.append(ch)
        length16 += 2 if ord(ch) > 0xFFFF else 1
    if stack:
        raise MarkupError(f'Can\'t find end tag corresponding to start tag "{stack[-1][0]}"')
    return Parsed("".join(out), _sort(entities))


_REQUIRED = {"text_link": "url", "custom_emoji": "custom_emoji_id", "text_mention": "user"}


def parse_entities(text: str, entities: Any) -> Parsed:
    """Validate an ``entities`` array for ``text``.

    Raises:
        MarkupError: not a list of objects, an unknown type, a bad offset or length, a span
            past the end of the text, or a missing required field.
    """
    if not isinstance(entities, list):
        raise MarkupError("entities must be an array")
    total = utf16_len(text)
    checked: list[dict[str, Any]] = []
    for entity in entities:
        if not isinstance(entity, dict):
            raise MarkupError("entity must be an object")
        kind, offset, length = entity.get("type"), entity.get("offset"), entity.get("length")
        if kind not in ENTITY_TYPES:
            raise MarkupError(f'Unsupported entity type "{kind}"')
        if not isinstance(offset, int) or not isinstance(length, int) or offset < 0:
            raise MarkupError("entity offset and length must be non-negative integers")
        if length <= 0:
            continue  # Telegram drops empty entities silently
        if offset + length > total:
            raise MarkupError(
                f"entity beginning at UTF-16 offset {offset} ends after the end of the text "
                f"at UTF-16 offset {total}"
            )
        needed = _REQUIRED.get(kind)
        if needed and not entity.get(needed):
            raise MarkupError(f'entity of type "{kind}" needs the field "{needed}"')
        checked.append(dict(entity))
    return Parsed(text, _sort(checked))
