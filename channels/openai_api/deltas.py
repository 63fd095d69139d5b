"""The content deltas of a streamed answer, from the states the delivery engine writes (pure).

Theory of operation
-------------------
The delivery engine drives an ``openai_api`` reply like any ``partial`` chat (architecture §3
"What the chat shows"): it sends a draft and edits it, each state the whole text so far, already
through the outbound policy's redaction window. A stream of Chat Completions chunks can only
append, so :class:`ContentStream` turns each state into what it adds:

- a state whose last lines are tool status lines (``⏳ name…``, ``✓ name 0.4 s``,
  ``✗ name: cause``, after a blank line) shows a tool at work. Its text before them may close a
  code fence only for the look of the draft, so it adds nothing to the content; its status lines
  are streamed, each once, only with ``show_tool_status``;
- any other state, and the final one (written formatted) always, adds what follows the text
  already streamed. A state that does not extend it
  (the engine never takes released text back, so this is not expected) adds nothing;
- a new message (a notice, the answer after it) continues the content after a blank line.

So the content is the concatenation of the redacted states' growth: no character a user of a
chat would not have seen, and never a status line unless asked for.
"""

from __future__ import annotations

__all__ = ["STATUS_MARKS", "ContentStream", "split_status"]

STATUS_MARKS = ("⏳ ", "✓ ", "✗ ")
"""How a tool status line begins (architecture §3 "What the chat shows", tool status)."""

_BREAK = "\n\n"


def split_status(text: str) -> tuple[str, list[str]]:
    """``text`` → (its text before a trailing block of status lines, those lines). Without
    such a block: (``text``, [])."""
    head, sep, tail = text.rpartition(_BREAK)
    lines = tail.split("\n")
    if sep and lines and all(line.startswith(STATUS_MARKS) for line in lines):
        return head, lines
    if not sep and lines and all(line.startswith(STATUS_MARKS) for line in lines):
        return "", lines
    return text, []


class ContentStream:
    """One reply's content so far, fed the states of its messages.

    Args:
        show_tool_status: stream tool status lines too (each distinct line once).
    """

    def __init__(self, *, show_tool_status: bool = False) -> None:
        self._show_status = show_tool_status
        self._message: str | None = None  # the id of the message being streamed
        self._sent = ""  # of that message's text, what was streamed
        self._statuses: set[str] = set()
        self.text = ""
        """Everything streamed so far (the blocking answer's content)."""

    def update(self, message_id: str, state: str, *, final: bool = False) -> str:
        """Message ``message_id`` shows ``state`` now; returns the delta to stream ("" for
        none). A ``final`` state (the engine writes the final text formatted) never holds a
        status line: all of it is the answer's, a last line of its own starting with ``✓``
        included."""
        delta = ""
        if message_id != self._message:
            self._message, self._sent = message_id, ""
        body, statuses = (state, []) if final else split_status(state)
        if statuses:
            if self._show_status:
                for line in statuses:
                    if line not in self._statuses:
                        self._statuses.add(line)
                        delta += self._joined(line)
        elif body.startswith(self._sent) and len(body) > len(self._sent):
            added = body[len(self._sent) :]
            delta += self._joined(added) if not self._sent else added
            self._sent = body
        self.text += delta
        return delta

    def _joined(self, piece: str) -> str:
        """``piece`` starting a new paragraph of the content (after a blank line)."""
        if not self.text:
            return piece
        return piece if self.text.endswith(_BREAK) else _BREAK + piece
