"""The providers' client (providers/provider_client.py: httpx over aiohttp; its streams,
providers/transport.py) over real sockets on 127.0.0.1: TLS, bodies larger than a socket's
buffer read slowly, connection reuse and refusal, a server that closes an idle kept-alive
connection, chunked framing split every way, and a body cut short."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
import trustme

from providers.errors import ProviderConnectionError, ProviderTimeout
from providers.transport import make_client, open_stream

READ_BUFFER_BYTES = 256 * 1024

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    async def quiet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A handler still waiting when the test ends is cancelled: end it without noise.
        try:
            await handler(reader, writer)
        except (asyncio.CancelledError, asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(quiet, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> bool:
    """Read one request (head and Content-Length body); False at EOF."""
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    if not head:
        return False
    length = 0
    for line in head.decode().split("\r\n"):
        if line.lower().startswith("content-length:"):
            length = int(line.split(":")[1])
    await reader.readexactly(length)
    return True


class KeptAlive:
    """A server handler answering every request of a connection with ``respond(writer)``;
    ``connections`` counts the connections it was given."""

    def __init__(self, respond: Callable[[asyncio.StreamWriter], Awaitable[None]]) -> None:
        self.connections = 0
        self._respond = respond

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        while await read_request(reader):
            await self._respond(writer)


def reply(body: bytes, *, close: bool = False) -> bytes:
    connection = b"close" if close else b"keep-alive"
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"content-length: %d\r\nconnection: %s\r\n\r\n%s" % (len(body), connection, body)
    )


async def read_body(client_url: str, **client: object) -> bytes:
    async with make_client(**client) as http:  # type: ignore[arg-type]
        opening = open_stream(
            http, client_url, json_body={}, headers={}, timeout_secs=10, idle_timeout_secs=10
        )
        async with opening as body:
            return b"".join([chunk async for chunk in body])


async def test_a_stream_over_tls_arrives_whole() -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    body = b"".join(b"data: %d\n\n" % i for i in range(2000))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply(body))
        await writer.drain()
        writer.close()

    async with serving(handler, server_ctx) as port:
        got = await read_body(f"https://localhost:{port}/v1/x", ssl_context=client_ctx)
    assert got == body


async def test_a_tls_server_with_an_untrusted_certificate_is_a_connection_error() -> None:
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    trustme.CA().issue_cert("localhost").configure_cert(server_ctx)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with serving(handler, server_ctx) as port:
        with pytest.raises(ProviderConnectionError):
            await read_body(f"https://localhost:{port}/v1/x")


async def test_a_body_larger_than_the_read_buffer_read_slowly_arrives_intact() -> None:
    body = bytes(range(256)) * (3 * READ_BUFFER_BYTES // 256)
    seen = bytearray()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply(body))
        await writer.drain()
        writer.close()

    async with serving(handler) as port, make_client() as http:
        opening = open_stream(
            http, f"http://127.0.0.1:{port}/x", json_body={}, headers={},
            timeout_secs=10, idle_timeout_secs=10,
        )  # fmt: skip
        async with opening as stream:
            async for chunk in stream:
                seen += chunk
                await asyncio.sleep(0.001)  # the socket fills while the consumer works
    assert bytes(seen) == body


async def test_pieces_that_arrived_while_the_consumer_worked_come_in_one_read() -> None:
    # 60 pieces written 2 ms apart while the consumer is busy with the first: the next read
    # returns all that arrived meanwhile, not one piece per read (a read per piece is a wakeup
    # of the whole stack per piece).
    pieces = [b"data: %03d\n\n" % i for i in range(60)]
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"content-length: %d\r\n\r\n" % sum(map(len, pieces))
    )

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head)
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.002)
        writer.close()

    chunks: list[bytes] = []
    async with serving(handler) as port, make_client() as http:
        opening = open_stream(
            http, f"http://127.0.0.1:{port}/x", json_body={}, headers={},
            timeout_secs=10, idle_timeout_secs=10,
        )  # fmt: skip
        async with opening as stream:
            async for chunk in stream:
                chunks.append(chunk)
                if len(chunks) == 1:
                    await asyncio.sleep(0.5)  # every other piece arrives meanwhile
    assert b"".join(chunks) == b"".join(pieces)
    assert len(chunks) <= 3, [len(c) for c in chunks]


async def test_kept_alive_connections_are_reused_and_a_closed_one_is_not() -> None:
    # Each connection serves three requests, then the server closes it (after a reply that
    # said keep-alive): the fourth request must see the idle connection closed and open anew.
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        for _ in range(3):
            if not await read_request(reader):
                break
            writer.write(reply(b"data: x\n\n"))
            await writer.drain()
        writer.close()

    async with serving(handler) as port, make_client() as http:
        url = f"http://127.0.0.1:{port}/x"
        seen = []
        for _ in range(4):
            async with open_stream(
                http, url, json_body={}, headers={}, timeout_secs=5, idle_timeout_secs=5
            ) as body:
                assert b"".join([c async for c in body]) == b"data: x\n\n"
            seen.append(connections)
            await asyncio.sleep(0.05)  # the close reaches the client
    assert seen == [1, 1, 1, 2]


async def test_a_refused_connection_is_a_connection_error() -> None:
    async with serving(lambda r, w: asyncio.sleep(0)) as port:
        pass  # closed: nothing listens on the port now
    with pytest.raises(ProviderConnectionError):
        await read_body(f"http://127.0.0.1:{port}/x")


async def test_a_body_cut_short_is_a_connection_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        whole = reply(b"data: 1\n\ndata: 2\n\n")
        writer.write(whole[:-5])
        await writer.drain()
        writer.close()

    async with serving(handler) as port:
        with pytest.raises(ProviderConnectionError):
            await read_body(f"http://127.0.0.1:{port}/x")


def chunked_head() -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
    )


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def test_chunks_that_arrived_while_the_consumer_worked_come_as_one_piece() -> None:
    # One SSE event per HTTP chunk, as models stream: 60 chunks arriving while the consumer is
    # busy are handed on joined, not one piece per chunk (each piece is a resumption of every
    # iterator above it).
    events = [b"data: %03d\n\n" % i for i in range(60)]

    async def respond(writer: asyncio.StreamWriter) -> None:
        writer.write(chunked_head())
        for event in events:
            writer.write(chunk(event))
            await writer.drain()
            await asyncio.sleep(0.002)
        writer.write(b"0\r\n\r\n")

    handler = KeptAlive(respond)

    async with serving(handler) as port, make_client() as http:
        url = f"http://127.0.0.1:{port}/x"
        for _ in range(2):  # the connection goes back to the pool and serves the next body
            pieces: list[bytes] = []
            async with open_stream(
                http, url, json_body={}, headers={}, timeout_secs=10, idle_timeout_secs=10
            ) as body:
                async for piece in body:
                    pieces.append(piece)
                    if len(pieces) == 1:
                        await asyncio.sleep(0.5)  # every other chunk arrives meanwhile
            assert b"".join(pieces) == b"".join(events)
            sizes = [p.count(b"data: ") for p in pieces]  # chunks per piece
            assert len(pieces) <= 60 // 16 + 3, sizes
    assert handler.connections == 1  # both bodies read on one connection


async def test_a_burst_of_streams_leaves_its_connections_idle_for_the_next_burst() -> None:
    # 60 streams at once, then all idle: the pool keeps them for their keep-alive, and the
    # next burst reuses all 60.
    release = asyncio.Event()
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while await read_request(reader):
            writer.write(chunked_head() + chunk(b"data: 1\n\n"))
            await release.wait()
            writer.write(b"0\r\n\r\n")

    async def one(http: httpx.AsyncClient, url: str) -> bytes:
        async with open_stream(
            http, url, json_body={}, headers={}, timeout_secs=10, idle_timeout_secs=10
        ) as body:
            return b"".join([piece async for piece in body])

    async with serving(handler) as port, make_client() as http:
        url = f"http://127.0.0.1:{port}/x"
        for _ in range(2):
            release.clear()
            tasks = [asyncio.ensure_future(one(http, url)) for _ in range(60)]
            await asyncio.sleep(0.3)
            release.set()
            assert await asyncio.gather(*tasks) == [b"data: 1\n\n"] * 60
    assert connections == 60


@pytest.mark.parametrize("paused", [False, True], ids=["one read", "tail read later"])
@pytest.mark.parametrize(
    "tail",
    [b"zz\r\nnot a chunk size\r\n", b"5\r\nab", b"", b"2\r\nabX\r\n"],
    ids=["bad chunk framing", "cut inside a chunk", "closed before the last chunk", "bad footer"],
)
async def test_a_broken_chunked_body_is_an_error_never_a_hang(tail: bytes, paused: bool) -> None:
    # The break in the first read or in a later one. aiohttp's parser, meeting broken framing
    # in a later read, leaves the body waiting with its own read bound dropped (aiohttp 3.14):
    # the idle watchdog ends it at the bound (providers/transport.py).
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(chunked_head() + chunk(b"data: 1\n\n"))
        if paused:
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.write(tail)
        await writer.drain()
        writer.close()

    async with serving(handler) as port, make_client() as http:
        got: list[bytes] = []
        with pytest.raises((ProviderConnectionError, ProviderTimeout)):
            async with open_stream(
                http, f"http://127.0.0.1:{port}/x", json_body={}, headers={},
                timeout_secs=5, idle_timeout_secs=0.5,
            ) as body:  # fmt: skip
                async for piece in body:
                    got.append(piece)
        # what is handed on before the error is data that was sent, never a framing byte
        # (aiohttp drops the data of the read that brought the break with it)
        assert (b"data: 1\n\n" + tail[3:5] * (tail[:1] in b"25")).startswith(b"".join(got))


async def test_a_body_written_a_byte_at_a_time_with_extensions_and_trailers_is_whole() -> None:
    # Every split of the chunked coding over a real socket, chunk extensions and a trailer
    # section: the data is whole, h11 ends the message, and the connection serves the next.
    events = [b"data: %d\n\n" % i for i in range(5)]
    wire = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(e), e) for e in events)
    wire += b"0;last\r\nx-checksum: 1\r\n\r\n"

    async def respond(writer: asyncio.StreamWriter) -> None:
        writer.write(chunked_head() + chunk(events[0]))
        await writer.drain()
        for i in range(len(wire)):
            writer.write(wire[i : i + 1])
            await writer.drain()
            await asyncio.sleep(0)

    handler = KeptAlive(respond)

    async with serving(handler) as port, make_client() as http:
        for _ in range(2):
            assert await read_body_from(http, f"http://127.0.0.1:{port}/x") == b"".join(
                [events[0], *events]
            )
    assert handler.connections == 1


async def read_body_from(http: httpx.AsyncClient, url: str) -> bytes:
    async with open_stream(
        http, url, json_body={}, headers={}, timeout_secs=10, idle_timeout_secs=10
    ) as body:
        return b"".join([piece async for piece in body])


@pytest.mark.parametrize("trailer", [b"", b"x-checksum: 1\r\n"], ids=["no trailer", "trailer"])
async def test_a_reader_that_stops_at_the_last_piece_leaves_the_connection_reusable(
    trailer: bytes,
) -> None:
    # A model's stream is read up to its terminal event ([DONE]) and no further. When that
    # event and the last chunk come in one read, h11 must have ended the message before the
    # piece is handed on, or the stopped body's connection is closed instead of reused.
    async def respond(writer: asyncio.StreamWriter) -> None:
        writer.write(chunked_head() + chunk(b"data: 1\n\n"))
        await writer.drain()
        await asyncio.sleep(0.02)  # the chunks below are decoded after h11 handed over
        writer.write(chunk(b"data: 2\n\n") + chunk(b"data: [DONE]\n\n"))
        writer.write(b"0\r\n" + trailer + b"\r\n")
        await writer.drain()

    handler = KeptAlive(respond)

    async with serving(handler) as port, make_client() as http:
        for _ in range(3):
            async with open_stream(
                http, f"http://127.0.0.1:{port}/x", json_body={}, headers={},
                timeout_secs=10, idle_timeout_secs=10,
            ) as body:  # fmt: skip
                async for piece in body:
                    if b"[DONE]" in piece:
                        break
    assert handler.connections == 1


async def test_a_size_line_within_httpcores_bound_is_waited_for() -> None:
    # httpcore gives h11 a 100 KB bound on an incomplete event; a longer size line than
    # h11's own 16 KB default, arriving over two reads, is accepted as h11 would accept it.
    line = b"5;" + b"x" * 20_000

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(chunked_head() + chunk(b"first"))
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(line[:17_000])  # more than 16 KB of it not yet ended
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(line[17_000:] + b"\r\nhello\r\n0\r\n\r\n")
        await writer.drain()

    async with serving(handler) as port:
        assert await read_body(f"http://127.0.0.1:{port}/x") == b"firsthello"


@pytest.mark.parametrize("gap", [0.01, 1.0], ids=["last chunk soon after", "socket held open"])
async def test_after_the_final_event_the_body_is_read_on_briefly(gap: float) -> None:
    # Servers write the body's last chunk a moment after their final event ([DONE]): read on
    # for DRAIN_SECS, the message ends and the connection is reused. A server that holds the
    # socket open longer (C08 B) costs DRAIN_SECS, not the idle bound, and its connection is
    # closed.
    from config.models import ProviderConfig
    from providers.base import ChatMessage, ChatRequest
    from providers.events import Final
    from providers.http_stream import DRAIN_SECS
    from providers.registry import build_provider

    events = [b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n', b"data: [DONE]\n\n"]

    async def respond(writer: asyncio.StreamWriter) -> None:
        writer.write(chunked_head() + chunk(events[0]))
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(chunk(events[1]))
        await writer.drain()
        await asyncio.sleep(gap)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    handler = KeptAlive(respond)

    request = ChatRequest(messages=(ChatMessage("user", "hi"),))
    async with serving(handler) as port:
        config = ProviderConfig(
            kind="openai_chat", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", model="m",
            stream_idle_timeout_secs=30,
        )  # fmt: skip
        provider = build_provider("p", config)
        try:
            for _ in range(3):
                started = asyncio.get_running_loop().time()
                got = [event async for event in provider.stream(request)]
                took = asyncio.get_running_loop().time() - started
                assert isinstance(got[-1], Final)
                assert took < 10  # far below the 30 s idle bound: never waited for
        finally:
            await provider.aclose()
    assert handler.connections == (1 if gap < DRAIN_SECS else 3)
