"""Where to cut a text that outgrows a message (architecture §3 "Limits", "What the chat shows").

Theory of operation
-------------------
A *cut* is an offset into the text where one message ends and the next begins. The message
before the cut holds ``text[start:cut]``; the next one starts at ``cut``. Cuts are chosen in
this order of preference (all within the limit, measured in the channel's unit):

1. a paragraph boundary: just after a run of blank lines (``"\\n\\n"``, blank lines may hold
   spaces), so the whitespace stays at the end of the earlier message and the next message
   starts with text;
2. a line boundary: just after a ``"\\n"``;
3. a sentence end: just after ``. ! ?`` and the spaces after them (closing quotes and brackets
   may come between), or just after ``。！？`` (no space follows them in CJK text);
4. a word boundary: just after a run of spaces or tabs;
5. a hard cut at the limit, never inside a code point (Python indexes code points, so a UTF-16
   surrogate pair is never split), nor before a combining mark, a zero-width joiner or a
   variation selector (so an accented letter or an emoji sequence stays whole), nor between the
   two halves of a lone-surrogate pair.

A boundary of kinds 1–4 is taken only when it keeps the message at least ``MIN_FILL`` full;
otherwise the latest boundary of any kind is used, and only then a hard cut.

Code fences (CommonMark fenced code blocks, ````` ``` ````` or ``~~~``) stay balanced: when a cut
falls inside an open fence, the message is closed with the fence's marker and the next message
reopens it with the same opening line (info string included). :class:`Fence` carries that
state from one message to the next. Concatenating the messages with these additions removed gives
the text back exactly.

Everything here is pure: strings in, offsets and strings out.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from channels.base import ChannelLimits

__all__ = [
    "MIN_FILL",
    "Chunk",
    "Fence",
    "find_cut",
    "fit_end",
    "measure",
    "opening_fence",
    "render_chunk",
    "scan_fence",
    "split_text",
]

MIN_FILL = 0.5
"""A paragraph, line or word boundary is preferred only when it fills this share of the room."""

_OPENER = re.compile(r"^ {0,3}(?P<marker>`{3,}|~{3,})(?P<info>[^\n]*)$")
_PARAGRAPH = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")
_SENTENCE = re.compile(r"[.!?][\"')\]»”’]*[^\S\n]+|[。！？][\"')\]»”’」』）〕】]*[^\S\n]*")
_WORD = re.compile(r"[^\S\n]+")
_NEWLINE = re.compile("\n")
_ZWJ = "\u200d"
_NO_CUT_BEFORE = frozenset("\u200d\ufe0e\ufe0f")


def measure(limits: ChannelLimits, text: str) -> int:
    """Length of ``text`` in ``limits.unit`` (UTF-16 code units or code points).

    Same as :meth:`ChannelLimits.measure`, but a lone surrogate (possible in text decoded from a
    JSON ``\\ud83d`` escape) counts as one unit instead of raising.
    """
    if limits.unit == "utf16":
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text)


@dataclass(frozen=True, slots=True)
class Fence:
    """An open fenced code block.

    Attributes:
        opener: its opening line without indentation or newline, e.g. ````` ```py `````.
        marker: the fence run that opened it (````` ``` `````, ``~~~~``); a closing line must use
            the same character at least as many times.
    """

    opener: str
    marker: str

    @property
    def reopen(self) -> str:
        """The prefix of a message that continues inside this fence."""
        return self.opener + "\n"

    def closes(self, line: str) -> bool:
        stripped = line.strip(" \t")
        return (
            len(line) - len(line.lstrip(" ")) <= 3
            and len(stripped) >= len(self.marker)
            and set(stripped) == {self.marker[0]}
        )


def opening_fence(line: str) -> Fence | None:
    """The fence ``line`` opens (CommonMark §4.5), or ``None``."""
    match = _OPENER.match(line)
    if match is None:
        return None
    marker, info = match["marker"], match["info"]
    if marker[0] == "`" and "`" in info:
        return None  # CommonMark: a backtick fence's info string holds no backtick
    return Fence(opener=(marker + info).rstrip(" \t"), marker=marker)


def scan_fence(text: str, start: int, end: int, fence: Fence | None) -> Fence | None:
    """The fence open at ``end``, given the one open at ``start``.

    Lines are read from ``start`` (which counts as a line start, as it does at the top of a
    message) to ``end``; a last line cut short at ``end`` counts as a line, since that is how the
    message holding ``text[start:end]`` renders.
    """
    if fence is None and "```" not in text[start:end] and "~~~" not in text[start:end]:
        return None
    pos = start
    while pos < end:
        newline = text.find("\n", pos, end)
        line_end = end if newline < 0 else newline
        line = text[pos:line_end]
        if fence is None:
            fence = opening_fence(line)
        elif fence.closes(line):
            fence = None
        pos = line_end + 1
    return fence


def render_chunk(
    text: str, start: int, cut: int, fence_in: Fence | None, *, close: bool = True
) -> tuple[str, Fence | None]:
    """The message holding ``text[start:cut]``, fences balanced, and the fence open at ``cut``.

    Args:
        fence_in: the fence open at ``start`` (reopened at the top of the message).
        close: close a fence still open at ``cut``. The last message of a text leaves it open
            (a renderer closes it at the end of the document; the text may still grow).

    Returns:
        ``(message_text, fence_out)``: when ``close``, ``fence_out`` is closed at the end of
        ``message_text`` and must be reopened by the next message.
    """
    fence_out = scan_fence(text, start, cut, fence_in)
    body = (fence_in.reopen if fence_in else "") + text[start:cut]
    if fence_out is not None and close:
        body += ("" if body.endswith("\n") else "\n") + fence_out.marker
    return body, fence_out


def fit_end(limits: ChannelLimits, text: str, start: int, end: int, budget: int) -> int:
    """The largest ``e`` in ``[start, end]`` with ``measure(text[start:e]) <= budget``."""
    if budget <= 0:
        return start
    e = min(end, start + budget)
    if limits.unit != "utf16":
        return e
    over = measure(limits, text[start:e]) - budget
    while over > 0:
        # Each code point is 1 or 2 units: dropping ceil(over/2) of them removes at least that.
        e -= max(1, (over + 1) // 2)
        over = measure(limits, text[start:e]) - budget
    while e < end and measure(limits, text[start : e + 1]) <= budget:
        e += 1
    return e


def _safe_hard_cut(text: str, start: int, e: int) -> int:
    """Move a hard cut back so it splits no grapheme-like sequence (bounded look-back)."""
    floor = max(start + 1, e - 16)
    candidate = e
    while candidate > floor and candidate < len(text):
        prev, nxt = text[candidate - 1], text[candidate]
        if (
            unicodedata.combining(nxt)
            or nxt in _NO_CUT_BEFORE
            or prev == _ZWJ
            or ("\ud800" <= prev <= "\udbff" and "\udc00" <= nxt <= "\udfff")
        ):
            candidate -= 1
            continue
        return candidate
    # Nothing safe nearby: a code point is still never split.
    return e


@dataclass(frozen=True, slots=True)
class Chunk:
    """One message's worth of a text: ``text[start:cut]`` and the fence open at ``cut``."""

    cut: int
    fence: Fence | None


