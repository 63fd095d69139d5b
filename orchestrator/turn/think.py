"""Separate a leading ``<think>…</think>`` block from visible content (architecture §5). Pure.

Theory of operation
-------------------
Some models (DeepSeek R1, Qwen, models behind OpenAI-compatible proxies) put their reasoning in
the content stream between ``<think>`` and ``</think>``, and they do it at the very start of an
answer. So the block is reasoning only when it opens the answer (after optional whitespace); a
``<think>`` anywhere later — in prose, in a code sample — is ordinary text, and so is a second
block after the first one closed.

The filter is a small state machine over three states:

* ``opening``: only whitespace, or a proper prefix of ``<think>`` after whitespace, was seen.
  That text is held: the next delta decides (tags may be split across deltas: ``"<thi"``,
  ``"nk>x</think>Hi"``). Anything else ends the state and everything held is visible.
* ``inside``: text is reasoning until ``</think>``; a trailing proper prefix of ``</think>`` is
  held until the next delta decides. Whitespace before ``<think>`` belongs to the block and is
  not shown.
* ``text``: everything is visible, at once; nothing is held.

:meth:`ThinkFilter.flush` (end of the round) releases what is held: held opening text is
visible, a held fragment inside the block is reasoning.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["ThinkFilter"]

_OPEN = "<think>"
_CLOSE = "</think>"


class _State(Enum):
    OPENING = "opening"
    INSIDE = "inside"
    TEXT = "text"


def _partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class ThinkFilter:
    """``feed(delta) -> (visible, reasoning)``; ``flush()`` at the end of the round.

    One filter per model round: a ``<think>`` block counts only at the start of the round's
    content."""

    def __init__(self) -> None:
        self._state = _State.OPENING
        self._held = ""

    def feed(self, delta: str) -> tuple[str, str]:
        if self._state is _State.TEXT:
            return delta, ""
        text, self._held = self._held + delta, ""
        if self._state is _State.OPENING:
            return self._opening(text)
        return self._inside(text)

    def flush(self) -> tuple[str, str]:
        """Release what is held: visible before the block opened, reasoning inside it."""
        held, self._held = self._held, ""
        if self._state is _State.INSIDE:
            return "", held
        self._state = _State.TEXT
        return held, ""

    def _opening(self, text: str) -> tuple[str, str]:
        body = text.lstrip()
        if body.startswith(_OPEN):
            self._state = _State.INSIDE
            return self._inside(body[len(_OPEN) :])
        if _OPEN.startswith(body):  # whitespace only, or a proper prefix of the tag: wait
            self._held = text
            return "", ""
        self._state = _State.TEXT
        return text, ""

    def _inside(self, text: str) -> tuple[str, str]:
        """``text`` read inside the block: reasoning up to ``</think>``, visible after it."""
        index = text.find(_CLOSE)
        if index < 0:
            keep = _partial_tag_suffix(text, _CLOSE)
            self._held = text[len(text) - keep :]
            return "", text[: len(text) - keep]
        self._state = _State.TEXT
        return text[index + len(_CLOSE) :], text[:index]
