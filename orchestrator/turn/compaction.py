"""Compaction (architecture §5 "Context budget", ``agent.history.compaction: summarize``): the
turns that no longer fit the context window are replaced by a summary the model writes (pure:
the request and the prompt; the turn loop sends it and the store keeps the result).

Theory of operation
-------------------
When a turn's history does not fit its budget, the oldest turns are cut so that the rest takes
at most half of it (so that compaction happens every few turns, not at every one). The cut
turns, with the summary kept before them, are written out as plain text (``role: text``, tool
calls and results included) and sent with :data:`SUMMARY_PROMPT` as one blocking round; the
answer replaces the cut turns in the store, and every later request carries it at the end of
its system prompt (:func:`with_summary`).
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.turn.history_budget import CHARS_PER_TOKEN
from providers.base import ChatMessage, ChatRequest

__all__ = ["SUMMARY_HEADING", "SUMMARY_PROMPT", "summary_request", "with_summary"]

SUMMARY_PROMPT = (
    "Summarize the conversation below for the assistant that continues it: the facts, "
    "decisions, names, numbers and open questions it will need, in at most 200 words. "
    "Write only the summary."
)
SUMMARY_HEADING = "Summary of the earlier conversation (older messages are not shown):"


def _line(message: ChatMessage) -> str:
    text = message.content
    for call in message.tool_calls:
        text += f"\n[calls {call.name} with {call.arguments}]"
    if message.role == "tool":
        return f"tool {message.name or ''} result: {text}"
    if message.images:
        text += f" [{len(message.images)} image(s)]"
    return f"{message.role}: {text}"


def summary_request(
    previous: str | None, dropped: Sequence[ChatMessage], *, limit_tokens: int
) -> ChatRequest:
    """The request that asks the model to summarize ``dropped`` (and the ``previous`` summary).
    The transcript is cut from its start to about ``limit_tokens`` estimated tokens."""
    transcript = "\n\n".join(_line(m) for m in dropped)
    if previous:
        transcript = f"(summary so far) {previous}\n\n{transcript}"
    room = max(1000, (limit_tokens - 300) * CHARS_PER_TOKEN)
    if len(transcript) > room:
        transcript = "…" + transcript[-room:]
    return ChatRequest(
        messages=(ChatMessage("system", SUMMARY_PROMPT), ChatMessage("user", transcript))
    )


def with_summary(system_prompt: str, summary: str | None) -> str:
    """The system prompt with the conversation's summary at its end (when there is one)."""
    if not summary:
        return system_prompt
    return f"{system_prompt}\n\n{SUMMARY_HEADING}\n{summary}"
