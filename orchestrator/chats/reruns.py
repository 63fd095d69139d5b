"""Edited questions (architecture §5 "Chat controls", ``agent.rerun_edited``): which edit of a
user's message runs it again.

With ``agent.rerun_edited`` on, an edit of a conversation's last question answers it again: the
history's last question and everything after it are replaced by the edited question and its new
answer, written into the last answer's message where the channel can
(:meth:`~channels.controls.AnswerControls.answer_rerun`). Any other edit — of an older message,
of a message this instance did not answer, or with the key off — is ignored, as a network's
edit always was.

:class:`LastQuestions` remembers, per conversation, the network id of the message last answered
(this instance's memory: after a restart, or on another instance sharing the store, an edit is
ignored until a question was answered again). :func:`reruns` is the decision, pure.
"""

from __future__ import annotations

__all__ = ["Conversation", "LastQuestions", "reruns"]

Conversation = tuple[str, str, str | None]
"""(channel, chat id, thread id)."""


def reruns(*, enabled: bool, edited_id: str | None, last_question_id: str | None) -> bool:
    """Whether the edit of message ``edited_id`` is answered again: only with ``enabled``
    (``agent.rerun_edited``) and only when it is the conversation's last question."""
    return enabled and edited_id is not None and edited_id == last_question_id


class LastQuestions:
    """The network id of the last question answered, per conversation (one home: here)."""

    def __init__(self) -> None:
        self._ids: dict[Conversation, str] = {}

    def answered(self, conversation: Conversation, message_id: str | None) -> None:
        """A turn starts answering message ``message_id`` (``None``: a message with no id, such
        as ``/regenerate`` asking the same question again: the last question stays)."""
        if message_id is not None:
            self._ids[conversation] = message_id

    def forget(self, conversation: Conversation) -> None:
        """The conversation was reset: no edit runs again until a new question."""
        self._ids.pop(conversation, None)

    def last(self, conversation: Conversation) -> str | None:
        """The id of the conversation's last question, or ``None``."""
        return self._ids.get(conversation)
