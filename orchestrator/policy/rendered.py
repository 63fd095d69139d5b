"""Redaction of a text as the channel's renderer displays it (architecture §4 "What the reader
sees is what is checked"); pure functions.

Theory of operation
-------------------
A formatted final is shown rendered: Markdown syntax gone, escapes resolved, a link showing only
its text. The views of :mod:`orchestrator.policy.views` already read the raw text that way, so a
hit that only the rendered text shows is rare; when there is one, the raw characters it came
from must be found and replaced, and that is where a plain character alignment goes wrong (a
long link URL or a wide table lies between a shown character and its raw source, so the
alignment lands inside the URL and the marker replaces the wrong characters).

:func:`redact_rendered` therefore finds the raw span of each hit by *anchors*: the secret as
shown (its first and last :data:`ANCHOR_CHARS` characters when it is longer than
:data:`WHOLE_CHARS`), each character allowed to have Markdown syntax before it in the raw text
(escapes, emphasis delimiters, link, image and footnote syntax, inline HTML) or to be spelled as
a character reference, the occurrence nearest the alignment's estimate winning. It then renders
the result again, up to three passes while hits remain. A hit whose anchors are not in the raw
text (a spelling only the renderer reads) has its raw lines replaced: those numbered as the
shown lines it is on when the renderer kept the lines, else those it was aligned with; if even
that leaves a secret visible, the whole text becomes the marker. A reader may lose a line of a
pathological answer; a secret is never shown. Such a last resort is never silent: it is logged
with the shape's name and told to :attr:`Redactor.overmask_observer` (the daemon counts it in
``relaybot_redaction_overmasks_total``).

The passes converge by construction: a marker matches no shape (the shapes exclude it and the
redactor skips a hit made of markers) and redaction is idempotent, so once every hit's anchors
are replaced, the rendered text shows nothing more (the hypothesis tests check both).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import lru_cache

import regex

from orchestrator.policy.catalogue import Hit, Redactor, marker
from orchestrator.policy.views import View, aligned

__all__ = ["Renderer", "redact_rendered"]

log = logging.getLogger(__name__)

Renderer = Callable[[str], str]
"""Markdown in, the text a client displays out (the channel's renderer of the final text)."""

WHOLE_CHARS = 512
"""A shown secret up to this many characters is searched for whole in the raw text."""
ANCHOR_CHARS = 16
"""Characters of a longer shown secret, at each end, searched for in the raw text."""
_PASSES = 3
# What may stand between two characters of a secret in the raw text and render as nothing.
_GAP = (
    r"(?:\\(?=[!-/:-@\[-`{-~])|[*_~`|]{1,3}|\[\^[^\[\]\s]{1,32}\]|!?\[|\]\([^()\s]{0,2048}\)"
    r"|\]\[[^\[\]\s]{0,64}\]|\]|<[^<>\n]{1,64}>|[\u00ad\u200b-\u200f\u2060\ufeff])*"
)
_ENTITY = r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?"


@lru_cache(maxsize=256)
def _anchor(chars: str) -> regex.Pattern[str]:
    """``chars`` as the raw text may spell them: syntax between them, each also as a character
    reference."""
    parts = [f"(?:{regex.escape(c)}|{_ENTITY})" for c in chars]
    return regex.compile(_GAP.join(parts))


def _nearest(pattern: regex.Pattern[str], text: str, estimate: int) -> tuple[int, int] | None:
    best: tuple[int, int] | None = None
    for found in pattern.finditer(text, overlapped=True):
        if best is None or abs(found.start() - estimate) < abs(best[0] - estimate):
            best = found.span()
    return best


def _anchored(text: str, shown: str, hit: Hit, view: View) -> tuple[int, int] | None:
    """The raw characters ``hit`` (in ``shown``) came from, found by anchors near the
    alignment's estimate; ``None`` when the anchors are not in the raw text."""
    estimate = (view.raw_start(hit.secret_start), view.raw_end(hit.secret_end))
    secret = shown[hit.secret_start : hit.secret_end]
    if len(secret) <= WHOLE_CHARS:
        return _nearest(_anchor(secret), text, estimate[0])
    head = _nearest(_anchor(secret[:ANCHOR_CHARS]), text, estimate[0])
    if head is None:
        return None
    # Each shown character came from one raw character or more: the tail ends at least
    # len(secret) characters after the head starts.
    for tail in _anchor(secret[-ANCHOR_CHARS:]).finditer(text, head[0], overlapped=True):
        if tail.end() - head[0] >= len(secret):
            return head[0], tail.end()
    return None


def _replace(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    out: list[str] = []
    last = 0
    for begin, end, name in sorted(spans):
        if begin < last and end <= last:
            continue  # inside the span before it
        begin = max(begin, last)
        out.append(text[last:begin])
        out.append(marker(name))
        last = max(end, begin)
    out.append(text[last:])
    return "".join(out)


def _lines(text: str, begin: int, end: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, begin) + 1
    stop = text.find("\n", end)
    return start, len(text) if stop < 0 else stop


def _same_lines(text: str, shown: str, hit: Hit) -> tuple[int, int]:
    """The raw lines numbered as the shown lines ``hit`` is on (a renderer that keeps lines)."""
    first = shown.count("\n", 0, hit.secret_start)
    last = shown.count("\n", 0, hit.secret_end)
    starts = [0, *(i + 1 for i, c in enumerate(text) if c == "\n")]
    if first >= len(starts):
        return len(text), len(text)
    stop = text.find("\n", starts[min(last, len(starts) - 1)])
    return starts[first], len(text) if stop < 0 else stop


def redact_rendered(redactor: Redactor, text: str, render: Renderer) -> str:
    """Redact ``text`` as ``render`` displays it: a secret visible only once rendered (Markdown
    escapes, emphasis, a link or a footnote inside it) has the raw characters it came from
    replaced. Returns ``text`` itself when the rendered text shows nothing."""
    for _ in range(_PASSES):
        shown = render(text)
        hits = list(redactor.hits(shown))
        if not hits:
            return text
        view = aligned(text, shown)
        spans = [(_anchored(text, shown, h, view), h.name) for h in hits]
        if any(span is None for span, _ in spans):
            break
        text = _replace(text, [(*span, name) for span, name in spans if span is not None])
    shown = render(text)
    hits = list(redactor.hits(shown))
    if not hits:
        return text
    view = aligned(text, shown)
    kept_lines = shown.count("\n") == text.count("\n")
    for hit in hits:
        _overmasked(redactor, hit.name, "line")
    text = _replace(
        text,
        [
            (*_same_lines(text, shown, h), h.name)
            if kept_lines
            else (*_lines(text, view.raw_start(h.secret_start), view.raw_end(h.secret_end)), h.name)
            for h in hits
        ],
    )
    remaining = list(redactor.hits(render(text)))
    if not remaining:
        return text
    _overmasked(redactor, remaining[0].name, "piece")
    return marker(remaining[0].name)


def _overmasked(redactor: Redactor, shape: str, scope: str) -> None:
    log.warning(
        "a %s secret could not be found where it was written: its %s is masked whole",
        shape,
        scope,
    )
    if redactor.overmask_observer is not None:
        redactor.overmask_observer(shape, scope)
