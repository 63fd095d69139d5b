"""Reads that wait for the consumer (providers/read_hold.py): over real sockets on 127.0.0.1, a
streamed body whose consumer says it has no use for more data yet reads what arrived meanwhile
in one go (one wakeup of the read path per wait, not per event), loses nothing, and is not
timed out by the idle bound while it waits; the round runner sets the consumer's word from the
round's sink. Small pieces that arrive while no read waits are joined by the network backend."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import anyio
import pytest

from orchestrator.rounds import ChainEntry, RoundRunner
from providers.base import ChatMessage, ChatRequest
from providers.events import StreamEvent, TextDelta
from providers.net_backend import JOIN_BELOW_BYTES, _Protocol
from providers.read_hold import MAX_HOLD_SECS, READS_MAY_WAIT_UNTIL
from providers.registry import build_provider
from providers.transport import make_client, open_stream
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import provider_config, text_answer
from tests.test_net_backend import chunk, chunked_head, read_request, serving

EVENTS = [b"data: %03d\n\n" % i for i in range(100)]


async def paced_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One chunked body: 100 events 10 ms apart."""
    await read_request(reader)
    writer.write(chunked_head())
    for event in EVENTS:
        writer.write(chunk(event))
        await writer.drain()
        await asyncio.sleep(0.01)
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def read_paced(hold: Callable[[], float] | None, idle: float = 10.0) -> list[bytes]:
    async with serving(paced_handler) as port, make_client() as http:
        token = READS_MAY_WAIT_UNTIL.set(hold)
        try:
            opening = open_stream(
                http, f"http://127.0.0.1:{port}/x", json_body={}, headers={},
                timeout_secs=10, idle_timeout_secs=idle,
            )  # fmt: skip
            async with opening as body:
                return [piece async for piece in body]
        finally:
            READS_MAY_WAIT_UNTIL.reset(token)


async def test_a_consumer_with_no_use_for_data_gets_it_in_a_few_reads() -> None:
    # A second of events 10 ms apart: about one read per MAX_HOLD_SECS instead of one per event.
    held = await read_paced(lambda: anyio.current_time() + 10.0)
    assert b"".join(held) == b"".join(EVENTS)
    assert len(held) <= 1.0 / MAX_HOLD_SECS + 4, len(held)
    at_once = await read_paced(None)
    assert b"".join(at_once) == b"".join(EVENTS)
    assert len(at_once) > 3 * len(held), (len(at_once), len(held))


async def test_a_consumer_that_can_use_data_now_reads_at_once() -> None:
    pieces = await read_paced(lambda: -math.inf)
    assert b"".join(pieces) == b"".join(EVENTS)
    assert len(pieces) > 2 * (1.0 / MAX_HOLD_SECS + 4)


async def test_waiting_for_the_consumer_is_not_idle_time() -> None:
    # The idle bound (0.1 s) is shorter than a wait (0.25 s): bytes keep arriving, so no
    # timeout, however long the consumer lets them gather.
    assert MAX_HOLD_SECS > 0.1
    held = await read_paced(lambda: anyio.current_time() + 10.0, idle=0.1)
    assert b"".join(held) == b"".join(EVENTS)


class _ArrivalSink:
    """A round sink that records when each text delta came."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.text = ""

    def event(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.times.append(anyio.current_time())
            self.text += event.chunk.delta

    def restart(self) -> None:
        pass


class _WaitingSink(_ArrivalSink):
    """... that says the stream's text is of no use for the next 10 s."""

    def reads_may_wait_until(self) -> float:
        return anyio.current_time() + 10.0


@pytest.mark.parametrize("waits", [True, False], ids=["sink says wait", "sink says nothing"])
async def test_the_round_runner_reads_as_its_sink_says(waits: bool) -> None:
    words = [f"w{i}" for i in range(120)]
    body = text_answer(" ".join(words))
    cuts = [i + 2 for i in range(len(body) - 1) if body[i : i + 2] == b"\n\n"]
    async with ProviderServer() as server:
        server.script("/v1/chat/completions", Reply(body=body, cuts=cuts, delay_secs=0.01))
        config = provider_config(server)
        provider = build_provider("p", config)
        sink = _WaitingSink() if waits else _ArrivalSink()
        try:
            result = await RoundRunner([ChainEntry(provider, config)]).run(
                ChatRequest(messages=(ChatMessage("user", "hi"),)), sink
            )
        finally:
            await provider.aclose()
    assert sink.text == " ".join(words) == result.response.text
    bursts = 1 + sum(1 for a, b in zip(sink.times, sink.times[1:], strict=False) if b - a > 0.003)
    if not waits:
        assert bursts > 40, bursts  # one event per read
    else:
        assert bursts <= 1.25 / MAX_HOLD_SECS + 4, bursts


def test_small_pieces_that_arrive_while_no_read_waits_are_joined() -> None:
    protocol = _Protocol()
    for _ in range(10):
        protocol.data_received(b"data: x\n\n")
    assert list(protocol.chunks) == [b"data: x\n\n" * 10]
    big = b"y" * JOIN_BELOW_BYTES
    protocol.data_received(big)
    protocol.data_received(b"z")
    assert list(protocol.chunks) == [b"data: x\n\n" * 10 + big, b"z"]
    assert protocol.buffered == 90 + JOIN_BELOW_BYTES + 1
