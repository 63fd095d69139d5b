"""Matrix formatting: the model's Markdown as ``formatted_body`` (``org.matrix.custom.html``).

Theory of operation
-------------------
A Matrix ``m.text`` event carries a plain ``body`` and, optionally, ``format:
org.matrix.custom.html`` with a ``formatted_body`` in the HTML subset clients render
(Client-Server API, "m.room.message msgtypes", https://spec.matrix.org/latest/client-server-api/#mroommessage-msgtypes).
The ``body`` is the model's Markdown as written (readable as it is); the ``formatted_body`` is
its CommonMark + GFM tables/strikethrough rendering by markdown-it-py with raw HTML disabled (a
model's ``<script>`` shows as text, never as markup). A plain write (a preview) gets the text
escaped, line breaks as ``<br>``.

The limit counts characters of ``body`` (4000, :data:`channels.matrix.kind.MATRIX_MAX_TEXT_LENGTH`),
so a rendering's length is ``len(text)``; nothing here splits text (architecture §3 "Formatting and
splitting"). Pure functions, no I/O (architecture §1).
"""

from __future__ import annotations

import html
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["HTML_FORMAT", "markdown_to_html", "message_content", "plain_to_html"]

HTML_FORMAT = "org.matrix.custom.html"

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)


def markdown_to_html(markdown: str) -> str:
    """``markdown`` (CommonMark + GFM tables and strikethrough) as Matrix HTML, without the
    trailing newline markdown-it adds. Never raises: should the renderer fail, the text is
    returned escaped (:func:`plain_to_html`)."""
    try:
        rendered: str = _MARKDOWN.render(markdown)
    except Exception:  # a renderer bug must not lose the answer
        return plain_to_html(markdown)
    rendered = rendered.strip("\n")
    if rendered.startswith("<p>") and rendered.endswith("</p>") and rendered.count("<p>") == 1:
        rendered = rendered[3:-4]  # one paragraph: shown inline, as clients send it
    return rendered


def plain_to_html(text: str) -> str:
    """``text`` shown as it is: HTML-escaped, each line break a ``<br>``."""
    return html.escape(text, quote=False).replace("\n", "<br>")


def message_content(text: str, *, formatted: bool, msgtype: str = "m.text") -> dict[str, Any]:
    """The content of one ``m.room.message``: ``msgtype``, ``body`` (``text``), ``format`` and
    ``formatted_body`` (the Markdown rendered when ``formatted``, else the text escaped), and an
    empty ``m.mentions`` (the text pings nobody: Client-Server API "User and room mentions")."""
    return {
        "msgtype": msgtype,
        "body": text,
        "format": HTML_FORMAT,
        "formatted_body": markdown_to_html(text) if formatted else plain_to_html(text),
        "m.mentions": {},
    }
