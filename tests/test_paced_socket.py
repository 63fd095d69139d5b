"""Trying to break the socket hold of paced reads (architecture §5 "Read pacing";
``BodyStream.held`` in ``providers/body_stream.py``): while a paced read waits, the transport of
the response's connection is paused, so what the server sends meanwhile is not read.

Over real loopback connections (:class:`ProviderServer`, :class:`HttpProxy`, TLS with a CA of
the test's own) and a real :class:`OpenAIChatProvider`, with paces that hold the socket far
longer than a chat's spacing would: (1) a reader cancelled while held, (2) the connection reused
after a hold, (3) a body that ends or breaks while held, (4) the byte-idle bound around holds,
(5) a burst of megabytes arriving while held, (6) the bodies that take httpx's path (gzip, a
proxy); each over the routes of :mod:`tests.held_socket` it concerns, and the first ones on
uvloop too, the loop ``relaybot run`` uses when installed. Every test runs under
``anyio.fail_after``: a hold never released fails it instead of hanging the run.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    StreamTruncated,
)
from tests.held_socket import (
    PATH,
    ROUTES,
    answer,
    event_ends,
    paced_text,
    plain_text,
    port_of,
    provider,
    reply,
    routed,
    sleeping,
    unfinished,
    unread_bytes,
    words,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")


def on_uvloop(scenario: Coroutine[Any, Any, None]) -> None:
    uvloop = pytest.importorskip("uvloop")
    uvloop.run(scenario)


BIG = words(6000)
"""About 400 KB of Chat Completions events: many reads (16 KiB each)."""

WHOLE = words(750)
"""About 50 KB of events: more than one read takes (16 KiB), less than aiohttp buffers before
its own flow control stops reading (128 KiB): sent in one write, all of it is in aiohttp's
buffer when the first read returns, and aiohttp has given the connection back to the pool."""


# -- (1) a reader cancelled while the socket is held ----------------------------------------------


async def cancelled_while_held(route: str, arrived: str, mp: pytest.MonkeyPatch, tmp: Path) -> None:
    # "partly": the rest of the body comes while the socket is held. "whole": all of it
    # (Content-Length) came before the hold began. Either way the reader is cancelled inside
    # its pace, and the next request of the same provider, on whatever connection the pool
    # hands it, is answered.
    first = (
        reply(route, answer(BIG), [20_000], pauses={0: 0.1, 1: 0.05})
        if arrived == "partly"
        else reply(route, answer(WHOLE), framing="length", pauses={0: 0.1})
    )
    async with routed(route, mp, tmp) as server:
        server.script(PATH, [first, reply(route, answer("second answer"))])
        chat = provider(server)
        held = anyio.Event()

        async def pace() -> None:
            held.set()
            await anyio.sleep(30)

        async def cancel_when_held(scope: anyio.CancelScope) -> None:
            await held.wait()
            await anyio.sleep(0.2)
            scope.cancel()

        try:
            with anyio.fail_after(10):
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(cancel_when_held, scope)
                        await paced_text(chat, pace)
                assert scope.cancelled_caught and held.is_set()
                assert await plain_text(chat) == "second answer"
        finally:
            await chat.aclose()


@pytest.mark.parametrize(
    ("route", "arrived"),
    [
        ("plain", "partly"),
        ("tls", "partly"),
        ("gzip", "partly"),
        ("plain", "whole"),
        ("tls", "whole"),
    ],
)
async def test_a_reader_cancelled_while_held_leaves_a_provider_that_answers(
    route: str, arrived: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    await cancelled_while_held(route, arrived, monkeypatch, tmp_path)


# -- (2) the connection reused after a hold -------------------------------------------------------


async def given_back_while_held(route: str, mp: pytest.MonkeyPatch, tmp: Path) -> None:
    # The whole first body arrived before the reader caught up: aiohttp gave the connection back
    # to the pool while the reader still holds its 2 s pace. Another request of the same
    # provider, made during that hold, takes that connection: it is answered at once, not when
    # the first stream's pace ends.
    async with routed(route, mp, tmp) as server:
        first = reply(route, answer(WHOLE), framing="length", pauses={0: 0.1})
        server.script(PATH, [first, reply(route, answer("b"))])
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


@pytest.mark.parametrize("route", ["plain", "tls"])
async def test_a_connection_given_back_during_a_hold_serves_another_request_at_once(
    route: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    await given_back_while_held(route, monkeypatch, tmp_path)


@pytest.mark.parametrize("route", ROUTES)
async def test_after_a_held_stream_the_pooled_connection_reads_normally(
    route: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A paced stream ends properly and its connection goes back to the pool; the next streams
    # reuse it and read everything, paced or not, well within the 2 s byte-idle bound.
    text = words(200)
    body = answer(text)
    async with routed(route, monkeypatch, tmp_path) as server:
        server.script(PATH, reply(route, body, event_ends(body)[::20], delay_secs=0.01))
        chat = provider(server, stream_idle_timeout_secs=2)
        try:
            with anyio.fail_after(20):
                for _ in range(3):
                    assert await paced_text(chat, sleeping(0.05)) == (text, True)
                    assert await plain_text(chat) == text
        finally:
            await chat.aclose()
    assert len(server.requests) == 6


# -- (3) the body ends or breaks while the socket is held -----------------------------------------

TEXT = words(40)
_DONE, _CUT = answer(TEXT), unfinished(TEXT)
_HALF = _CUT[: len(_CUT) // 2 + 7]  # mid-event
ENDS = {
    "chunked-end": (_DONE, {}, None),
    "length-end": (_DONE, {"framing": "length"}, None),
    "close-end": (_DONE, {"framing": "close"}, None),
    "chunked-end-no-done": (_CUT, {}, StreamTruncated),
    "close-end-no-done": (_CUT, {"framing": "close"}, StreamTruncated),
    "chunked-cut": (_HALF, {"abort": True}, ProviderConnectionError),
    "length-cut": (_HALF, {"framing": "length", "abort": True}, ProviderConnectionError),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("end", ENDS)
async def test_a_body_that_ends_or_breaks_while_held_ends_or_fails_typed(
    end: str, route: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The first event comes at once; the rest of the body and its end (or the broken connection)
    # come while the reader holds its first pace of 0.3 s. A clean end with [DONE] is the whole
    # answer, without it StreamTruncated, a broken connection ProviderConnectionError.
    body, framing, error = ENDS[end]
    async with routed(route, monkeypatch, tmp_path) as server:
        cuts = event_ends(body)[:1]
        server.script(PATH, reply(route, body, cuts, pauses={1: 0.1}, **framing))
        chat = provider(server)
        try:
            with anyio.fail_after(10):
                try:
                    text, final = await paced_text(chat, sleeping(0.3))
                except ProviderError as exc:
                    assert error is not None and isinstance(exc, error), repr(exc)
                else:
                    assert error is None, "no error"
                    assert (text, final) == (TEXT, True)
                server.script(PATH, reply(route, answer("again")))
                assert await plain_text(chat) == "again"  # the provider still answers
        finally:
            await chat.aclose()


# -- (4) the byte-idle bound around holds ---------------------------------------------------------


async def silent_while_paced(route: str, mp: pytest.MonkeyPatch, tmp: Path) -> None:
    # Two events, then nothing on an open socket. The reader holds 0.3 s before its next read;
    # that read then waits, and the byte-idle bound (0.5 s of reading) ends it, typed, about
    # 0.5 s after the hold (after the start for a body not paced, the proxied one).
    body = answer("a b c")
    cuts = event_ends(body)
    async with routed(route, mp, tmp) as server:
        server.script(PATH, reply(route, body[: cuts[1]], cuts[:1], hold_open=True))
        chat = provider(server, stream_idle_timeout_secs=0.5)
        ended: list[float] = []

        async def pace() -> None:
            await anyio.sleep(0.3)
            ended.append(anyio.current_time())

        try:
            with anyio.fail_after(10), pytest.raises(ProviderTimeout) as caught:
                ended.append(anyio.current_time())  # a body not paced waits from its start
                await paced_text(chat, pace)
            waited = anyio.current_time() - ended[-1]
        finally:
            await chat.aclose()
    assert caught.value.phase == "idle"
    assert 0.45 <= waited <= 1.5, waited


@pytest.mark.parametrize("route", ROUTES)
async def test_a_silent_server_while_paced_ends_at_the_idle_bound(
    route: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    await silent_while_paced(route, monkeypatch, tmp_path)


@pytest.mark.parametrize("route", ROUTES)
async def test_holding_longer_than_the_idle_bound_is_not_a_silence(
    route: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The server sends an event every 50 ms; the reader holds 0.6 s before each read, twice
    # the 0.3 s byte-idle bound. The bound counts only time spent reading: no timeout.
    text = words(40)
    body = answer(text)
    async with routed(route, monkeypatch, tmp_path) as server:
        server.script(PATH, reply(route, body, event_ends(body), delay_secs=0.05))
        chat = provider(server, stream_idle_timeout_secs=0.3)
        try:
            with anyio.fail_after(20):
                assert await paced_text(chat, sleeping(0.6)) == (text, True)
        finally:
            await chat.aclose()


# -- (5) a burst arriving while held --------------------------------------------------------------


async def burst_while_held(route: str, count: int, mp: pytest.MonkeyPatch, tmp: Path) -> None:
    # One event, then the rest of the body in one write while the reader holds its first pace
    # (0.5 s); each later read is held 1 ms. Every byte is read, in order. Plain HTTP: 60 KB
    # fit in the kernel's buffer and are all still there when the hold ends (nothing was read
    # meanwhile); of 2 MB the kernel keeps what its buffer takes, the rest waits in the server.
    text = words(count, prefix="x")
    body = answer(text)
    first = event_ends(body)[0]
    burst = len(body) - first
    unread: list[int] = []
    async with routed(route, mp, tmp) as server:
        server.script(PATH, reply(route, body, [first], pauses={1: 0.05}))
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
    if route != "plain":
        return  # TLS decrypts ahead into its own buffer; gzip bytes are fewer
    if burst < 100_000:
        assert unread[0] >= burst, (unread, burst)
    else:
        assert burst > 2_000_000 and unread[0] >= 64 * 1024, unread


@linux_only
@pytest.mark.parametrize(
    ("route", "count"),
    [("plain", 900), ("plain", 160_000), ("tls", 160_000), ("gzip", 160_000)],
    ids=["plain-60KB", "plain-2MB", "tls-2MB", "gzip-2MB"],
)
async def test_a_burst_sent_while_held_is_read_whole_and_in_order(
    route: str, count: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    await burst_while_held(route, count, monkeypatch, tmp_path)


# -- (6) the bodies of httpx's path, paced --------------------------------------------------------


@pytest.mark.parametrize("route", ["gzip", "proxy", "gzip-proxy"])
async def test_bodies_of_the_httpx_path_paced_give_the_exact_text(
    route: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Non-ASCII text cut every ~1/40 of the body (inside characters too), each piece 10 ms
    # apart, read under holds of 50 ms, 600 ms, then 20 ms: twice, on one connection.
    text = words(3000, prefix="ü")
    body = answer(text)
    cuts = range(0, len(body), len(body) // 40)
    async with routed(route, monkeypatch, tmp_path) as server:
        server.script(PATH, reply(route, body, cuts, delay_secs=0.01))
        chat = provider(server, stream_idle_timeout_secs=2)
        try:
            with anyio.fail_after(30):
                for _ in range(2):
                    assert await paced_text(chat, sleeping(0.05, 0.6, 0.02)) == (text, True)
        finally:
            await chat.aclose()


@pytest.mark.parametrize("route", [*ROUTES, "gzip-proxy"])
async def test_a_paced_read_takes_every_chunk_that_arrived(
    route: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # 100 events, each its own HTTP chunk, all sent while the first pace (100 ms, as every
    # pace) waits: the next read takes them all, so the stream ends in about one pace, not one
    # pace per chunk (10 s). A body whose reads bring one chunk each is not paced at all.
    text = words(100)
    body = answer(text)
    paces: list[float] = []

    async def pace() -> None:
        paces.append(anyio.current_time())
        await anyio.sleep(0.1)

    async with routed(route, monkeypatch, tmp_path) as server:
        server.script(PATH, reply(route, body, event_ends(body), pauses={1: 0.05}))
        chat = provider(server)
        try:
            with anyio.fail_after(30):
                start = anyio.current_time()
                assert await paced_text(chat, pace) == (text, True)
                took = anyio.current_time() - start
        finally:
            await chat.aclose()
    assert len(paces) <= 3 and took < 1.0, (len(paces), took)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_any_cuts_and_holds_give_the_exact_text(data: st.DataObject) -> None:
    # Whatever the server's cuts (between and inside events and characters) and pauses, and
    # whatever the reader's holds, over each holding route: the exact text, then Final.
    route = data.draw(st.sampled_from(["plain", "tls", "gzip"]))
    text = words(data.draw(st.integers(1, 400)), prefix="é")
    body = answer(text)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    waits = st.sampled_from([0.0, 0.002, 0.02])
    pauses = {i: data.draw(waits) for i in range(len(cuts) + 1)}
    holds = data.draw(st.lists(st.sampled_from([0.0, 0.001, 0.03, 0.12]), min_size=1))

    async def scenario() -> None:
        with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
            async with routed(route, mp, Path(tmp)) as server:
                server.script(PATH, reply(route, body, cuts, pauses=pauses))
                chat = provider(server, stream_idle_timeout_secs=5)
                try:
                    with anyio.fail_after(20):
                        assert await paced_text(chat, sleeping(*holds)) == (text, True)
                finally:
                    await chat.aclose()

    asyncio.run(scenario())


# -- the same on uvloop ---------------------------------------------------------------------------


@pytest.mark.parametrize("arrived", ["partly", "whole"])
def test_on_uvloop_a_reader_cancelled_while_held_leaves_a_provider_that_answers(
    arrived: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on_uvloop(cancelled_while_held("plain", arrived, monkeypatch, tmp_path))


def test_on_uvloop_a_connection_given_back_during_a_hold_serves_another_request_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on_uvloop(given_back_while_held("plain", monkeypatch, tmp_path))


def test_on_uvloop_a_silent_server_while_paced_ends_at_the_idle_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on_uvloop(silent_while_paced("plain", monkeypatch, tmp_path))


@linux_only
def test_on_uvloop_a_burst_sent_while_held_is_read_whole_and_in_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on_uvloop(burst_while_held("plain", 900, monkeypatch, tmp_path))
