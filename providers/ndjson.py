"""Incremental newline-delimited JSON decoder (pure, sans-I/O).

Theory of operation
-------------------
NDJSON (https://github.com/ndjson/ndjson-spec) is one JSON text per line, lines ended by LF
(a CR before it is tolerated). Bytes arrive in any split; lines are cut on the bytes (an LF is
never part of a multi-byte UTF-8 character) and each whole line is decoded as UTF-8, so a code
point cut across reads is joined. :meth:`NDJSONDecoder.feed` returns the complete, non-blank
lines; :meth:`NDJSONDecoder.close` returns a last line the server did not terminate. Parsing is
the caller's: a line that is not JSON is a protocol error, except a cut last line, which the
provider reports as truncation when its terminal record never came.

Bounds (architecture §2): a line longer than :data:`MAX_FRAME_BYTES` (8 MiB) is a
:class:`StreamProtocolError`. An unterminated line is kept as a list of reads, joined once when
its LF arrives, so its cost is linear in its length and its memory at most 8 MiB plus one read.
"""

from __future__ import annotations

from providers.bounded_json import MAX_FRAME_BYTES
from providers.errors import StreamProtocolError

__all__ = ["NDJSONDecoder"]


class NDJSONDecoder:
    """Feed bytes in any split; get complete lines back (``str``, line end removed)."""

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # reads of the current, not yet terminated, line
        self._pending_size = 0
        self._failure: StreamProtocolError | None = None

    def feed(self, chunk: bytes) -> list[str]:
        """Decode ``chunk`` and return the complete, non-blank lines (without line ends).

        Raises:
            StreamProtocolError: a line is larger than 8 MiB. The lines completed before it
                are returned first; the error is then raised by the next call.
        """
        self._raise_failure()
        lines: list[str] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            raw = chunk[start:end]
            start = end + 1
            if self._pending:
                self._pending.append(raw)
                raw = b"".join(self._pending)
                self._pending, self._pending_size = [], 0
            if len(raw) > MAX_FRAME_BYTES:
                return self._fail(lines)
            if (line := _text(raw)) is not None:
                lines.append(line)
        if start < len(chunk):
            self._pending.append(chunk[start:])
            self._pending_size += len(chunk) - start
            if self._pending_size > MAX_FRAME_BYTES:
                return self._fail(lines)
        return lines

    def close(self) -> list[str]:
        """End of body: the unterminated last line, if any.

        Raises:
            StreamProtocolError: the limit was crossed by the last read (see :meth:`feed`).
        """
        self._raise_failure()
        raw = b"".join(self._pending)
        self._pending, self._pending_size = [], 0
        line = _text(raw)
        return [line] if line is not None else []

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _fail(self, lines: list[str]) -> list[str]:
        self._failure = StreamProtocolError(f"a line is larger than {MAX_FRAME_BYTES} bytes")
        self._pending, self._pending_size = [], 0
        if not lines:
            raise self._failure
        return lines


def _text(raw: bytes) -> str | None:
    """A line as text without its CR, or ``None`` when it is blank."""
    text = raw.decode("utf-8", "replace").rstrip("\r")
    return text if text.strip() else None