def _boundaries(text: str, start: int, stop: int) -> list[list[int]]:
    """Candidate cuts in ``(start, stop]``, latest first: paragraph, line, sentence and word
    boundaries."""
    window = text[start:stop]
    paragraphs = [start + m.end() for m in _PARAGRAPH.finditer(window)]
    lines = [start + m.end() for m in _NEWLINE.finditer(window)]
    sentences = [start + m.end() for m in _SENTENCE.finditer(window)]
    words = [start + m.end() for m in _WORD.finditer(window)]
    return [sorted(kind, reverse=True) for kind in (paragraphs, lines, sentences, words)]


def find_cut(
    limits: ChannelLimits,
    text: str,
    start: int,
    end: int,
    fence_in: Fence | None,
    max_length: int,
) -> Chunk:
    """Choose where the message starting at ``start`` ends (see the module docstring).

    Args:
        limits: the channel's unit.
        text: the whole text; only ``text[start:end]`` is considered.
        fence_in: the fence open at ``start``.
        max_length: the room for the message, in ``limits.unit``, fence additions included.

    Returns:
        A :class:`Chunk` with ``start < cut <= end`` whose rendered message fits in
        ``max_length`` (if even one code point does not fit, the cut is ``start + 1``: progress
        is guaranteed, the limit then is not).
    """
    prefix = measure(limits, fence_in.reopen) if fence_in else 0
    e_max = fit_end(limits, text, start, end, max_length - prefix)
    if e_max <= start:
        return Chunk(start + 1, scan_fence(text, start, start + 1, fence_in))

    def fits(cut: int) -> Chunk | None:
        body, fence_out = render_chunk(text, start, cut, fence_in)
        if fence_out is not None:
            # Do not end a message with an empty code block: cut before its opening line.
            opener_at = max(start, text.rfind("\n", start, cut - 1) + 1)
            if fence_out != fence_in and text[opener_at:cut].strip() == fence_out.opener:
                if opener_at > start and scan_fence(text, start, opener_at, fence_in) is None:
                    return Chunk(opener_at, None)
        if measure(limits, body) > max_length:
            return None
        if fence_out is not None and measure(limits, fence_out.reopen) * 2 >= max_length:
            return Chunk(cut, None)  # an absurdly long opening line: the next does not reopen
        return Chunk(cut, fence_out)

    room = e_max - start
    kinds = _boundaries(text, start, e_max)
    # Preferred: the latest boundary of the best kind that fills at least MIN_FILL of the room.
    for kind in kinds:
        for cut in kind[:4]:
            if cut - start < MIN_FILL * room:
                break
            chunk = fits(cut)
            if chunk is not None:
                return chunk
    # Else the latest boundary of any kind.
    for cut in sorted({c for kind in kinds for c in kind[:4]}, reverse=True):
        chunk = fits(cut)
        if chunk is not None:
            return chunk
    # Else a hard cut, stepping back until the fence marker (if any) fits too.
    cut = e_max
    while cut > start + 1:
        safe = _safe_hard_cut(text, start, cut)
        chunk = fits(safe)
        if chunk is not None:
            return chunk
        cut = safe - 1
    return Chunk(start + 1, scan_fence(text, start, start + 1, fence_in))


def split_text(limits: ChannelLimits, text: str, max_length: int | None = None) -> list[str]:
    """Split ``text`` into messages of at most ``max_length`` (default ``limits.max_length``).

    Fences are balanced across messages; removing the added closing markers and reopening lines
    and concatenating gives ``text`` back. An empty ``text`` gives no message.
    """
    room = limits.max_length if max_length is None else max_length
    messages: list[str] = []
    start, fence = 0, None
    while start < len(text):
        reopen = fence.reopen if fence else ""
        # A code point is at least one unit: a rest longer than the room needs a cut, and
        # only a rest that may fit is measured (so splitting is linear in the text).
        if len(reopen) + len(text) - start <= room:
            tail = reopen + text[start:]
            if measure(limits, tail) <= room:
                messages.append(tail)
                break
        chunk = find_cut(limits, text, start, len(text), fence, room)
        messages.append(render_chunk(text, start, chunk.cut, fence)[0])
        start, fence = chunk.cut, chunk.fence
    return messages
