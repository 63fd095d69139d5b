"""The context budget (architecture §5 "Context budget"): how much of a conversation's history
fits into a model's context window, estimated before the request (pure: no I/O).

Theory of operation
-------------------
A model reads at most its *context window* of tokens: the prompt (system prompt, messages,
tool definitions, images) and the answer it writes. :func:`context_window` gives the window of
a model (the config's ``context_window``, else :data:`KNOWN_WINDOWS`, else
:data:`DEFAULT_WINDOW`); :func:`answer_reserve` the room kept for the answer (the configured
``max_tokens``, else a quarter of the window up to :data:`DEFAULT_RESERVE`).

Tokens are estimated the way servers count them, roughly: :data:`CHARS_PER_TOKEN` characters
per token over everything a request carries (each message's text, tool calls and verbatim
provider items, tool definitions as JSON), :data:`MESSAGE_OVERHEAD` per message and
:data:`IMAGE_TOKENS` per image. The estimate is calibrated per provider by :class:`Calibration`:
the ratio of the ``prompt_tokens`` the provider reported to the estimate of the request it
answered, applied to the next estimate.

:func:`fit` trims a history to a budget, oldest turns first. A turn begins at a user message and
holds everything up to the next one, so an assistant message with tool calls and the tool
results answering it are always kept or dropped together. The newest turn is always kept (it
holds the message being answered): when it alone does not fit, the history is that turn.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from providers.base import ChatMessage, ToolSpec

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_RESERVE",
    "DEFAULT_WINDOW",
    "HEADROOM",
    "IMAGE_TOKENS",
    "KNOWN_WINDOWS",
    "MESSAGE_OVERHEAD",
    "SQUEEZE",
    "Calibration",
    "Fitted",
    "answer_reserve",
    "context_window",
    "estimate_message",
    "estimate_tools",
    "fit",
    "prompt_limit",
    "turn_starts",
]

CHARS_PER_TOKEN = 4
"""Characters per token of the estimate (English prose and JSON run 3–4.5)."""
MESSAGE_OVERHEAD = 4
"""Tokens each message costs besides its text (its role and framing)."""
IMAGE_TOKENS = 1000
"""Tokens an image costs, fixed (a 1024×1024 image is about 765 for OpenAI, 1400 for Claude)."""
DEFAULT_WINDOW = 8192
"""The window of a model :data:`KNOWN_WINDOWS` does not know, in tokens."""
DEFAULT_RESERVE = 4096
"""The most tokens kept for the answer when the config sets no ``max_tokens``."""
MIN_RATIO, MAX_RATIO = 0.5, 4.0
"""The bounds of a calibration ratio (a ratio outside is a miscount, not a tokenizer)."""

KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    # (a regular expression matched at the start of the model name, the window in tokens);
    # the first match wins. Vendors' model pages; Ollama: the model's trained context.
    (r"gpt-4\.1", 1_047_576),
    (r"gpt-5", 400_000),
    (r"gpt-4o", 128_000),
    (r"gpt-4-turbo", 128_000),
    (r"gpt-4-32k", 32_768),
    (r"gpt-4", 8192),
    (r"gpt-3\.5-turbo", 16_385),
    (r"o1-mini", 128_000),
    (r"o[134](-|$)", 200_000),
    (r"claude-", 200_000),
    (r"llama3\.[123]", 131_072),
    (r"llama3", 8192),
    (r"qwen2\.5", 32_768),
    (r"qwen3", 40_960),
    (r"mistral-nemo", 128_000),
    (r"mistral", 32_768),
    (r"gemma2", 8192),
    (r"gemma3", 131_072),
)


def context_window(model: str, configured: int | None = None) -> int:
    """The context window of ``model`` in tokens: ``configured`` when set, else the first
    :data:`KNOWN_WINDOWS` entry whose pattern starts the model name (an Ollama namespace such
    as ``library/`` is ignored), else :data:`DEFAULT_WINDOW`."""
    if configured is not None:
        return configured
    return _known_window(model)


@lru_cache(maxsize=64)
def _known_window(model: str) -> int:
    """:func:`context_window` of a model without a configured one: the table is walked once
    per model name, not on every request (a provider asks for one or two names)."""
    name = model.lower().rsplit("/", 1)[-1]
    for pattern, window in KNOWN_WINDOWS:
        if re.match(pattern, name):
            return window
    return DEFAULT_WINDOW


def answer_reserve(window: int, max_tokens: int | None) -> int:
    """Tokens kept for the answer: ``max_tokens`` when configured (the request asks for that
    many), else a quarter of ``window`` up to :data:`DEFAULT_RESERVE`."""
    if max_tokens is not None:
        return max_tokens
    return min(DEFAULT_RESERVE, window // 4)


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def estimate_message(message: ChatMessage) -> int:
    """Estimated tokens of one message as sent: its text, tool calls (name and arguments),
    verbatim provider items as JSON, :data:`IMAGE_TOKENS` per image, each document's text, plus
    :data:`MESSAGE_OVERHEAD`."""
    chars = len(message.content) + len(message.tool_call_id or "") + len(message.name or "")
    chars += sum(len(document.text) + 200 for document in message.documents)
    for call in message.tool_calls:
        chars += len(call.id) + len(call.name) + len(call.arguments) + 16
    for item in message.provider_items:
        chars += len(json.dumps(item, ensure_ascii=False, default=str))
    return MESSAGE_OVERHEAD + _tokens(chars) + IMAGE_TOKENS * len(message.images)


def estimate_tools(tools: Sequence[ToolSpec]) -> int:
    """Estimated tokens of the tool definitions offered (their JSON)."""
    chars = sum(
        len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters)) + 32
        for tool in tools
    )
    return _tokens(chars)


def turn_starts(messages: Sequence[ChatMessage]) -> list[int]:
    """Indexes where a turn begins: 0, and every user message after it."""
    return [0] + [i for i, m in enumerate(messages) if i > 0 and m.role == "user"]


@dataclass(frozen=True, slots=True)
class Fitted:
    """The result of :func:`fit`: the history from ``start`` on is sent (``dropped`` = start
    messages are not); ``tokens`` is the estimate of what is sent (history and fixed part)."""

    start: int
    tokens: int

    @property
    def dropped(self) -> int:
        return self.start


def fit(messages: Sequence[ChatMessage], *, limit: int, fixed: int = 0) -> Fitted:
    """The longest suffix of whole turns of ``messages`` whose estimate, with ``fixed`` tokens
    (system prompt, tool definitions, summary), is at most ``limit`` tokens; the newest turn
    is always kept, whether it fits or not.

    Args:
        messages: the history, oldest first (the message being answered last).
        limit: tokens the prompt may take (window − answer reserve, calibrated).
        fixed: tokens sent whatever is trimmed.
    """
    if not messages:
        return Fitted(0, fixed)
    costs = [estimate_message(m) for m in messages]
    starts = turn_starts(messages)
    # Suffix sums from each turn start, newest first; stop at the first that does not fit.
    start = starts[-1]
    total = fixed + sum(costs[start:])
    for candidate in reversed(starts[:-1]):
        more = sum(costs[candidate:start])
        if total + more > limit:
            break
        start, total = candidate, total + more
    return Fitted(start, total)


@dataclass
class Calibration:
    """Per-provider ratio of the prompt tokens a provider reported to our estimate of the
    same request (the latest observation, within [:data:`MIN_RATIO`, :data:`MAX_RATIO`]);
    1.0 for a provider not yet observed."""

    ratios: dict[str, float] = field(default_factory=dict)

    def ratio(self, provider: str) -> float:
        return self.ratios.get(provider, 1.0)

    def observe(self, provider: str, estimated: int, reported: int | None) -> None:
        """Record that ``provider`` counted ``reported`` prompt tokens for a request we
        estimated at ``estimated``; ignored without a report or an estimate."""
        if reported is None or reported <= 0 or estimated <= 0:
            return
        self.ratios[provider] = min(MAX_RATIO, max(MIN_RATIO, reported / estimated))


HEADROOM = 0.9
"""The share of the calibrated room a history is fitted into: the estimate of one request is
calibrated by the one before it, and a turn's messages differ from those of the last."""
SQUEEZE = 0.5
"""After the model rejected a request as too long for its context window, the share of that
request's estimate every later prompt stays under."""


def prompt_limit(window: int, reserve: int, ratio: float) -> int:
    """Estimated tokens a prompt may take for a provider: the window less the answer reserve,
    divided by its calibration ``ratio``, times :data:`HEADROOM`; at least 1."""
    return max(1, int((window - reserve) / ratio * HEADROOM))
