"""The stream bounds of providers/transport.py over real HTTP (architecture §2 "Timeouts"): one idle
watchdog per stream (a silent stream fails at the bound, a stream that keeps sending never does,
whatever its length, and no timer is armed per read) and a pool sized for concurrent replies
whose waits are not model timeouts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.metrics import Metrics
from orchestrator.turn.provider_chain import ProviderChain
from providers.base import ChatMessage, ChatRequest
from providers.errors import ProviderTimeout
from providers.events import TextDelta
from providers.openai_chat import OpenAIChatProvider
from providers.transport import (
    DEFAULT_MAX_CONNECTIONS,
    BodyStream,
    ProviderClient,
    make_client,
    open_stream,
)
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import chain_config, provider_config, text_answer
from tests.stream_helpers import config

PATH = "/v1/chat/completions"
REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))
WORDS = " ".join(f"w{i}" for i in range(40))


def _cuts(body: bytes) -> list[int]:
    """One piece per SSE event."""
    return [i + 2 for i in range(len(body)) if body[i : i + 2] == b"\n\n"]


async def _text(provider: OpenAIChatProvider) -> str:
    out = []
    async for event in provider.stream(REQUEST):
        if isinstance(event, TextDelta):
            out.append(event.chunk.delta)
    return "".join(out)


async def _run(server: ProviderServer, **overrides: Any) -> tuple[str | None, Exception | None]:
    provider = OpenAIChatProvider("p", provider_config(server, **overrides))
    try:
        return await _text(provider), None
    except ProviderTimeout as exc:
        return None, exc
    finally:
        await provider.aclose()


async def test_a_silent_stream_times_out_at_the_idle_bound() -> None:
    body = text_answer(WORDS)
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=_cuts(body), pauses={3: 5.0}))
        started = time.monotonic()
        text, error = await _run(server, stream_idle_timeout_secs=0.4)
        elapsed = time.monotonic() - started
    assert text is None and isinstance(error, ProviderTimeout) and error.phase == "idle"
    assert 0.4 <= elapsed < 4.0  # at the bound, not at the end of the 5 s pause


async def test_a_stream_that_keeps_sending_is_never_cut_whatever_its_length() -> None:
    # 41 pieces 0.05 s apart: about 2 s in all, five times the 0.4 s idle bound.
    body = text_answer(WORDS)
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=_cuts(body), delay_secs=0.05))
        started = time.monotonic()
        text, error = await _run(server, stream_idle_timeout_secs=0.4)
        elapsed = time.monotonic() - started
    assert error is None and text == WORDS
    assert elapsed > 0.4 * 2  # the stream did outlast the bound several times


async def test_a_consumer_busy_between_reads_is_not_an_idle_stream() -> None:
    # The whole body is sent at once; the consumer then works longer than the bound per event.
    body = text_answer("a b c")
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=_cuts(body)))
        provider = OpenAIChatProvider("p", provider_config(server, stream_idle_timeout_secs=0.2))
        out = []
        loop = asyncio.get_running_loop()
        call_at = loop.call_at
        armed = 0

        def counting_call_at(
            when: float, callback: Callable[..., Any], *args: Any, **kw: Any
        ) -> Any:
            nonlocal armed
            armed += 1
            return call_at(when, callback, *args, **kw)

        loop.call_at = counting_call_at  # type: ignore[method-assign,assignment]
        try:
            async for event in provider.stream(REQUEST):
                if isinstance(event, TextDelta):
                    out.append(event.chunk.delta)
                    await asyncio.sleep(0.3)
        finally:
            del loop.call_at
            await provider.aclose()
    assert "".join(out) == "a b c"
    # 0.9 s of work against a 0.2 s bound: the watchdog looks about once per bound and never
    # spins (the three sleeps and the provider's own timers are counted too).
    assert armed <= 20, armed


async def test_an_outside_cancellation_of_a_silent_stream_is_not_a_timeout() -> None:
    async with ProviderServer() as server:
        server.script(PATH, Reply.stall())
        provider = OpenAIChatProvider("p", provider_config(server, stream_idle_timeout_secs=0.3))
        try:
            with anyio.move_on_after(0.15) as scope:
                await _text(provider)
            # After the cancellation the watchdog is gone: nothing fires into this task later.
            await asyncio.sleep(0.4)
        finally:
            await provider.aclose()
    assert scope.cancelled_caught


async def test_no_timer_is_armed_per_read() -> None:
    """A 3 MB body read in many pieces arms one watchdog timer, not one deadline per read."""
    piece = b"data: " + b"x" * (64 * 1024 - 8) + b"\n\n"
    body = piece * 48
    armed: list[Callable[..., Any]] = []
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=[len(piece) * i for i in range(1, 48)]))
        loop = asyncio.get_running_loop()
        call_at = loop.call_at

        def counting_call_at(when: float, callback: Callable[..., Any], *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
            armed.append(callback)
            return call_at(when, callback, *args, **kw)

        async with make_client() as client:
            opening = open_stream(
                client,
                server.url + PATH,
                json_body={},
                headers={},
                timeout_secs=30,
                idle_timeout_secs=30,
            )
            async with opening as stream:
                loop.call_at = counting_call_at  # type: ignore[method-assign]
                try:
                    reads = [len(chunk) async for chunk in stream]
                finally:
                    del loop.call_at
    assert sum(reads) == len(body) and len(reads) >= 48
    assert len(armed) <= 2, armed  # the watchdog's own timer (and at most one re-arm)


async def test_more_streams_than_httpx_default_pool_run_at_once_and_all_complete() -> None:
    # Each reply holds its connection 3 s after the headers; with httpx's default pool of 100
    # the 101st request would only reach the server once one of the first 100 ended. (3 s: a
    # connection beyond the test server's listen backlog may wait for a SYN retry, 1 s.)
    count = 150
    body = text_answer("one two")
    assert DEFAULT_MAX_CONNECTIONS >= 1000
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=_cuts(body), pauses={1: 3.0}))
        provider = OpenAIChatProvider("p", provider_config(server))
        results: list[str] = []
        try:
            async with anyio.create_task_group() as group:
                for _ in range(count):
                    group.start_soon(_append_text, provider, results)
        finally:
            await provider.aclose()
        first_end = min(r.ended_at or float("inf") for r in server.requests)
        at_once = sum(r.received_at < first_end for r in server.requests)
    assert results == ["one two"] * count
    assert at_once > 100, at_once  # more than httpx's default pool were served at once


async def _append_text(provider: OpenAIChatProvider, results: list[str]) -> None:
    results.append(await _text(provider))


async def test_waiting_for_a_pooled_connection_is_not_a_model_timeout() -> None:
    # Two connections, five streams of 0.6 s each: the last ones wait > 1 s for a connection,
    # far beyond timeout_secs (the headers bound), and still complete.
    body = text_answer("one two")
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=_cuts(body), pauses={1: 0.6}))
        provider = OpenAIChatProvider(
            "p",
            provider_config(
                server, max_connections=2, timeout_secs=0.3, stream_idle_timeout_secs=5
            ),
        )
        results: list[str] = []
        try:
            async with anyio.create_task_group() as group:
                for _ in range(5):
                    group.start_soon(_append_text, provider, results)
        finally:
            await provider.aclose()
    assert results == ["one two"] * 5


def _scraped(metrics: Metrics, sample: str) -> float:
    families = text_string_to_metric_families(generate_latest(metrics.registry).decode())
    return sum(s.value for f in families for s in f.samples if s.name == sample)


async def test_requests_beyond_the_pool_queue_visibly(caplog: pytest.LogCaptureFixture) -> None:
    # One connection, three streams of 0.3 s each: two wait for it, counted, scraped and logged.
    body = text_answer("one two")
    caplog.set_level("INFO", logger="providers.pool_queue")
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=_cuts(body), pauses={1: 0.3}))
        config = chain_config(server, max_connections=1)
        metrics = Metrics()
        chain = ProviderChain(config, metrics)
        provider = chain.rounds.chain[0].provider
        assert isinstance(provider, OpenAIChatProvider)
        results: list[str] = []
        waiting: list[float] = []
        try:
            async with anyio.create_task_group() as group:
                for _ in range(3):
                    group.start_soon(_append_text, provider, results)
                await anyio.sleep(0.15)
                waiting.append(_scraped(metrics, "relaybot_provider_requests_waiting"))
        finally:
            await chain.aclose()
    assert results == ["one two"] * 3
    assert waiting == [2]
    assert _scraped(metrics, "relaybot_provider_requests_waiting") == 0
    assert _scraped(metrics, "relaybot_provider_requests_queued_total") == 2
    assert provider.pool_queue is not None and provider.pool_queue.longest_secs > 0.2
    lines = [r.getMessage() for r in caplog.records if r.name == "providers.pool_queue"]
    assert lines[0].startswith("provider small: all 1 connections of its pool are in use")
    assert any("drained: 2 requests waited" in line for line in lines[1:]), lines


async def test_a_request_cancelled_while_it_waits_leaves_the_queue() -> None:
    body = text_answer("one two")
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=_cuts(body), pauses={1: 0.4}))
        provider = OpenAIChatProvider("small", provider_config(server, max_connections=1))
        queue = provider._client.pool_queue  # type: ignore[attr-defined]
        results: list[str] = []
        waiting: list[int] = []
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_append_text, provider, results)
                await anyio.sleep(0.1)
                with anyio.move_on_after(0.1):
                    await _append_text(provider, results)
                waiting.append(queue.waiting)
        finally:
            await provider.aclose()
    assert results == ["one two"]
    assert waiting == [0] and queue.queued == 1


async def test_the_headers_bound_still_holds_once_a_connection_is_ours() -> None:
    body = text_answer("late")
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, header_delay_secs=2.0))
        text, error = await _run(server, timeout_secs=0.3)
    assert text is None and isinstance(error, ProviderTimeout) and error.phase == "headers"


@pytest.mark.parametrize("value", [0, -1])
def test_max_connections_must_be_positive(value: int) -> None:
    with pytest.raises(ValueError):
        config("openai_chat", "http://127.0.0.1:9/v1", max_connections=value)


def test_the_pool_of_a_provider_is_its_max_connections() -> None:
    settings = config("openai_chat", "http://127.0.0.1:9/v1", max_connections=7)
    provider = OpenAIChatProvider("p", settings)
    assert isinstance(provider._client, ProviderClient)
    assert provider._client.max_connections == 7
    assert provider._client.timeout.pool is None and provider._client.timeout.read is None


@pytest.mark.parametrize("coding", ["gzip", "identity", None])
async def test_a_stream_decodes_with_or_without_a_content_coding(coding: str | None) -> None:
    import gzip

    body = text_answer(WORDS)
    sent = gzip.compress(body) if coding == "gzip" else body
    headers = {"Content-Encoding": coding} if coding else {}
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=sent, headers=headers, cuts=range(0, len(sent), 50)))
        text, error = await _run(server)
    assert error is None and text == WORDS


_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
_EVENTS = [b"data: %d\n\n" % i for i in range(3)]
_FRAMES = [b"%x\r\n%s\r\n" % (len(event), event) for event in _EVENTS]


def _trickled(where: str) -> tuple[list[bytes], int]:
    """The writes of a chunked body and the index of the one that trickles: 16 framing bytes,
    a chunk extension of the first size line (begun with the head) or of a later chunk's, or
    a trailer field's name after the last chunk."""
    slow = b";" + b"x" * 15
    first, second = (b"%x" % len(event) for event in _EVENTS[:2])
    if where == "first size line":
        rest = [b"\r\n" + _EVENTS[0] + b"\r\n", *_FRAMES[1:], b"0\r\n\r\n"]
        return [_HEAD + first, slow, *rest], 1
    if where == "later size line":
        rest = [b"\r\n" + _EVENTS[1] + b"\r\n", _FRAMES[2], b"0\r\n\r\n"]
        return [_HEAD + _FRAMES[0], second, slow, *rest], 2
    return [_HEAD + b"".join(_FRAMES) + b"0\r\nx-t", b"x" * 16, b": 1\r\n\r\n"], 1


