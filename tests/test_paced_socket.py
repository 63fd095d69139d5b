"""Trying to break the socket hold of paced reads (architecture §5 "Read pacing";
``BodyStream.held`` in ``providers/transport.py``): while a paced read waits, the transport of the
response's connection is paused, so what the server sends meanwhile waits in the kernel.

Over real loopback connections (:class:`ProviderServer`, :class:`HttpProxy`) and a real
:class:`OpenAIChatProvider`, with paces that hold the socket far longer than a chat's spacing
would: a reader cancelled while held, the connection reused after a hold, a body that ends or
breaks while held, the byte-idle bound around holds, a multi-MB burst arriving while held, and
the bodies that take httpx's path (gzip, a proxy). Every test runs under ``anyio.fail_after``:
a hold that is never released fails it instead of hanging the run.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import socket
import struct
import sys
import termios
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import httpx
import pytest

from providers.base import ChatMessage, ChatRequest, PacedStream
from providers.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    StreamTruncated,
)
from providers.events import Final, TextDelta
from providers.openai_chat import OpenAIChatProvider
from tests.peers.http_proxy import HttpProxy
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import provider_config, text_answer

PATH = "/v1/chat/completions"
REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")


def words(count: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def event_ends(body: bytes) -> list[int]:
    """The offsets just after each ``\\n\\n``: one cut per SSE event."""
    return [i + 2 for i in range(len(body)) if body[i : i + 2] == b"\n\n"]


def unfinished(text: str) -> bytes:
    """A Chat Completions stream of ``text`` word by word, without a finish or ``[DONE]``.

    Joined once, so a body of megabytes takes milliseconds (``tests.pipeline.sse`` adds bytes
    to bytes, quadratic in the number of events: 300 000 events take minutes)."""
    pieces = text.split(" ")
    last = len(pieces) - 1
    return b"".join(
        b"data: %s\n\n"
        % json.dumps(
            {"choices": [{"index": 0, "delta": {"content": p + (" " if i < last else "")}}]}
        ).encode()
        for i, p in enumerate(pieces)
    )


def answer(text: str) -> bytes:
    """:func:`tests.pipeline.text_answer` of ``text``, built in linear time."""
    return unfinished(text) + text_answer("")[len(unfinished("")) :]


def provider(server: ProviderServer, **overrides: Any) -> OpenAIChatProvider:
    values: dict[str, Any] = {"timeout_secs": 5, "stream_idle_timeout_secs": 30}
    values.update(overrides)
    return OpenAIChatProvider("p", provider_config(server, **values))


Pace = Callable[[], Awaitable[None] | None]


async def paced_text(chat: OpenAIChatProvider, pace: Pace) -> tuple[str, bool]:
    """The text of one paced stream of ``chat``, and whether it ended with ``Final``."""
    stream = chat.stream(REQUEST)
    assert isinstance(stream, PacedStream)
    stream.pace_reads(pace)
    texts: list[str] = []
    final = False
    async for event in stream.joined():
        if isinstance(event, TextDelta):
            texts.append(event.chunk.delta)
        final = isinstance(event, Final)
    return "".join(texts), final


async def plain_text(chat: OpenAIChatProvider) -> str:
    texts = [e.chunk.delta async for e in chat.stream(REQUEST) if isinstance(e, TextDelta)]
    return "".join(texts)


def sleeping(*secs: float) -> Callable[[], Awaitable[None]]:
    """A pace that sleeps ``secs[i]`` before the i-th read after the first (the last repeats)."""
    calls = 0

    async def pace() -> None:
        nonlocal calls
        await anyio.sleep(secs[min(calls, len(secs) - 1)])
        calls += 1

    return pace


def unread_bytes(port: int) -> int:
    """Bytes the kernel holds unread on this process's TCP sockets connected to ``port``."""
    unread = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.fromfd(int(name), socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            continue
        with sock:
            try:
                peer = sock.getpeername()
            except OSError:
                continue
            if not isinstance(peer, tuple) or peer[1] != port:
                continue
            unread += struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0\0\0\0"))[0]
    return unread


def port_of(server: ProviderServer) -> int:
    return httpx.URL(server.url).port or 80


# -- (1) a reader cancelled while the socket is held ----------------------------------------------

BIG = words(6000)
"""About 400 KB of Chat Completions events: many reads (16 KiB each)."""

WHOLE = words(750)
"""About 50 KB of events: more than one read takes (16 KiB), less than aiohttp buffers before
its own flow control stops reading (128 KiB), so one write of it is all in aiohttp's buffer
after the first read."""


@pytest.mark.parametrize("arrived", ["partly", "whole"])
async def test_a_reader_cancelled_while_held_leaves_a_provider_that_answers(
    arrived: str,
) -> None:
    # "partly": the server sends the rest of the body while the socket is held. "whole": the
    # whole body (Content-Length) arrived before the hold began; aiohttp ended the response and
    # gave its connection back to the pool while the reader is still behind. Either way the
    # reader is cancelled inside its pace, and the next request of the same provider, on the
    # connection the pool may hand back, must be answered.
    body = text_answer(BIG)
    first = (
        Reply(body=body, cuts=[20_000], pauses={0: 0.1, 1: 0.05})
        if arrived == "partly"
        else Reply(body=text_answer(WHOLE), framing="length", pauses={0: 0.1})
    )
    second = text_answer("second answer")
    async with ProviderServer() as server:
        server.script(PATH, [first, Reply(body=second)])
        chat = provider(server)
        held = anyio.Event()

        async def pace() -> None:
            held.set()
            await anyio.sleep(30)

        try:
            with anyio.fail_after(10):
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as tg:

                        async def cancel_when_held() -> None:
                            await held.wait()
                            await anyio.sleep(0.2)
                            scope.cancel()

                        tg.start_soon(cancel_when_held)
                        await paced_text(chat, pace)
                assert scope.cancelled_caught and held.is_set()
                assert await plain_text(chat) == "second answer"
        finally:
            await chat.aclose()


# -- (2) the connection a held stream gave back ---------------------------------------------------


async def test_a_connection_given_back_during_a_hold_serves_another_request_at_once() -> None:
    # The whole first body arrived (Content-Length) before the reader caught up: aiohttp gave the
    # connection back to the pool while the reader still holds its pace. Another request of the
    # same provider, made during that hold, takes that connection and must be answered at once,
    # not when the first stream's pace ends.
    body = text_answer(WHOLE)
    async with ProviderServer() as server:
        server.script(
            PATH,
            [Reply(body=body, framing="length", pauses={0: 0.1}), Reply(body=text_answer("b"))],
        )
        chat = provider(server)
        held = anyio.Event()
        took: list[float] = []

        async def pace() -> None:
            if not held.is_set():
                held.set()
                await anyio.sleep(2.0)

        async def other() -> None:
            await held.wait()
            start = anyio.current_time()
            assert await plain_text(chat) == "b"
            took.append(anyio.current_time() - start)

        try:
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(other)
                    text, final = await paced_text(chat, pace)
        finally:
            await chat.aclose()
    assert text == WHOLE and final
    assert took and took[0] < 1.0, took


async def test_after_a_held_stream_the_pooled_connection_reads_normally() -> None:
    # A paced stream ends properly and its connection goes back to the pool; the next streams
    # reuse it and read everything at once, paced or not.
    async with ProviderServer() as server:
        body = text_answer(words(200))
        server.script(PATH, Reply(body=body, cuts=event_ends(body)[::20], delay_secs=0.01))
        chat = provider(server, stream_idle_timeout_secs=2)
        try:
            with anyio.fail_after(20):
                for _ in range(3):
                    assert await paced_text(chat, sleeping(0.05)) == (words(200), True)
                    assert await plain_text(chat) == words(200)
        finally:
            await chat.aclose()
    assert len(server.requests) == 6


# -- (3) the body ends or breaks while the socket is held -----------------------------------------


def _ends() -> list[Any]:
    text = words(40)
    done = text_answer(text)
    cut = unfinished(text)
    half = len(cut) // 2
    cases: list[tuple[str, bytes, dict[str, Any], type[ProviderError] | None]] = [
        ("chunked-end", done, {}, None),
        ("length-end", done, {"framing": "length"}, None),
        ("close-end", done, {"framing": "close"}, None),
        ("chunked-end-no-done", cut, {}, StreamTruncated),
        ("close-end-no-done", cut, {"framing": "close"}, StreamTruncated),
        ("chunked-cut", cut[: half + 7], {"abort": True}, ProviderConnectionError),
        (
            "length-cut",
            cut[: half + 7],
            {"framing": "length", "abort": True},
            ProviderConnectionError,
        ),
    ]
    return [pytest.param(body, kwargs, error, id=name) for name, body, kwargs, error in cases]


@pytest.mark.parametrize(("body", "kwargs", "error"), _ends())
async def test_a_body_that_ends_or_breaks_while_held_ends_or_fails_typed(
    body: bytes, kwargs: dict[str, Any], error: type[ProviderError] | None
) -> None:
    # The first event comes at once; the rest of the body and its end (or the broken connection)
    # come while the reader holds its first pace of 0.3 s.
    first = event_ends(body)[0]
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=[first], pauses={1: 0.1}, **kwargs))
        chat = provider(server)
        try:
            with anyio.fail_after(10):
                try:
                    text, final = await paced_text(chat, sleeping(0.3))
                except ProviderError as exc:
                    assert error is not None and isinstance(exc, error), repr(exc)
                else:
                    assert error is None, "no error"
                    assert (text, final) == (words(40), True)
                    assert await plain_text(chat) == words(40)  # the provider still answers
        finally:
            await chat.aclose()


