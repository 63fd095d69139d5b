"""Provider failure rules through the whole pipeline (architecture §2 "Failures", §4 "Restart").

Provider A streams enough text for a visible draft, then dies; provider B serves the round. The
chat must end showing only B's answer (partial), or A's pieces followed by ``(answer restarted)``
and B's answer (multi_message); A is never asked again; the round record shows both attempts,
the TTFT of the serving attempt and B's usage.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import anyio
import pytest

from channels.base import InboundMessage
from orchestrator.store import RoundRecord
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import make_turns, provider_config, sse, text_answer

pytestmark = pytest.mark.usefixtures("closes_providers")

A_TEXT = (
    "Provider A starts a careful answer about the weather in three cities. Paris is mild and "
    "dry this week.\n\nBerlin is colder, with rain expected on most days and strong wind on "
    "Thursday. Rome stays warm and sunny, which makes it the best choice for a short trip, "
    "although the"
)
B_TEXT = "Provider B answers: Paris is mild, Berlin is rainy, Rome is sunny."
INTERVAL_MS = 100


def a_dies_after_text() -> Reply:
    body = sse({"choices": [{"index": 0, "delta": {"content": A_TEXT}}]})
    tail = b'data: {"choices":[{"index":0,"delta":{"content":" mor'
    # The text, then a pause long enough for the draft to be shown, then the socket breaks.
    return Reply(body=body + tail, cuts=[len(body)], pauses={1: 0.8}, abort=True)


def inbound() -> InboundMessage:
    return InboundMessage("fake", "c1", "u1", "user", "weather?", "m1")


def channel(mode: str) -> RecordingChannel:
    return RecordingChannel(
        FakeChannelConfig(
            stream_mode=mode,  # type: ignore[arg-type]
            draft_update_interval_ms=INTERVAL_MS,
            multi_message_delay_ms=INTERVAL_MS,
        )
    )


async def run_fallback(
    tmp_path: Path, mode: str
) -> tuple[RecordingChannel, ProviderServer, list[RoundRecord]]:
    async with ProviderServer() as server:
        server.script("/a/chat/completions", [a_dies_after_text()])
        server.script(
            "/b/chat/completions", [Reply(body=text_answer(B_TEXT), header_delay_secs=0.05)]
        )
        turns, store = make_turns(
            tmp_path, [provider_config(server, "/a"), provider_config(server, "/b")]
        )
        ch = channel(mode)
        with anyio.fail_after(20):
            outcome = await turns.run(ch, inbound())
    assert outcome.outcome == "ok"
    return ch, server, store.rounds()


async def test_fallback_in_partial_mode_shows_only_b(tmp_path: Path) -> None:
    ch, server, rounds = await run_fallback(tmp_path, "partial")
    # A's draft was visible before A died...
    assert any(any(t.startswith("Provider A") for t in state) for _, state in ch.chat.states)
    # ...and the chat ends showing only B's answer.
    assert ch.chat.visible() == [B_TEXT]
    assert len(server.requests_to("/a/chat/completions")) == 1
    assert len(server.requests_to("/b/chat/completions")) == 1
    [record] = rounds
    assert record.provider == "p1" and record.attempts == 2
    assert record.ttft_ms is not None and record.ttft_ms >= 50  # B's first text, after A's time
    assert (record.input_tokens, record.output_tokens) == (11, 5)  # B's usage


async def test_fallback_in_multi_message_mode_keeps_sent_pieces(tmp_path: Path) -> None:
    ch, server, rounds = await run_fallback(tmp_path, "multi_message")
    visible = ch.chat.visible()
    assert visible[0].startswith("Provider A starts")  # a completed paragraph stands
    assert visible[-2:] == ["(answer restarted)", B_TEXT]
    assert not any("Berlin" in t and "Provider A" not in t for t in visible[:-2])
    assert len(server.requests_to("/a/chat/completions")) == 1
    assert rounds[0].attempts == 2


async def test_rate_limited_before_the_stream_is_retried_after_retry_after(tmp_path: Path) -> None:
    async with ProviderServer() as server:
        server.script(
            "/v1/chat/completions",
            [
                Reply.json(
                    {"error": {"message": "Rate limit reached", "type": "requests"}},
                    status=429,
                    headers={"Retry-After": "1"},
                ),
                Reply.json(
                    {
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "Here it is."},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 3},
                    }
                ),
            ],
        )
        turns, store = make_turns(tmp_path, [provider_config(server)])
        ch = channel("partial")
        started = time.monotonic()
        await turns.run(ch, inbound())
    first, second = server.requests
    assert second.received_at - first.received_at >= 1.0
    assert second.json is not None and second.json["stream"] is False  # the blocking retry
    assert time.monotonic() - started >= 1.0
    assert ch.chat.visible() == ["Here it is."]
    [record] = store.rounds()
    assert record.attempts == 2 and record.ttft_ms is None  # blocking rounds have no TTFT


DEEP = "[" * 100_000
"""JSON nested 100000 levels deep: a RecursionError before the decoders were bounded."""


@pytest.mark.parametrize(
    ("kind", "path", "stream_data"),
    [
        ("openai_chat", "/a/chat/completions", DEEP),
        ("openai_responses", "/a/responses", DEEP),
        ("openai_responses", "/a/responses", '{"type": []}'),  # a TypeError before
    ],
)
async def test_a_malformed_body_is_a_protocol_error_and_the_next_provider_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, path: str, stream_data: str
) -> None:
    """architecture §2: a protocol error before any text is retried as a blocking call (which gets a
    malformed body too), then the next provider serves the round."""
    async with ProviderServer() as server:
        server.script(
            path,
            [
                Reply(body=f"data: {stream_data}\n\n".encode()),
                Reply(body=DEEP.encode(), content_type="application/json"),
            ],
        )
        server.script("/b/chat/completions", [Reply(body=text_answer(B_TEXT))])
        turns, store = make_turns(
            tmp_path,
            [
                provider_config(server, "/a", kind=kind, max_retries=1),
                provider_config(server, "/b"),
            ],
        )
        ch = channel("partial")
        with caplog.at_level(logging.WARNING), anyio.fail_after(20):
            outcome = await turns.run(ch, inbound())
    assert outcome.outcome == "ok"
    assert ch.chat.visible() == [B_TEXT]
    streamed, blocking = server.requests_to(path)
    assert (streamed.json["stream"], blocking.json["stream"]) == (True, False)
    assert len(server.requests_to("/b/chat/completions")) == 1
    failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 2, failures
    assert "nested deeper than 256" in failures[1]  # the blocking answer
    expected = "nested deeper than 256" if stream_data == DEEP else "'type' field is not a string"
    assert expected in failures[0]
    [record] = store.rounds()
    assert record.attempts == 3 and record.provider == "p1"
