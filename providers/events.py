"""Stream events a provider yields, in order of arrival (architecture §2).

A streaming call is an async iterator of :data:`StreamEvent`. It ends with exactly one
:class:`Final` when the provider ended the stream properly; any other end raises a
:class:`providers.errors.ProviderError` (``StreamTruncated`` when the terminal signal never came).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Final",
    "FinishReason",
    "PreExecutedToolCall",
    "PreExecutedToolResult",
    "StreamChunk",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "Usage",
    "text_delta",
]

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "other"]


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """One wire delta: visible text and/or reasoning (either may be empty)."""

    delta: str = ""
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer as the model wrote it (before ``<think>`` stripping and redaction)."""

    chunk: StreamChunk


_new = object.__new__
_set_delta = StreamChunk.__dict__["delta"].__set__
_set_reasoning = StreamChunk.__dict__["reasoning"].__set__
_set_chunk = TextDelta.__dict__["chunk"].__set__


def text_delta(delta: str = "", reasoning: str = "") -> TextDelta:
    """``TextDelta(StreamChunk(delta, reasoning))``, equal to it in every way, built through
    the slots' descriptors instead of the frozen dataclasses' ``__init__`` (which sets each
    field with ``object.__setattr__``): the decoders make one per wire delta, and this takes
    half the time."""
    chunk = _new(StreamChunk)
    _set_delta(chunk, delta)
    _set_reasoning(chunk, reasoning)
    event = _new(TextDelta)
    _set_chunk(event, chunk)
    return event


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call the model asks us to run.

    ``arguments`` is JSON text of an object, ``"{}"`` when the model sent none. It is emitted once,
    when complete, at the latest before :class:`Final`.
    """

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True)
class PreExecutedToolCall:
    """A tool the provider (or a proxy in front of it) ran itself; shown as status only."""

    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True)
class PreExecutedToolResult:
    """The output of a :class:`PreExecutedToolCall`; never dispatched by us. ``error``: the
    provider reported the run failed, in a few words (its error code); ``None`` otherwise."""

    name: str
    output: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them; ``None`` for a count it did not report."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Final:
    """The stream ended properly.

    ``finish_reason`` is normalised (Anthropic ``end_turn``→``stop``, ``tool_use``→``tool_calls``,
    ``max_tokens``→``length``); ``raw_finish_reason`` is the provider's own value.
    """

    finish_reason: FinishReason = "stop"
    raw_finish_reason: str | None = None


StreamEvent = TextDelta | ToolCall | PreExecutedToolCall | PreExecutedToolResult | Usage | Final
