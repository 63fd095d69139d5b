"""Open approval prompts of the Matrix channel and the answers that close them.

A prompt is an event the bot sent; an allowed user answers it with a ✅/❌ reaction on it
(``m.annotation``), a reply ``yes``/``no`` to it, or — when it is the only prompt open in that
room — a plain ``yes``/``no`` (:mod:`channels.matrix.events` reads the answers). The first
answer counts; later ones are ordinary messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from channels.matrix.events import approval_answer

__all__ = ["Approval", "Approvals"]


@dataclass
class Approval:
    """One open prompt in ``room_id``; ``answer`` is set once ``answered`` is."""

    room_id: str
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: bool | None = None


class Approvals:
    """The open prompts, keyed by the prompt's event id."""

    def __init__(self) -> None:
        self._open: dict[str, Approval] = {}

    def open(self, room_id: str, prompt_id: str) -> Approval:
        approval = self._open[prompt_id] = Approval(room_id)
        return approval

    def close(self, prompt_id: str) -> None:
        self._open.pop(prompt_id, None)

    def answer(self, prompt_id: str, answer: bool) -> bool:
        """Answer the prompt ``prompt_id``; False when it is not open (or already answered)."""
        approval = self._open.get(prompt_id)
        if approval is None or approval.answered.is_set():
            return False
        approval.answer = answer
        approval.answered.set()
        return True

    def is_open(self, prompt_id: str) -> bool:
        """Whether the prompt ``prompt_id`` is open and not answered yet."""
        approval = self._open.get(prompt_id)
        return approval is not None and not approval.answered.is_set()

    def text_answer(self, room_id: str, replied: str | None, text: str) -> tuple[str, bool] | None:
        """``text`` (replying to ``replied``) read as the answer to an open prompt of
        ``room_id``: (the prompt's event id, the answer), or None (the message is then no
        approval answer). A query: :meth:`answer` takes it."""
        answer = approval_answer(text)
        if answer is None:
            return None
        target = replied
        if target not in self._open:
            here = [key for key, a in self._open.items() if a.room_id == room_id]
            target = here[0] if len(here) == 1 else None
        return (target, answer) if target is not None and self.is_open(target) else None
