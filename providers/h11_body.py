"""A streamed HTTP/1.1 body read straight from httpcore's connection: its h11 state and socket.

Theory of operation
-------------------
httpcore reads a body through three nested iterators per piece (its connection stream's
``__aiter__``, ``_receive_response_body``, ``_receive_event``), with an exception-mapping
context manager around every ``h11.Connection.next_event()`` call, and hands on one piece per
HTTP chunk. A model streams one event per chunk: that is all per event. :func:`h11_body` is
the same loop in one async generator, on the same objects: it takes every event h11 can parse
out of what one read returned and yields their data joined, once per read (at most
:data:`MAX_CHUNKS_PER_PIECE` chunks per piece), mapping
``h11.RemoteProtocolError`` to httpcore's as httpcore does.

Chunked bodies: once h11 stands between two chunks with nothing buffered (normally after the
chunks that came with the head), the data chunks are decoded by
:class:`providers.chunked.ChunkedDecoder` (RFC 9112 §7.1) instead of h11's state machine; the
bytes from the last chunk on are handed back to h11 (``receive_data``), which parses the last
chunk and the trailers and ends the message, so the connection is reused exactly as before. A
framing fault or an EOF inside the body is httpcore's ``RemoteProtocolError``, as from h11.

Closing is httpcore's: the body's stream is closed (``aclose()``, which returns a connection
that finished its cycle to the pool and closes any other) by the response's ``aclose()`` as
before, and at once when reading fails, as httpcore's own iterator does.

Private layouts are checked, not assumed: :func:`h11_body` returns ``None`` unless the stream is
httpcore 1.0's ``HTTP11ConnectionByteStream`` over an ``AsyncHTTP11Connection`` with the fields
read here; the caller then iterates the stream as it is. The chunk decoder takes over only
where h11's reader is its ``ChunkedReader`` with the fields read here at their between-chunks
values; anywhere else h11 parses every chunk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import h11
import httpcore

from providers.chunked import MAX_SIZE_LINE_BYTES, ChunkedDecoder, ChunkedFramingError

__all__ = ["MAX_CHUNKS_PER_PIECE", "h11_body"]

try:  # private: checked, not assumed (see the module docstring)
    from httpcore._async.http11 import AsyncHTTP11Connection, HTTP11ConnectionByteStream
    from httpcore._synchronization import AsyncShieldCancellation
except ImportError:  # pragma: no cover - another httpcore layout
    AsyncHTTP11Connection = HTTP11ConnectionByteStream = None  # type: ignore[assignment,misc]
try:
    from h11._readers import ChunkedReader
except ImportError:  # pragma: no cover - another h11 layout: h11 parses every chunk
    ChunkedReader = None  # type: ignore[assignment,misc]

_DISCONNECTED = "Server disconnected without sending a response."
_INCOMPLETE = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)

MAX_CHUNKS_PER_PIECE = 16
"""The most chunks whose data one piece joins. A loop that falls behind reads 64 KB at once,
several hundred events: decoded in one go they all live at once, and at 1000 conversations
that held about a tenth more memory per conversation (bench/README.md)."""


def _nothing() -> None:
    pass


def h11_body(stream: Any, on_bytes: Callable[[], None] = _nothing) -> AsyncIterator[bytes] | None:
    """The body of ``stream`` (httpcore's connection body stream), one ``bytes`` per read
    (the data of every chunk the read completed), or ``None`` when ``stream`` is not the known
    httpcore layout.

    ``on_bytes`` is called after every network read that returned bytes, framing included (a
    size line, a chunk's CRLF, a trailer): the byte-idle bound counts them though no data is
    handed on for them.

    Raises (from iteration): httpcore's ``RemoteProtocolError`` (bad framing, or the server
    closed before the body ended) and whatever the network stream's ``read`` raises
    (httpcore's ``ReadError``/``ReadTimeout``)."""
    if HTTP11ConnectionByteStream is None or type(stream) is not HTTP11ConnectionByteStream:
        return None
    connection = getattr(stream, "_connection", None)
    if type(connection) is not AsyncHTTP11Connection:
        return None
    state = getattr(connection, "_h11_state", None)
    network = getattr(connection, "_network_stream", None)
    request = getattr(stream, "_request", None)
    if type(state) is not h11.Connection or network is None or request is None:
        return None
    timeout = request.extensions.get("timeout", {}).get("read")
    return _reads(stream, state, network, connection.READ_NUM_BYTES, timeout, on_bytes)


async def _reads(
    stream: Any,
    state: h11.Connection,
    network: Any,
    size: int,
    read_timeout: float | None,
    on_bytes: Callable[[], None],
) -> AsyncIterator[bytes]:
    next_event = state.next_event
    data_type, need_data, paused = h11.Data, h11.NEED_DATA, h11.PAUSED
    pieces: list[Any] = []
    decoded = False  # the data chunks were decoded here, h11 has the rest
    try:
        while True:
            try:
                event = next_event()
            except h11.RemoteProtocolError as exc:
                if pieces:  # the data parsed before the fault is handed on first
                    yield b"".join(pieces)
                raise httpcore.RemoteProtocolError(exc) from exc
            if type(event) is data_type:
                pieces.append(event.data)
                if len(pieces) >= MAX_CHUNKS_PER_PIECE:
                    yield b"".join(pieces)
                    pieces.clear()
            elif event is need_data:
                if pieces:
                    yield b"".join(pieces)
                    pieces.clear()
                if not decoded and _at_chunk_boundary(state):
                    decoded = True
                    decoder = ChunkedDecoder(_max_line_bytes(state))
                    next_piece, feed = decoder.next_piece, decoder.feed
                    while True:
                        try:
                            piece = next_piece(MAX_CHUNKS_PER_PIECE)
                        except ChunkedFramingError as exc:
                            raise httpcore.RemoteProtocolError(str(exc)) from exc
                        if decoder.last_chunk is not None:
                            # h11 ends the message before the last piece is handed on, as
                            # before: a reader that stops at it leaves the connection reusable.
                            if piece is not None:
                                pieces.append(piece)
                            break
                        if piece is not None:
                            yield piece
                        else:
                            data = await network.read(size, timeout=read_timeout)
                            if not data:
                                raise httpcore.RemoteProtocolError(_INCOMPLETE)
                            on_bytes()
                            feed(data)
                    state.receive_data(decoder.last_chunk)
                    continue
                data = await network.read(size, timeout=read_timeout)
                if data:
                    on_bytes()
                elif state.their_state is h11.SEND_RESPONSE:
                    raise httpcore.RemoteProtocolError(_DISCONNECTED)
                state.receive_data(data)
            elif type(event) is h11.EndOfMessage or event is paused:
                if pieces:
                    yield b"".join(pieces)
                return
    except BaseException:
        # As httpcore's own iterator: a body that failed part-way closes its connection now.
        with AsyncShieldCancellation():
            await stream.aclose()
        raise


def _max_line_bytes(state: h11.Connection) -> int:
    """The bound h11 puts on an incomplete event, as httpcore configured it (100 KB)."""
    bound = getattr(state, "_max_incomplete_event_size", None)
    return bound if type(bound) is int and bound > 0 else MAX_SIZE_LINE_BYTES


def _at_chunk_boundary(state: h11.Connection) -> bool:
    """h11 is reading a chunked body, between two chunks, with nothing buffered."""
    reader = getattr(state, "_reader", None)
    return (
        ChunkedReader is not None
        and type(reader) is ChunkedReader
        and getattr(reader, "_bytes_in_chunk", None) == 0
        and getattr(reader, "_bytes_to_discard", None) == b""
        and getattr(reader, "_reading_trailer", None) is False
        and state.their_state is h11.SEND_BODY
        and not state.trailing_data[0]
    )
