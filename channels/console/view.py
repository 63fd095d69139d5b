"""What the console channel draws of a reply at a terminal; pure functions of the text and a
rich ``Console``, no I/O of their own.

A draft is shown in rich's live region, which cannot be redrawn once it is taller than the
terminal: :func:`live_view` lays out only the draft's last screenful (:func:`screenful_tail`),
so a redraw costs a screenful, not the answer so far. The final form of an answer is its
Markdown as rich renders it, without colours (:func:`rendered_form`). Before an approval prompt
the reply so far is printed for good, without its trailing tool status lines
(:func:`is_status`); the live region then shows only what follows what was printed
(:func:`unprinted`).
"""

from __future__ import annotations

import io

from rich.console import Console, RenderableType
from rich.markdown import Markdown
from rich.segment import Segment, Segments
from rich.text import Text

__all__ = ["is_status", "live_view", "renderable", "rendered_form", "screenful_tail", "unprinted"]

_STATUS_MARKS = ("⏳ ", "✓ ", "✗ ")


def renderable(text: str, formatted: bool) -> Text | Markdown:
    """``text`` as rich draws it: Markdown when ``formatted``, else as it is."""
    return Markdown(text) if formatted else Text(text)


def rendered_form(text: str, width: int) -> str:
    """What a terminal of ``width`` columns shows of Markdown ``text``, without colours."""
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(Markdown(text))
    return out.getvalue().rstrip()


def live_view(console: Console, text: str, formatted: bool) -> RenderableType:
    """The live region's content for a draft ``text``: all of it when it fits the terminal,
    else ``…`` and its last screenful (the terminal's height less 3 rows, at least 3)."""
    rows = max(3, console.height - 3)
    width = console.width
    cut = screenful_tail(text, rows, width)
    view = renderable(text[cut:], formatted)
    lines = console.render_lines(view, console.options.update(width=width), pad=False)
    if not cut and len(lines) <= rows:
        return view
    shown = [Segment("…"), Segment.line()]
    for line in lines[-(rows - 1) :]:
        shown += [*line, Segment.line()]
    return Segments(shown[:-1])


def screenful_tail(text: str, rows: int, width: int) -> int:
    """Where the part of ``text`` that fills the last ``rows`` lines of ``width`` columns
    starts, give or take: 0 for a text of at most two screenfuls; else the start of a line in
    the first half of the last two screenfuls (so the lines shown wrap as in the whole text),
    or a word's start there when no line starts there (a paragraph longer than a screenful:
    its shown lines may then wrap at other words than the whole text's)."""
    budget = 2 * rows * (width + 1)
    if len(text) <= budget:
        return 0
    start = len(text) - budget
    half = start + budget // 2
    line = text.find("\n", start, half)
    if line >= 0:
        return line + 1
    space = text.find(" ", start, half)
    return space + 1 if space >= 0 else start


def unprinted(text: str, printed: list[str] | None) -> str:
    """``text`` after the paragraphs ``printed`` for good above a prompt (the whole text when
    it no longer begins with them)."""
    if not printed:
        return text
    paragraphs = text.split("\n\n")
    if paragraphs[: len(printed)] != printed:
        return text
    return "\n\n".join(paragraphs[len(printed) :])


def is_status(paragraph: str) -> bool:
    """A paragraph of tool status lines (architecture §3 "Tool status")."""
    lines = paragraph.split("\n")
    return bool(paragraph) and all(line.startswith(_STATUS_MARKS) for line in lines)
