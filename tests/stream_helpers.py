"""Helpers for the Anthropic, Responses and Ollama provider tests: splits, decoding, replay.

The pure reducers are fed a body at every byte offset and in one-byte reads; the HTTP tests
replay it from :class:`tests.peers.provider_server.ProviderServer` cut at chosen offsets (inside
every multi-byte character, and on both sides of every line end: :func:`replay_offsets`).
:func:`served` points a provider at a local server for one test; :func:`stream_at_cuts` streams
one reply cut at each offset, and :func:`replay_fixture` checks a recorded body that way;
:func:`typed_refusal` checks that a non-2xx answer fails the stream and the blocking call alike.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from config.models import ProviderConfig
from providers.base import ChatRequest, CompletionResponse, ModelProvider, ResponseFolder
from providers.errors import ProviderError
from providers.events import StreamChunk, StreamEvent, TextDelta
from providers.stream_reducer import StreamReducer, reduce_body
from tests.peers.provider_server import ProviderServer, Reply

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
    "replay_fixture",
    "replay_offsets",
    "served",
    "sse",
    "stream_at_cuts",
    "text",
    "typed_refusal",
]

Outcome = tuple[list[StreamEvent], ProviderError | None]
P = TypeVar("P", bound=ModelProvider)


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


def replay_offsets(body: bytes) -> list[int]:
    """The offsets the HTTP tests cut a body at: both sides of every LF, inside every character."""
    return sorted({*line_end_offsets(body), *multibyte_offsets(body)})


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


@asynccontextmanager
async def served(
    make: Callable[..., P], path: str, replies: Reply | Sequence[Reply], **overrides: Any
) -> AsyncIterator[tuple[P, ProviderServer]]:
    """A local server answering ``path`` with ``replies``, and ``make(server, **overrides)``.

    The provider is closed, then the server stopped, on exit; ``server.requests`` stays readable.
    """
    async with ProviderServer() as server:
        server.script(path, replies)
        provider = make(server, **overrides)
        try:
            yield provider, server
        finally:
            await provider.aclose()


async def stream_at_cuts(
    make: Callable[..., ModelProvider],
    path: str,
    reply: Reply,
    cuts: Iterable[int],
    request: ChatRequest,
) -> tuple[dict[int, Outcome], ProviderServer]:
    """Serve ``reply`` once per cut, split there with 2 ms before the second piece, and stream
    ``request`` each time; the outcome per cut (in order) and the server."""
    offsets = sorted(cuts)
    replies = [replace(reply, cuts=[cut], delay_secs=0.002) for cut in offsets]
    async with served(make, path, replies) as (provider, server):
        outcomes = {cut: await collect(provider.stream(request)) for cut in offsets}
    return outcomes, server


async def replay_fixture(
    make: Callable[..., ModelProvider],
    path: str,
    fixture: Path,
    request: ChatRequest,
    expected: tuple[list[StreamEvent], type[ProviderError] | None],
) -> ProviderServer:
    """Replay a recorded body cut at each of its :func:`replay_offsets`; assert that every cut
    gives the ``expected`` events and error type (``None``: it ended well). Returns the server."""
    events_expected, error_type = expected
    reply = Reply.fixture(fixture)
    cuts = replay_offsets(reply.body)
    outcomes, server = await stream_at_cuts(make, path, reply, cuts, request)
    for cut, (events, error) in outcomes.items():
        assert events == events_expected, cut
        assert type(error) is error_type if error_type else error is None, cut
    assert len(server.requests_to(path)) == len(cuts)
    return server


async def typed_refusal(
    make: Callable[..., ModelProvider], path: str, reply: Reply, request: ChatRequest
) -> ProviderError:
    """The error a non-2xx ``reply`` gives: the stream raises it before any event, and the
    blocking call raises the same type (both asserted). Returns the stream's error."""
    blocking: ProviderError | None = None
    async with served(make, path, reply) as (provider, _):
        events, error = await collect(provider.stream(request))
        try:
            await provider.complete(request)
        except ProviderError as exc:
            blocking = exc
    assert events == [] and error is not None, events
    assert type(blocking) is type(error), blocking
    return error
