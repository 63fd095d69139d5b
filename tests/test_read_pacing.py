"""Reads paced by the delivery (architecture §5 "Read pacing"): a streaming provider's body is
read again only when the round's ``pause`` returns, and ``pause`` waits while the chat's spacing
would hold the text anyway. Through a real :class:`ReducedStream` and Chat Completions reducer,
:class:`RoundSink`, :class:`ReplyPolicy` and :class:`DeliveryDriver`, on virtual time, with a
body that behaves as a socket: what the server sent while nobody read is taken by one read."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import httpx
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import AnswerEnded, TextEmitted
from orchestrator.policy import ReplyPolicy
from orchestrator.policy.window import HOLDBACK_BYTES, RESCAN_BYTES
from orchestrator.turn.round_sink import READ_AHEAD_SECS, READ_PACE_MAX_SECS, RoundSink
from providers.base import ChatMessage, ChatRequest, PacedStream
from providers.events import Final, StreamEvent, TextDelta
from providers.http_stream import ReducedStream
from providers.openai_chat import OpenAIChatProvider
from providers.openai_chat_decode import ChatCompletionsStreamReducer
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.held_socket import unread_bytes
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import provider_config, text_answer


def chunk(delta: str | None = None, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {} if delta is None else {"content": delta}}
    choice["finish_reason"] = finish
    return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()


DONE = chunk(finish="stop") + b"data: [DONE]\n\n"


@asynccontextmanager
async def socket_body(
    received: MemoryObjectReceiveStream[bytes], reads: list[float], read_bytes: int = 1 << 30
) -> AsyncIterator[AsyncIterator[bytes]]:
    """A body read as a socket is: a read waits for bytes, then takes all that arrived, at
    most ``read_bytes`` (the rest stays for the next read)."""

    async def body() -> AsyncIterator[bytes]:
        async for first in received:
            parts = [first]
            while True:
                try:
                    parts.append(received.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            arrived = b"".join(parts)
            for at in range(0, len(arrived), read_bytes):
                reads.append(anyio.current_time())
                yield arrived[at : at + read_bytes]

    yield body()


async def test_a_paced_stream_reads_again_only_once_its_pace_returned() -> None:
    log: list[str] = []
    send, received = anyio.create_memory_object_stream[bytes](100)
    for piece in (chunk("one "), chunk("two "), DONE):
        send.send_nowait(piece)
    send.close()

    @asynccontextmanager
    async def body() -> AsyncIterator[AsyncIterator[bytes]]:
        async def reads() -> AsyncIterator[bytes]:
            async for piece in received:
                log.append("read")
                yield piece

        yield reads()

    async def pace() -> None:
        log.append("pace")
        await anyio.lowlevel.checkpoint()

    stream = ReducedStream(body(), ChatCompletionsStreamReducer())
    stream.pace_reads(pace)
    events = [event async for event in stream]
    texts = [e.chunk.delta for e in events if isinstance(e, TextDelta)]
    assert texts == ["one ", "two "] and isinstance(events[-1], Final)
    # Before each read after the first, and not after the terminal read.
    assert log == ["read", "pace", "read", "pace", "read"]


class PacedReply:
    """What a paced reply of ``words`` sent ``gap_secs`` apart (20 ms; 0: all at once) did:
    when the server sent each word, when the body was read (each read taking at most
    ``read_bytes``), the events, and the chat (edited every ``interval_ms``, once a second,
    each write taking ``latency_ms``)."""

    def __init__(
        self,
        words: list[str],
        latency_ms: int = 0,
        *,
        gap_secs: float = 0.02,
        interval_ms: int = 1000,
        read_bytes: int = 1 << 30,
    ) -> None:
        self.words = words
        self.gap_secs = gap_secs
        self.read_bytes = read_bytes
        self.sent: list[tuple[float, str]] = []
        self.reads: list[float] = []
        self.events: list[StreamEvent] = []
        config = FakeChannelConfig(
            latency_ms=latency_ms, draft_update_interval_ms=interval_ms, max_length=1 << 20
        )
        self.channel = RecordingChannel(config)

    async def run(self) -> None:
        policy = ReplyPolicy(channel="fake", chat_id="chat")
        driver = DeliveryDriver(self.channel, "chat", policy)
        sink = RoundSink(policy, driver)
        send, received = anyio.create_memory_object_stream[bytes](len(self.words) + 1)

        async def server() -> None:
            async with send:
                for word in self.words:
                    if self.gap_secs:
                        await anyio.sleep(self.gap_secs)
                    self.sent.append((anyio.current_time(), word))
                    await send.send(chunk(word))
                await send.send(DONE)

        async with anyio.create_task_group() as tg:
            tg.start_soon(driver.run)
            tg.start_soon(server)
            policy.begin_round()
            stream = ReducedStream(
                socket_body(received, self.reads, self.read_bytes),
                ChatCompletionsStreamReducer(),
            )
            stream.pace_reads(sink.pause)
            async for event in stream:
                self.events.append(event)
                sink.event(event)
            sink.end()
            if finished := policy.finish():
                driver.feed(TextEmitted(finished))
            driver.feed(AnswerEnded())


@pytest.mark.looptime
async def test_reads_wait_for_the_chats_spacing_and_every_write_has_the_text_read() -> None:
    # 300 deltas 20 ms apart (6 s) into a chat edited once a second: after the first write the
    # stream is read about every READ_PACE_MAX_SECS instead of 50 times a second; each edit
    # after the first shows what the server sent up to READ_AHEAD_SECS before it, but what the
    # redaction window holds back; the answer arrives whole.
    words = [f"w{i} " for i in range(300)]
    reply = PacedReply(words)
    await reply.run()
    channel, events, sent, reads = reply.channel, reply.events, reply.sent, reply.reads

    assert channel.chat.visible() == ["".join(words)]
    assert isinstance(events[-1], Final)
    writes = channel.chat.chat_writes()
    # Before the first write nothing waits: a read per delta. After it, unpaced, each delta
    # was its own read (50 a second); paced, one every READ_PACE_MAX_SECS and a few around
    # each write (while a write is in flight and just before it, nothing waits).
    after_first = [t for t in reads if t > writes[0].t]
    seconds = 6.0 - writes[0].t
    assert len(after_first) <= seconds * (1 / READ_PACE_MAX_SECS + 4), len(after_first)
    assert len(writes) >= 6
    for write in writes[1:-1]:
        up_to = "".join(w for t, w in sent if t <= write.t - READ_AHEAD_SECS - 0.02)
        shown = write.text.rstrip()
        assert up_to.startswith(shown) or shown.startswith(up_to)
        assert len(up_to) - len(shown) <= 128 + 8, (len(up_to), len(shown))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
async def test_while_a_read_waits_what_the_server_sends_stays_in_the_socket() -> None:
    # 30 deltas 5 ms apart, over a real loopback connection. While each pace waits, the bytes
    # the server sent meanwhile are not taken by the event loop (no wakeup per packet): they
    # are still in the kernel's buffer when the pace ends, and the next read takes them.
    words = " ".join(f"w{i}" for i in range(30))
    body = text_answer(words)
    cuts = [i + 2 for i in range(len(body)) if body[i : i + 2] == b"\n\n"]
    unread: list[int] = []
    async with ProviderServer() as server:
        server.script("/v1/chat/completions", Reply(body=body, cuts=cuts, delay_secs=0.005))
        provider = OpenAIChatProvider("p", provider_config(server))
        port = httpx.URL(server.url).port or 80

        async def pace() -> None:
            await anyio.sleep(0.05)
            unread.append(unread_bytes(port))

        try:
            stream = provider.stream(ChatRequest(messages=(ChatMessage("user", "hi"),)))
            assert isinstance(stream, PacedStream)
            stream.pace_reads(pace)
            texts = [e.chunk.delta async for e in stream.joined() if isinstance(e, TextDelta)]
        finally:
            await provider.aclose()
    assert "".join(texts) == words
    assert unread and max(unread) > 0, unread


@pytest.mark.looptime
async def test_the_first_write_comes_with_the_read_that_lets_the_window_show_text() -> None:
    # Held text short of what the policy could show does not wake delivery (RoundSink), yet the
    # first write comes with the read that takes the text past the window's holdback and the
    # look after it (HOLDBACK_BYTES + RESCAN_BYTES), not one read later.
    words = [f"w{i} " for i in range(100)]
    reply = PacedReply(words)
    await reply.run()
    writes = reply.channel.chat.chat_writes()
    total, due = 0, 0.0
    for t, word in reply.sent:
        total += len(word)
        if total > HOLDBACK_BYTES + RESCAN_BYTES:
            due = t
            break
    assert 0.0 < writes[0].t <= due, (writes[0].t, due)


@pytest.mark.looptime
async def test_while_a_write_is_in_flight_the_reads_keep_their_pace() -> None:
    # Each write takes 300 ms (a slow chat API): the next can start only the interval after it
    # lands, so the reads meanwhile keep their pace instead of taking each delta as it comes
    # (the bound of the test above: one a pace and a few around each write; 71 reads unpaced).
    words = [f"w{i} " for i in range(300)]
    reply = PacedReply(words, latency_ms=300)
    await reply.run()
    assert reply.channel.chat.visible() == ["".join(words)]
    writes = reply.channel.chat.chat_writes()
    assert len(writes) >= 5
    after_first = [t for t in reply.reads if writes[0].t < t < writes[-2].t]
    seconds = writes[-2].t - writes[0].t
    assert len(after_first) <= seconds * (1 / READ_PACE_MAX_SECS + 4), len(after_first)


@pytest.mark.looptime
async def test_a_burst_in_the_socket_is_read_between_two_writes_not_a_read_a_write() -> None:
    # The server sends a whole answer at once (3,000 deltas, ~150 KB) into a chat redrawn every
    # 100 ms, as the console is; a read takes at most 4 KB, as a socket read does (~40 reads).
    # The reads in the READ_AHEAD_SECS before a write do not wait: the burst is read by the
    # second write and the answer is whole by the third. Were each of those reads to wait for
    # the write, a read would take a write's interval: ~4 s here, and `relaybot run` took 53 s
    # instead of 0.8 s to print a 60,000-delta answer.
    words = [f"word{i} " for i in range(3000)]
    reply = PacedReply(words, gap_secs=0.0, interval_ms=100, read_bytes=4096)
    await reply.run()
    assert reply.channel.chat.visible() == ["".join(words)]
    assert len(reply.reads) >= 30
    writes = reply.channel.chat.chat_writes()
    assert reply.reads[-1] <= writes[0].t + 2 * 0.1, (writes[0].t, reply.reads[-1])
    assert len(writes) <= 3, [w.t for w in writes]