# -- (4) the byte-idle bound around holds ---------------------------------------------------------


async def test_a_silent_server_while_paced_ends_at_the_idle_bound() -> None:
    # Two events, then nothing on an open socket. The reader holds 0.3 s before its next read;
    # that read then waits, and the byte-idle bound (0.5 s of reading) ends it, typed.
    body = text_answer("a b c")
    cuts = event_ends(body)
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body[: cuts[1]], cuts=cuts[:1], hold_open=True))
        chat = provider(server, stream_idle_timeout_secs=0.5)
        ended: list[float] = []

        async def pace() -> None:
            await anyio.sleep(0.3)
            ended.append(anyio.current_time())

        try:
            with anyio.fail_after(10), pytest.raises(ProviderTimeout) as caught:
                await paced_text(chat, pace)
            waited = anyio.current_time() - ended[-1]
        finally:
            await chat.aclose()
    assert caught.value.phase == "idle"
    assert 0.45 <= waited <= 1.5, waited


async def test_holding_longer_than_the_idle_bound_is_not_a_silence() -> None:
    # The server sends an event every 50 ms; the reader holds 0.6 s before each read, more than
    # the 0.3 s byte-idle bound. The bound counts only time spent reading: no timeout.
    text = words(60)
    body = text_answer(text)
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=event_ends(body), delay_secs=0.05))
        chat = provider(server, stream_idle_timeout_secs=0.3)
        try:
            with anyio.fail_after(20):
                assert await paced_text(chat, sleeping(0.6)) == (text, True)
        finally:
            await chat.aclose()


