"""Where a scan's views begin (architecture §4 "Live redaction window"); pure functions.

A scan from a position inside a text reads what precedes it through its views, which are built
from a little before it: the patterns look back at most 14 characters *of the view*. Counted in
raw characters, that context can be too short or cut a token apart: ``?`` + a link's
``](https://…)`` + ``api_key=…`` reads as ``?api_key=…`` (a URL credential) only if the view
starts before the ``?``, and so does ``?&shy;&shy;&shy;&shy;`` + ``token=…``. :func:`view_context`
counts the context in view characters and never begins inside a token — of the first decoding
pass, and of the second where the first may make one (``[postgres]`` + an image the view drops +
``(https://…)`` is a link only then, read as ``postgres``).
"""

from __future__ import annotations

from orchestrator.policy.view_map import View
from orchestrator.policy.views import (
    LINK_URL_CHARS,
    TOKEN_LEADS,
    VIEW_CONTEXT_CHARS,
    decode_token,
    first_pass,
    token_spans,
)

__all__ = ["VIEW_CONTEXT_REACH", "view_context"]

VIEW_CONTEXT_REACH = LINK_URL_CHARS + 256
"""How far back :func:`view_context` looks at most: a whole link or image and its context."""


def view_context(text: str, safe: int, start: int, settled: int | None = None) -> tuple[int, int]:
    """Where the views of a scan from ``start`` must begin to read what precedes it as the views
    of the whole text do: :data:`VIEW_CONTEXT_CHARS` view characters before it, never inside a
    token, nor after ``start`` (a token that spans it is read whole). ``safe``: a position at or
    before ``start`` that no token of the whole text spans (``0``, or an earlier result). At
    most :data:`VIEW_CONTEXT_REACH` raw characters back (a run of invisible characters is
    unbounded: beyond that, the context is cut in raw characters).

    Returns:
        that position, and the same for ``settled`` (at most ``start``; ``start`` when
        ``None``), found in the same pass: a ``safe`` position for the next call.
    """
    safe = max(safe, start - VIEW_CONTEXT_REACH)
    other = start if settled is None else min(settled, start)
    spans = token_spans(text, safe, start)
    if not spans:  # (what _looked_back gives without tokens)
        return max(safe, start - VIEW_CONTEXT_CHARS), max(safe, other - VIEW_CONTEXT_CHARS)
    here = _looked_back(spans, safe, start)
    there = here if other == start else _looked_back(spans, safe, other)
    if spans and _may_join(text, spans, start):
        # The second decoding pass reads tokens the first one made: ``[postgres]`` + an image
        # the view drops + ``(https://…)`` is a link there, read as ``postgres``. Counted in
        # characters of that view too, and never inside one of its tokens.
        view = first_pass(text, safe)
        here = min(here, _looked_back_twice(view, start))
        there = here if other == start else min(there, _looked_back_twice(view, other))
    return here, there


def _may_join(text: str, spans: list[tuple[int, int, int]], start: int) -> bool:
    """Whether the first decoding pass of ``text`` may make a token before ``start``: a token
    of it beside a character a token begins with, or decoded to one."""
    for a, b, size in spans:
        if a >= start:
            break
        if (a > 0 and text[a - 1] in TOKEN_LEADS) or (b < len(text) and text[b] in TOKEN_LEADS):
            return True
        if size and not TOKEN_LEADS.isdisjoint(decode_token(text[a:b])):
            return True
    return False


def _looked_back_twice(view: View, start: int) -> int:
    """:func:`view_context` of raw ``start`` counted in the characters of the second pass:
    :func:`_looked_back` over the tokens of the first pass's ``view``, mapped back to raw."""
    at = view.view_index(start)
    spans = token_spans(view.text, 0, at)
    if not spans:
        return start
    return view.raw_start(_looked_back(spans, 0, at))


def _looked_back(spans: list[tuple[int, int, int]], safe: int, start: int) -> int:
    """:func:`view_context` of ``start`` from the tokens of ``text[safe:]`` (``spans``)."""
    pos, count = start, 0
    for a, b, size in reversed(spans):
        if a >= start:
            continue
        if b < pos:  # plain characters between the token and ``pos``, one view character each
            if count + pos - b >= VIEW_CONTEXT_CHARS:
                return pos - (VIEW_CONTEXT_CHARS - count)
            count += pos - b
        count += size
        pos = a
        if count >= VIEW_CONTEXT_CHARS:
            return pos
    return max(safe, pos - (VIEW_CONTEXT_CHARS - count))
