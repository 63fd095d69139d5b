"""Helpers for the Anthropic, Responses and Ollama provider tests: splits, decoding, replay.

The pure reducers are fed a body at every byte offset and in one-byte reads; the HTTP tests
replay it from :class:`tests.peers.provider_server.ProviderServer` cut at chosen offsets (inside
every multi-byte character, and on both sides of every line end).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from config.models import ProviderConfig
from providers.base import CompletionResponse, ResponseFolder
from providers.errors import ProviderError
from providers.events import StreamChunk, StreamEvent, TextDelta
from providers.stream_reducer import StreamReducer, reduce_body

__all__ = [
    "collect",
    "collect_folded",
    "config",
    "decode",
    "every_split",
    "line_end_offsets",
    "multibyte_offsets",
    "ndjson",
    "reasoning",
    "sse",
    "text",
]

Outcome = tuple[list[StreamEvent], ProviderError | None]


def text(delta: str) -> TextDelta:
    return TextDelta(StreamChunk(delta=delta))


def reasoning(value: str) -> TextDelta:
    return TextDelta(StreamChunk(reasoning=value))


def sse(*objects: dict[str, Any], event_lines: bool = True) -> bytes:
    """An SSE body: one event per object, with ``event: <type>`` lines unless told not to."""
    out = []
    for obj in objects:
        head = f"event: {obj['type']}\n" if event_lines and "type" in obj else ""
        out.append(f"{head}data: {json.dumps(obj, ensure_ascii=False)}\n\n")
    return "".join(out).encode()


def ndjson(*objects: dict[str, Any]) -> bytes:
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects).encode()


def every_split(body: bytes) -> Iterator[list[bytes]]:
    """Two reads cut at every offset 0..len, then one-byte reads."""
    for cut in range(len(body) + 1):
        yield [body[:cut], body[cut:]]
    yield [body[i : i + 1] for i in range(len(body))]


def decode(make: Callable[[], StreamReducer], chunks: list[bytes]) -> Outcome:
    return reduce_body(make(), chunks)


def line_end_offsets(body: bytes) -> list[int]:
    """Offsets just before and just after every LF."""
    out: set[int] = set()
    for index, byte in enumerate(body):
        if byte == 0x0A:
            out.update((index, index + 1))
    return sorted(out)


def multibyte_offsets(body: bytes) -> list[int]:
    """Offsets strictly inside a multi-byte UTF-8 character (before a continuation byte)."""
    return [i for i, byte in enumerate(body) if byte & 0xC0 == 0x80]


def config(kind: str, base_url: str, **overrides: Any) -> ProviderConfig:
    values: dict[str, Any] = {"kind": kind, "base_url": base_url, "model": "test-model"}
    if kind != "ollama":
        values["api_key"] = "test-key"
    values.update(overrides)
    return ProviderConfig.model_validate(values)


async def collect(stream: AsyncIterator[StreamEvent]) -> Outcome:
    """All events of ``stream``, and the error that ended it (``None`` when it ended well)."""
    events: list[StreamEvent] = []
    try:
        async for event in stream:
            events.append(event)
    except ProviderError as exc:
        return events, exc
    return events, None


async def collect_folded(stream: AsyncIterator[StreamEvent]) -> CompletionResponse:
    """Fold a stream as the turn loop does, provider items included."""
    folder = ResponseFolder()
    async for event in stream:
        folder.add(event)
    folder.provider_items = getattr(stream, "provider_items", ())
    return folder.response()
