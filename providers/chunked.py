"""The chunked transfer coding of an HTTP/1.1 response body, decoded from a chunk boundary on.

Theory of operation
-------------------
A model streams one event per HTTP chunk (RFC 9112 §7.1): a hex size line, that many bytes, a
CRLF. h11 parses each chunk through its state machine and an event object, which costs more
than decoding the event the chunk carries (bench/README.md). :class:`ChunkedDecoder` decodes
the data chunks of a body whose head h11 already parsed, and stops at the *last chunk* (size
``0``): the bytes from that line on (:attr:`ChunkedDecoder.last_chunk`) go back to h11, which
parses the last chunk and the trailer section and ends the message, so the connection's
HTTP state is h11's throughout and the connection is reused as before.

Sans-I/O: :meth:`ChunkedDecoder.feed` takes received bytes (any split), :meth:`ChunkedDecoder.
next_piece` hands on the data decoded so far, at most ``max_chunks`` chunks' worth per piece
(partial chunk data is handed on as it arrives). Chunk extensions are ignored; the size line is
checked as h11 checks it (1 to 20 hex digits, an optional ``;`` extension without LF, optional
trailing spaces or tabs), so a body h11 refuses is refused here too.
"""

from __future__ import annotations

import re

__all__ = ["MAX_SIZE_LINE_BYTES", "ChunkedDecoder", "ChunkedFramingError"]

MAX_SIZE_LINE_BYTES = 16 * 1024
"""The default bound on a chunk-size line (with its extensions) not yet ended, h11's default
bound on an incomplete event (``h11.Connection(max_incomplete_event_size=16384)``); pass the
bound the connection's h11 was given (httpcore: 100 KB) to :class:`ChunkedDecoder`."""

_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;[^\n]*)?[ \t]*")
"""h11's ``chunk_header`` (``h11/_abnf.py``) without its CRLF."""


class ChunkedFramingError(ValueError):
    """The body breaks the chunked coding (a bad size line, or data where CRLF belongs)."""


class ChunkedDecoder:
    """Data chunks of a chunked body, from a chunk boundary to its last chunk.

    Args:
        max_line_bytes: the longest size line, not yet ended, to wait for (bytes).

    Attributes:
        last_chunk: ``None`` until the last chunk's size line begins; then the bytes from that
            line on (the last chunk, trailers and anything after them), for h11 to parse.
    """

    __slots__ = ("_buffer", "_crlf_due", "_fault", "_in_chunk", "_max_line", "last_chunk")

    def __init__(self, max_line_bytes: int = MAX_SIZE_LINE_BYTES) -> None:
        self._max_line = max_line_bytes
        self._buffer = b""
        self._in_chunk = 0  # data bytes of the current chunk not yet decoded
        self._crlf_due = 0  # bytes of the CRLF after the chunk's data not yet seen (0-2)
        self._fault: ChunkedFramingError | None = None  # raised once the data before it is out
        self.last_chunk: bytes | None = None

    def feed(self, data: bytes) -> None:
        """Add received bytes (any split). Feeding after :attr:`last_chunk` is set appends
        to it."""
        if self.last_chunk is not None:
            self.last_chunk += data
        elif self._buffer:
            self._buffer += data
        else:
            self._buffer = data

    def next_piece(self, max_chunks: int) -> bytes | None:
        """The data of the next chunks fed so far (at most ``max_chunks`` of them, one of them
        possibly partial), or ``None`` when more bytes are needed or the last chunk began. When
        :attr:`last_chunk` is set, the piece returned (if any) is the body's last.

        Raises:
            ChunkedFramingError: a malformed size line, a size line longer than
                ``max_line_bytes``, or a chunk's data not followed by CRLF; raised
                once the data decoded before the fault has been returned.
        """
        if self._fault is not None:
            raise self._fault
        buffer = self._buffer
        if not buffer:
            return None
        if not (self._in_chunk or self._crlf_due):  # the usual read: exactly one whole chunk
            line_end = buffer.find(b"\r\n")
            matched = _SIZE_LINE.fullmatch(buffer, 0, line_end) if line_end > 0 else None
            if matched is not None:
                start = line_end + 2
                stop = start + int(matched[1], 16)
                if start < stop == len(buffer) - 2 and buffer.endswith(b"\r\n"):
                    self._buffer = b""
                    return buffer[start:stop]
        pos, end = 0, len(buffer)
        in_chunk, crlf_due = self._in_chunk, self._crlf_due
        parts: list[bytes] = []
        fault: str | None = None
        while pos < end and len(parts) < max_chunks:
            if crlf_due:
                seen = buffer[pos : pos + crlf_due]
                if seen != b"\r\n"[2 - crlf_due : 2 - crlf_due + len(seen)]:
                    fault = f"malformed chunk footer: {seen!r}"
                    break
                pos += len(seen)
                crlf_due -= len(seen)
            elif in_chunk:
                take = min(in_chunk, end - pos)
                parts.append(buffer[pos : pos + take])
                pos += take
                in_chunk -= take
                if not in_chunk:
                    crlf_due = 2
            else:
                line_end = buffer.find(b"\r\n", pos)
                if line_end < 0:
                    if end - pos > self._max_line:
                        fault = "chunk size line too long"
                    break
                matched = _SIZE_LINE.fullmatch(buffer, pos, line_end)
                if matched is None:
                    fault = f"illegal chunk header: {buffer[pos : line_end + 2][:80]!r}"
                    break
                size = int(matched[1], 16)
                if not size:
                    self.last_chunk = buffer[pos:]
                    pos = end
                    break
                start = line_end + 2
                stop = start + size
                if stop + 2 <= end and buffer[stop : stop + 2] == b"\r\n":  # a whole chunk
                    parts.append(buffer[start:stop])
                    pos = stop + 2
                else:
                    in_chunk, pos = size, start
        self._in_chunk, self._crlf_due = in_chunk, crlf_due
        self._buffer = buffer[pos:] if pos < end else b""
        if fault is not None:
            self._fault = ChunkedFramingError(fault)
            if not parts:
                raise self._fault
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else b"".join(parts)
