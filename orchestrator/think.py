"""Separate ``<think>…</think>`` reasoning from visible content (DESIGN §5). Pure.

Theory of operation
-------------------
Some models (DeepSeek R1, Qwen, models behind OpenAI-compatible proxies) put their reasoning in
the content stream between ``<think>`` and ``</think>``. Tags may be split across deltas
(``"<thi"``, ``"nk>x</think>Hi"``), so the filter holds back a trailing fragment that could be the
start of the next tag and decides when the following delta arrives (or at :meth:`flush`).
Text inside the tags is reasoning; text outside is visible.
"""

from __future__ import annotations

__all__ = ["ThinkFilter"]

_OPEN = "<think>"
_CLOSE = "</think>"


def _partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class ThinkFilter:
    """``feed(delta) -> (visible, reasoning)``; ``flush()`` at the end of the round."""

    def __init__(self) -> None:
        self._inside = False
        self._held = ""

    def feed(self, delta: str) -> tuple[str, str]:
        text = self._held + delta
        self._held = ""
        visible: list[str] = []
        reasoning: list[str] = []
        while text:
            tag = _CLOSE if self._inside else _OPEN
            index = text.find(tag)
            if index >= 0:
                (reasoning if self._inside else visible).append(text[:index])
                text = text[index + len(tag) :]
                self._inside = not self._inside
                continue
            keep = _partial_tag_suffix(text, tag)
            (reasoning if self._inside else visible).append(text[: len(text) - keep])
            self._held = text[len(text) - keep :]
            break
        return "".join(visible), "".join(reasoning)

    def flush(self) -> tuple[str, str]:
        """Release a held fragment that never became a tag."""
        held, self._held = self._held, ""
        return ("", held) if self._inside else (held, "")
