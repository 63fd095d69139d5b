"""A stream posted straight through the client's aiohttp session (providers/transport.py,
``ProviderClient.direct``) against the same stream through httpx's client, over real sockets on
127.0.0.1: the server receives the same request, a content-coded answer and an error answer
read the same, cookies are kept across streams, the session is closed with the client, and a
proxy in the environment sends every stream through httpx's client."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import pytest

from providers.errors import ProviderError, ProviderRateLimited, ProviderServerError
from providers.transport import ProviderClient, make_client, open_stream
from tests.peers.http_proxy import HttpProxy
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import text_answer
from tests.test_transport_client import read_request, serving

PATH = "/v1/chat/completions"
BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": 'é 😀 \u2028 "quoted" </script>'}],
    "stream": True,
    "temperature": 0.5,
}
HEADERS = {"accept": "text/event-stream", "Authorization": "Bearer sk-k", "X-Extra": "1"}


def _client(*, direct: bool) -> ProviderClient:
    client = make_client()
    assert client.direct  # no proxy in the test's environment (conftest clears it)
    client.direct = direct
    return client


async def _read(
    client: ProviderClient, url: str, headers: dict[str, str] = HEADERS, path: str = PATH
) -> bytes:
    async with open_stream(
        client, url + path, json_body=BODY, headers=headers, timeout_secs=5, idle_timeout_secs=5
    ) as stream:
        return b"".join([chunk async for chunk in stream]) + b"|json" * stream.whole_json


async def _outcome(client: ProviderClient, url: str) -> bytes | ProviderError:
    try:
        return await _read(client, url)
    except ProviderError as exc:
        return exc


async def test_the_server_receives_what_httpx_would_have_sent() -> None:
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=text_answer("a b c")))
        for direct in (True, False):
            async with _client(direct=direct) as client:
                assert await _read(client, server.url) == text_answer("a b c")
    direct_request, httpx_request = server.requests
    assert direct_request.body == httpx_request.body
    assert json.loads(direct_request.body) == BODY
    assert "é 😀" in direct_request.body.decode()  # not \\u-escaped, as httpx encodes
    assert direct_request.headers == httpx_request.headers
    assert direct_request.headers["user-agent"].startswith("python-httpx/")
    assert direct_request.headers["content-type"] == "application/json"
    assert direct_request.headers["authorization"] == "Bearer sk-k"
    assert direct_request.headers["x-extra"] == "1"
    assert (direct_request.method, direct_request.path) == (httpx_request.method, PATH)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(
            body=gzip.compress(text_answer("coded answer")),
            headers={"Content-Encoding": "gzip"},
            cuts=range(0, 200, 7),
        ),
        Reply(
            status=429,
            body=gzip.compress(b'{"error": {"message": "slow down", "code": "rate_limit"}}'),
            headers={"Content-Encoding": "gzip", "Retry-After": "3"},
        ),
        Reply(status=503, body=b'{"error": {"message": "overloaded", "type": "server_error"}}'),
        Reply(status=500, body=b"not json at all"),
    ],
    ids=["gzip-stream", "gzip-429", "503", "500-text"],
)
async def test_a_coded_or_refused_answer_reads_the_same_either_way(reply: Reply) -> None:
    outcomes = []
    async with ProviderServer() as server:
        server.script(PATH, reply)
        for direct in (True, False):
            async with _client(direct=direct) as client:
                outcomes.append(await _outcome(client, server.url))
    direct_outcome, httpx_outcome = outcomes
    if isinstance(httpx_outcome, bytes):
        assert direct_outcome == httpx_outcome == text_answer("coded answer")
        return
    assert type(direct_outcome) is type(httpx_outcome)
    assert str(direct_outcome) == str(httpx_outcome)
    if isinstance(httpx_outcome, ProviderRateLimited):
        assert isinstance(direct_outcome, ProviderRateLimited)
        assert direct_outcome.retry_after == httpx_outcome.retry_after == 3
        assert "slow down" in str(direct_outcome)
    if reply.status == 503:
        assert isinstance(direct_outcome, ProviderServerError)


async def test_a_cookie_the_server_sets_comes_back_on_the_next_stream_either_way() -> None:
    # One that could not be sent back ("café" as a raw Latin-1 byte) is not kept: httpx's jar
    # kept it and then failed to encode every later request of the client (UnicodeEncodeError).
    for direct in (True, False):
        async with ProviderServer() as server:
            server.script(
                PATH,
                [
                    Reply(body=text_answer("one"), headers={"Set-Cookie": "sid=café; Path=/"}),
                    Reply(body=text_answer("two"), headers={"Set-Cookie": "lb=7; Path=/"}),
                    Reply(body=text_answer("three")),
                ],
            )
            async with _client(direct=direct) as client:
                for _ in range(3):
                    await _read(client, server.url)
            first, second, third = server.requests
        assert "cookie" not in first.headers and "cookie" not in second.headers, direct
        assert third.headers.get("cookie") == "lb=7", f"direct={direct}"


async def test_the_client_closes_the_session_of_its_direct_streams() -> None:
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=text_answer("x")))
        async with make_client() as client:
            await _read(client, server.url)
            session = client.session.get()
        assert session.closed
        client = make_client()
        await _read(client, server.url)
        session = client.session.get()
        await client.aclose()
        assert session.closed


async def test_with_a_proxy_in_the_environment_streams_go_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_PROXY", "example.com")
    assert make_client().direct  # NO_PROXY alone names no proxy
    async with HttpProxy() as proxy, ProviderServer() as server:
        server.script(PATH, Reply(body=text_answer("via proxy")))
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY")
        async with make_client() as client:
            assert not client.direct
            assert await _read(client, server.url) == text_answer("via proxy")
        assert proxy.targets == [f"{server.url}{PATH}"]


def _raw_reply(head: str, body: bytes) -> bytes:
    return (head.replace("\n", "\r\n") + f"content-length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (  # a coding named over two fields: httpx joins them ("identity, gzip") and decodes
            _raw_reply(
                "HTTP/1.1 200 OK\ncontent-type: text/event-stream\ncontent-encoding: identity\n"
                "content-encoding: gzip\n",
                gzip.compress(b"data: hello\n\n"),
            ),
            b"data: hello\n\n",
        ),
        (  # two media types joined are no JSON body
            _raw_reply(
                "HTTP/1.1 200 OK\ncontent-type: application/json\n"
                "content-type: text/event-stream\n",
                b"data: x\n\n",
            ),
            b"data: x\n\n",
        ),
        (  # "7, 9" is no Retry-After value
            _raw_reply("HTTP/1.1 429 Too Many\nretry-after: 7\nretry-after: 9\n", b"{}"),
            None,
        ),
    ],
    ids=["coding", "media-type", "retry-after"],
)
async def test_a_field_sent_twice_reads_as_httpx_joins_it(
    reply: bytes, expected: bytes | None
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await read_request(reader):
            writer.write(reply)
            await writer.drain()

    outcomes = []
    async with serving(answer) as port:
        for direct in (True, False):
            async with _client(direct=direct) as client:
                outcomes.append(await _outcome(client, f"http://127.0.0.1:{port}"))
    direct_outcome, httpx_outcome = outcomes
    if expected is not None:
        assert direct_outcome == httpx_outcome == expected
    else:
        assert isinstance(direct_outcome, ProviderRateLimited)
        assert isinstance(httpx_outcome, ProviderRateLimited)
        assert direct_outcome.retry_after == httpx_outcome.retry_after
        assert str(direct_outcome) == str(httpx_outcome)


async def test_the_requests_own_fields_win_and_a_relative_url_joins_the_base_url() -> None:
    own = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "bot/1", "X-A": "1"}
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=text_answer("a")))
        for direct in (True, False):
            async with _client(direct=direct) as client:
                await _read(client, server.url, own)
        async with make_client(base_url=server.url + "/v1") as client:
            assert client.direct
            await _read(client, "", own, path="/chat/completions")
    direct_request, httpx_request, relative = server.requests
    assert direct_request.headers == httpx_request.headers == relative.headers
    assert direct_request.headers["content-type"] == "application/json; charset=utf-8"
    assert direct_request.headers["user-agent"] == "bot/1"
    assert relative.path == PATH


async def test_a_closed_client_sends_nothing_either_way() -> None:
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=text_answer("a")))
        for direct in (True, False):
            client = _client(direct=direct)
            await client.aclose()
            with pytest.raises(RuntimeError, match="client has been closed"):
                await _read(client, server.url)
        assert server.requests == []