def _open_raw(
    client: httpx.AsyncClient, server: asyncio.Server, *, idle_timeout_secs: float
) -> AbstractAsyncContextManager[BodyStream]:
    """A stream from ``server`` (a raw asyncio server) under the given idle bound."""
    port = server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    return open_stream(
        client, url, json_body={}, headers={}, timeout_secs=5, idle_timeout_secs=idle_timeout_secs
    )


@pytest.mark.parametrize("where", ["first size line", "later size line", "trailer"])
async def test_framing_bytes_alone_do_not_reset_the_idle_bound(where: str) -> None:
    # architecture §2: the byte-idle bound counts data; chunked framing is parsed inside
    # aiohttp. 16 framing bytes 0.1 s apart are 1.6 s without a data byte, four times the
    # bound: the stream ends there, with the data that came before.
    writes, slow_at = _trickled(where)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        for index, data in enumerate(writes):
            if index == slow_at:  # the trickle: one byte per 0.1 s
                for byte in range(len(data)):
                    writer.write(data[byte : byte + 1])
                    await writer.drain()
                    await asyncio.sleep(0.1)
                continue
            writer.write(data)
            await writer.drain()
        await reader.read()  # until the client closes

    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    got: list[bytes] = []
    async with server, make_client() as client:
        opening = _open_raw(client, server, idle_timeout_secs=0.4)
        started = time.monotonic()
        with pytest.raises(ProviderTimeout) as raised:
            async with opening as stream:
                async for chunk in stream:
                    got.append(chunk)
        elapsed = time.monotonic() - started
    assert raised.value.phase == "idle"
    assert b"".join(_EVENTS).startswith(b"".join(got))
    assert 0.4 <= elapsed < 1.6  # at the bound, not at the end of the trickle


async def test_framing_bytes_that_stop_arriving_are_an_idle_stream() -> None:
    # The counterpart: a size line begun and never finished is silence at the bound.
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(_HEAD + _FRAMES[0] + b"5;x")
        await writer.drain()
        await reader.read()

    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    got: list[bytes] = []
    async with server, make_client() as client:
        opening = _open_raw(client, server, idle_timeout_secs=0.3)
        started = time.monotonic()
        with pytest.raises(ProviderTimeout) as raised:
            async with opening as stream:
                async for chunk in stream:
                    got.append(chunk)
        elapsed = time.monotonic() - started
    assert raised.value.phase == "idle" and got == [_EVENTS[0]]
    assert 0.3 <= elapsed < 3.0
