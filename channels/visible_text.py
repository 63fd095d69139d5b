"""The text a reader sees of a Markdown answer on a client that renders CommonMark (Matrix
``formatted_body``, Discord): the outbound policy checks it (architecture §4 "What the reader
sees is what is checked"). Pure functions, no I/O.

The Markdown is rendered by markdown-it-py (CommonMark with GFM tables and strikethrough, raw
HTML shown as text, as the Matrix adapter renders ``formatted_body``) and the HTML read back
as text with the standard library's :class:`html.parser.HTMLParser`: tags gone, character
references resolved, a line break after each block.
"""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt

__all__ = ["html_visible_text", "markdown_visible_text"]

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
_BLOCKS = frozenset(
    {"p", "br", "li", "tr", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "hr"}
)


class _TextOf(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("td", "th"):
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_visible_text(markup: str) -> str:
    """The text an HTML fragment shows: its character data, references resolved, a line
    break after each block element."""
    parser = _TextOf()
    parser.feed(markup)
    parser.close()
    return "".join(parser.parts).strip("\n")


def markdown_visible_text(markdown: str) -> str:
    """The text ``markdown`` shows once rendered as CommonMark (+ GFM tables, strikethrough).
    Never raises: should the renderer fail, the text is returned as it is."""
    try:
        return html_visible_text(_MARKDOWN.render(markdown))
    except Exception:  # a renderer bug must not hide what the reader sees
        return markdown
