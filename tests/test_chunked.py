"""The chunked-coding decoder (providers/chunked.py) against h11, the parser it stands in for:
the same data at every split of the body, the same bodies refused, the last chunk handed back
whole, at most ``max_chunks`` chunks per piece, and the data before a fault handed on first."""

from __future__ import annotations

import itertools

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.chunked import MAX_SIZE_LINE_BYTES, ChunkedDecoder, ChunkedFramingError

HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


def h11_data(body: bytes) -> tuple[bytes, bool]:
    """What h11 makes of ``body`` after a chunked response head: (data, ended cleanly)."""
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(HEAD + body)
    data = b""
    try:
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Data):
                data += event.data
            elif isinstance(event, h11.EndOfMessage):
                return data, True
            elif event is h11.NEED_DATA:
                return data, False
    except h11.RemoteProtocolError:
        return data, False


def decode(body: bytes, cuts: list[int], max_chunks: int) -> tuple[list[bytes], bytes | None]:
    """Feed ``body`` split at ``cuts``; the pieces and the last chunk's bytes. Raises what the
    decoder raises, after the pieces before it were taken."""
    decoder = ChunkedDecoder()
    pieces: list[bytes] = []
    bounds = [0, *sorted(set(cuts)), len(body)]
    for start, end in itertools.pairwise(bounds):
        decoder.feed(body[start:end])
        while (piece := decoder.next_piece(max_chunks)) is not None:
            pieces.append(piece)
        if decoder.last_chunk is not None:
            decoder.feed(body[end:])
            break
    return pieces, decoder.last_chunk


payloads = st.lists(st.binary(min_size=1, max_size=40), min_size=0, max_size=12)
extensions = st.sampled_from([b"", b";a=b", b';name="v"', b";x", b" ", b"\t ", b";x \t"])
trailers = st.sampled_from([b"", b"x-trailer: 1\r\n", b"a: b\r\nc: d\r\n"])


@settings(max_examples=300, deadline=None)
@given(
    payloads=payloads,
    exts=st.lists(extensions, min_size=13, max_size=13),
    upper=st.booleans(),
    trailer=trailers,
    cuts=st.lists(st.integers(0, 2000), max_size=30),
    max_chunks=st.integers(1, 5),
)
def test_every_split_gives_the_data_h11_gives_and_hands_back_the_last_chunk(
    payloads: list[bytes],
    exts: list[bytes],
    upper: bool,
    trailer: bytes,
    cuts: list[int],
    max_chunks: int,
) -> None:
    size = "%X" if upper else "%x"
    body = b"".join(
        (size % len(p)).encode() + ext + b"\r\n" + p + b"\r\n"
        for p, ext in zip(payloads, exts, strict=False)
    )
    last = b"0" + exts[-1] + b"\r\n" + trailer + b"\r\n"
    pieces, rest = decode(body + last, [c % (len(body + last) + 1) for c in cuts], max_chunks)
    assert b"".join(pieces) == b"".join(payloads) == h11_data(body + last)[0]
    assert h11_data(body + last)[1]
    assert rest == last  # h11 gets the last chunk and the trailers, byte for byte
    # a piece never joins more than max_chunks chunks (each payload here starts a new chunk)
    chunk_starts, at = [], 0
    for p in payloads:
        chunk_starts.append(at)
        at += len(p)
    at = 0
    for piece in pieces:
        inside = [s for s in chunk_starts if at < s < at + len(piece)]
        assert len(inside) < max_chunks
        at += len(piece)


def h11_refuses(body: bytes) -> bool:
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(HEAD + body)
    try:
        while connection.next_event() not in (h11.NEED_DATA, h11.PAUSED):
            pass
    except h11.RemoteProtocolError:
        return True
    return False


@settings(max_examples=500, deadline=None)
@given(
    line=st.one_of(
        st.binary(max_size=30),
        st.from_regex(rb"\A[0-9a-fA-F]{1,22}(;[ -~]{0,8})?[ \t]{0,2}\Z"),
    ),
    cut=st.integers(0, 60),
)
def test_a_size_line_is_refused_exactly_when_h11_refuses_it(line: bytes, cut: int) -> None:
    while b"\r\n" in line:
        line = line.replace(b"\r\n", b"")
    body = b"5\r\nhello\r\n" + line + b"\r\n"
    try:
        pieces, _ = decode(body, [cut % (len(body) + 1)], 3)
    except ChunkedFramingError:
        refused = True
    else:
        refused = False
        assert b"".join(pieces) == b"hello"
    assert refused == h11_refuses(body), line


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        (b"0" * 19 + b"1", False),  # 20 hex digits: h11's bound
        (b"0" * 20 + b"1", True),
        (b"5;x\n", True),  # an extension holds no LF
        (b"5 ;x", True),
        (b"5\t ", False),
        (b"0x5", True),
        (b"+5", True),
        (b" 5", True),
        (b"", True),
    ],
)
def test_size_lines_at_the_edges_of_h11s_grammar(line: bytes, refused: bool) -> None:
    body = b"5\r\nhello\r\n" + line + b"\r\n"
    assert h11_refuses(body) is refused
    for cut in range(len(body) + 1):
        if refused:
            with pytest.raises(ChunkedFramingError):
                decode(body, [cut], 3)
        else:
            assert b"".join(decode(body, [cut], 3)[0]) == b"hello"


@pytest.mark.parametrize(
    ("body", "data", "fault"),
    [
        (b"5\r\nhello\r\nzz\r\n", b"hello", "illegal chunk header"),
        (b"3\r\nabcX\r\n", b"abc", "malformed chunk footer"),  # data where the CRLF belongs
        (b"3\r\nabcXY", b"abc", "malformed chunk footer"),  # a read of one chunk's length
    ],
)
def test_the_data_before_a_fault_is_handed_on_then_the_fault_raised(
    body: bytes, data: bytes, fault: str
) -> None:
    decoder = ChunkedDecoder()
    decoder.feed(body)
    assert decoder.next_piece(16) == data
    with pytest.raises(ChunkedFramingError, match=fault):
        decoder.next_piece(16)
    with pytest.raises(ChunkedFramingError, match=fault):  # and stays raised
        decoder.next_piece(16)


def test_a_size_line_without_an_end_is_bounded() -> None:
    decoder = ChunkedDecoder()
    decoder.feed(b"5;" + b"x" * (MAX_SIZE_LINE_BYTES - 2))
    assert decoder.next_piece(16) is None  # still within the bound: more bytes may end it
    decoder.feed(b"x")
    with pytest.raises(ChunkedFramingError, match="too long"):
        decoder.next_piece(16)


def test_partial_chunk_data_is_handed_on_as_it_arrives() -> None:
    decoder = ChunkedDecoder()
    decoder.feed(b"a\r\nhel")
    assert decoder.next_piece(16) == b"hel"
    assert decoder.next_piece(16) is None
    decoder.feed(b"lo worl")
    assert decoder.next_piece(16) == b"lo worl"
    decoder.feed(b"\r")
    assert decoder.next_piece(16) is None
    decoder.feed(b"\n0\r\n\r\n")
    assert decoder.next_piece(16) is None
    assert decoder.last_chunk == b"0\r\n\r\n"
