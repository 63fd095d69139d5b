"""One read, one delta (architecture §2 "Events"): the joined events of each read carry the
same text, reasoning and other events as the unjoined ones, at every split of a body."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.anthropic_decode import AnthropicStreamReducer
from providers.base import ChatMessage, ChatRequest
from providers.events import StreamChunk, StreamEvent, TextDelta
from providers.ollama_decode import OllamaStreamReducer
from providers.openai_chat import OpenAIChatProvider
from providers.openai_chat_decode import ChatCompletionsStreamReducer
from providers.responses_decode import ResponsesStreamReducer
from providers.stream_reducer import JoinedReadEvents, StreamReducer
from tests.openai_chat_cases import C03_BODY, C07_BODY, C09_BODY, c01_body
from tests.peers.provider_server import ProviderServer, Reply
from tests.stream_helpers import collect, config, served

REDUCERS: dict[str, Callable[[], StreamReducer]] = {
    "anthropic": AnthropicStreamReducer,
    "oai": ChatCompletionsStreamReducer,  # oai_compat_*: OpenAI-compatible servers
    "openai": ChatCompletionsStreamReducer,
    "responses": ResponsesStreamReducer,
    "ollama": OllamaStreamReducer,
}

Outcome = tuple[list[list[StreamEvent]], type[Exception] | None]


def bodies(fixtures_dir: Path) -> list[tuple[str, bytes]]:
    out = [("openai", body) for body in (C03_BODY, C07_BODY, C09_BODY, c01_body("missing"))]
    for path in sorted(fixtures_dir.iterdir()):
        if path.suffix in (".sse", ".ndjson"):  # the file's prefix names its format
            out.append((path.name.split("_")[0], path.read_bytes()))
    return out


def run(kind: str, pieces: list[bytes], *, joined: bool) -> Outcome:
    """Each read's events as the driver takes them, then the failure (its type)."""
    reducer = REDUCERS[kind]()
    reads = []
    for piece in pieces:
        reads.append(reducer.feed(piece, joined=joined))
        if reducer.done or reducer.failure is not None:
            break
    reads.append(reducer.close())
    return reads, type(reducer.failure) if reducer.failure is not None else None


def meaning(reads: list[list[StreamEvent]]) -> tuple[str, str, list[StreamEvent]]:
    """The joined text, the joined reasoning, the other events in order (a delta carrying
    both text and reasoning counts as one of them)."""
    text, reasoning, others = [], [], []
    for event in (event for read in reads for event in read):
        if type(event) is TextDelta and not (event.chunk.delta and event.chunk.reasoning):
            text.append(event.chunk.delta)
            reasoning.append(event.chunk.reasoning)
        else:
            others.append(event)
    return "".join(text), "".join(reasoning), others


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({min(c, len(body)) for c in cuts})
    return [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]


def test_joined_reads_mean_the_same_at_every_split(fixtures_dir: Path) -> None:
    for kind, body in bodies(fixtures_dir):
        unjoined, failure = run(kind, [body], joined=False)
        expected = meaning(unjoined)
        for k in range(len(body) + 1):
            reads, joined_failure = run(kind, [body[:k], body[k:]], joined=True)
            assert (meaning(reads), joined_failure) == (expected, failure), (kind, k)
            for read in reads:  # joined: no two text deltas of one kind side by side
                kinds = [
                    "delta" if not e.chunk.reasoning else "reasoning" if not e.chunk.delta else ""
                    for e in read
                    if type(e) is TextDelta
                ]
                assert all(a != b or not a for a, b in pairwise(kinds))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_property_joined_reads_mean_the_same_at_random_splits(
    fixtures_dir: Path, data: st.DataObject
) -> None:
    kind, body = data.draw(st.sampled_from(bodies(fixtures_dir)))
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=20))
    pieces = split(body, cuts)
    unjoined, failure = run(kind, pieces, joined=False)
    joined, joined_failure = run(kind, pieces, joined=True)
    assert (meaning(joined), joined_failure) == (meaning(unjoined), failure)
    assert meaning(unjoined) == meaning(run(kind, [body], joined=False)[0])


def test_one_event_per_read_is_exactly_the_unjoined_events(fixtures_dir: Path) -> None:
    # a model's pace: each read one whole event (the reads cut after every blank line)
    for kind, body in bodies(fixtures_dir):
        end = b"\n" if kind == "ollama" else b"\n\n"
        cuts = [i + len(end) for i in range(len(body)) if body[i : i + len(end)] == end]
        pieces = split(body, cuts)
        assert run(kind, pieces, joined=True) == run(kind, pieces, joined=False), kind


def test_a_burst_of_deltas_is_one_delta_per_read() -> None:
    chunks = [
        b'data: {"choices":[{"index":0,"delta":{"content":"%d "}}]}\n\n' % i for i in range(50)
    ]
    reasoning = b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}\n\n'
    both = b'data: {"choices":[{"index":0,"delta":{"content":"a","reasoning":"b"}}]}\n\n'
    reducer = ChatCompletionsStreamReducer()
    body = b"".join(chunks[:25]) + reasoning + reasoning + both + b"".join(chunks[25:])
    assert reducer.feed(body, joined=True) == [
        TextDelta(StreamChunk(delta="".join(f"{i} " for i in range(25)))),
        TextDelta(StreamChunk(reasoning="hmhm")),
        TextDelta(StreamChunk(delta="a", reasoning="b")),
        TextDelta(StreamChunk(delta="".join(f"{i} " for i in range(25, 50)))),
    ]


@pytest.mark.parametrize("pieces", [["a"], ["a", "b", "c"], []])
def test_joined_read_events_join_text_and_keep_other_events_between(pieces: list[str]) -> None:
    read = JoinedReadEvents()
    for piece in pieces:
        read.text(piece)
    read.extend([TextDelta(StreamChunk(reasoning="r"))])
    read.thought("s")
    assert read.events() == [
        *([TextDelta(StreamChunk(delta="".join(pieces)))] if pieces else []),
        TextDelta(StreamChunk(reasoning="rs")),
    ]


def _chat(server: ProviderServer) -> OpenAIChatProvider:
    return OpenAIChatProvider("chat", config("openai_chat", server.url))


async def test_a_joined_stream_over_http_reads_the_same_answer_in_fewer_deltas() -> None:
    deltas = [f"w{i} " for i in range(200)]
    body = b"".join(
        b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % d.encode() for d in deltas
    )
    body += b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    request = ChatRequest(messages=(ChatMessage("user", "hi"),))
    reply = Reply(body=body, content_type="text/event-stream")
    async with served(_chat, "/chat/completions", [reply, reply]) as (provider, _):
        plain, error = await collect(provider.stream(request))
        joined, joined_error = await collect(provider.stream(request).joined())
    assert error is None and joined_error is None
    assert meaning([plain]) == meaning([joined])
    assert meaning([joined])[0] == "".join(deltas)
    assert len(plain) == len(deltas) + 1  # one per wire delta, then Final
    assert len(joined) < len(plain)  # one body sent at once: far fewer reads than deltas
