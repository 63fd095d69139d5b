"""The scripted provider peer itself: framing, cuts, pauses, hold-open, abort, recording."""

from __future__ import annotations

import time

import anyio
import httpx
import pytest

from tests.peers.provider_server import ProviderServer, Reply

BODY = b"data: one\n\ndata: two\n\n"


async def _read_pieces(response: httpx.Response) -> list[bytes]:
    return [chunk async for chunk in response.aiter_raw()]


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
async def test_body_is_served_whole_in_every_framing(framing: str) -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script("/x", Reply(body=BODY, cuts=[3, 9], framing=framing))  # type: ignore[arg-type]
        response = await client.post(server.url + "/x?a=1", json={"k": [1]})
        assert response.status_code == 200
        assert response.content == BODY
        assert response.headers["content-type"] == "text/event-stream"
        (recorded,) = server.requests
        assert (recorded.method, recorded.path, recorded.query) == ("POST", "/x", "a=1")
        assert recorded.json == {"k": [1]}
        assert recorded.ended_at is not None and not recorded.client_closed


async def test_pieces_arrive_separately_when_delayed() -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script("/x", Reply(body=BODY, cuts=[4, 12], delay_secs=0.05))
        async with client.stream("POST", server.url + "/x") as response:
            assert await _read_pieces(response) == [BODY[:4], BODY[4:12], BODY[12:]]


async def test_queue_is_served_in_order_then_last_repeats() -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script(
            "/x",
            [
                Reply.json({"error": "slow down"}, status=429, headers={"Retry-After": "7"}),
                Reply(body=b"ok"),
            ],
        )
        first = await client.post(server.url + "/x")
        assert (first.status_code, first.headers["retry-after"]) == (429, "7")
        assert first.json() == {"error": "slow down"}
        assert [(await client.post(server.url + "/x")).content for _ in range(2)] == [b"ok"] * 2
        assert (await client.post(server.url + "/other")).status_code == 404


async def test_exhausted_queue_without_repeat_answers_500() -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script("/x", Reply(body=b"ok"), repeat_last=False)
        assert (await client.post(server.url + "/x")).status_code == 200
        assert (await client.post(server.url + "/x")).status_code == 500


async def test_pause_before_a_piece() -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script("/x", Reply(body=BODY, cuts=[4], pauses={1: 0.2}))
        async with client.stream("POST", server.url + "/x") as response:
            stream = response.aiter_raw()
            assert await anext(stream) == BODY[:4]
            first_at = time.monotonic()
            assert await anext(stream) == BODY[4:]
            # a lower bound only: the piece cannot arrive before the server's pause ended
            assert time.monotonic() - first_at >= 0.15


async def test_hold_open_keeps_the_body_unfinished_until_the_client_leaves() -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script("/x", Reply(body=BODY, hold_open=True))
        async with client.stream("POST", server.url + "/x") as response:
            stream = response.aiter_raw()
            assert await anext(stream) == BODY
            with anyio.move_on_after(0.1) as scope:
                await anext(stream)
            assert scope.cancelled_caught
        with anyio.fail_after(5):
            await server.requests[0].wait_ended()
        assert server.requests[0].client_closed


async def test_stall_sends_headers_only() -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script("/x", Reply.stall(headers={"X-Test": "1"}))
        async with client.stream("POST", server.url + "/x") as response:
            assert response.headers["x-test"] == "1"
            with anyio.move_on_after(0.1) as scope:
                await response.aread()
            assert scope.cancelled_caught


@pytest.mark.parametrize("framing", ["chunked", "length"])
async def test_abort_breaks_the_body(framing: str) -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script("/x", Reply(body=BODY, abort=True, framing=framing))  # type: ignore[arg-type]
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(server.url + "/x")


async def test_header_delay() -> None:
    async with ProviderServer() as server, httpx.AsyncClient() as client:
        server.script("/x", Reply(body=b"ok", header_delay_secs=0.3))
        with anyio.move_on_after(0.05) as scope:
            await client.post(server.url + "/x")
        assert scope.cancelled_caught
        # the server noticed the client leaving and ended that request
        with anyio.fail_after(5):
            await server.requests[0].wait_ended()
        assert server.requests[0].client_closed
        start = time.monotonic()
        assert (await client.post(server.url + "/x")).content == b"ok"
        assert server.requests[1].ended_at is not None
        assert server.requests[1].ended_at >= start


def test_invalid_combinations_are_rejected() -> None:
    with pytest.raises(ValueError):
        Reply(hold_open=True, abort=True)
    with pytest.raises(ValueError):
        Reply(hold_open=True, framing="length")