# -- (5) a burst arriving while held --------------------------------------------------------------


@linux_only
@pytest.mark.parametrize("count", [900, 160_000], ids=["60KB", "2MB"])
async def test_a_burst_sent_while_held_waits_in_the_kernel_and_is_read_whole(count: int) -> None:
    # One event, then the rest of the body in one write while the reader holds its first pace
    # (0.5 s). 60 KB fit in the kernel's buffer: all of it is still there when the hold ends
    # (nothing was read meanwhile). Of 2 MB the kernel keeps what its buffer takes and the rest
    # waits in the server. Then every byte is read, in order, each later read held 1 ms.
    text = words(count, prefix="x")
    body = answer(text)
    first = event_ends(body)[0]
    burst = len(body) - first
    unread: list[int] = []
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body, cuts=[first], pauses={1: 0.05}))
        chat = provider(server)
        port = port_of(server)

        async def pace() -> None:
            if not unread:
                await anyio.sleep(0.5)
                unread.append(unread_bytes(port))
            else:
                await anyio.sleep(0.001)

        try:
            with anyio.fail_after(60):
                got, final = await paced_text(chat, pace)
        finally:
            await chat.aclose()
    assert final and got == text
    if burst < 100_000:
        assert unread[0] >= burst, (unread, burst)
    else:
        assert burst > 2_000_000 and unread[0] >= 64 * 1024, unread


# -- (6) gzip and proxied bodies, paced -----------------------------------------------------------


@pytest.mark.parametrize("route", ["gzip", "proxy", "gzip-proxy"])
async def test_bodies_of_the_httpx_path_paced_give_the_exact_text(
    route: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = words(3000, prefix="ü")
    body = text_answer(text)
    sent = gzip.compress(body) if "gzip" in route else body
    headers = {"Content-Encoding": "gzip"} if "gzip" in route else {}
    cuts: Sequence[int] = range(0, len(sent), max(1, len(sent) // 40))
    async with ProviderServer() as server, HttpProxy() as proxy:
        server.script(PATH, Reply(body=sent, headers=headers, cuts=cuts, delay_secs=0.01))
        if "proxy" in route:
            monkeypatch.setenv("HTTP_PROXY", proxy.url)
        chat = provider(server, stream_idle_timeout_secs=2)
        try:
            with anyio.fail_after(30):
                assert await paced_text(chat, sleeping(0.05, 0.6, 0.02)) == (text, True)
                assert await paced_text(chat, sleeping(0.05, 0.6, 0.02)) == (text, True)
        finally:
            await chat.aclose()
    assert bool(proxy.targets) == ("proxy" in route)
