"""Incremental newline-delimited JSON decoder (pure, sans-I/O).

Theory of operation
-------------------
NDJSON (https://github.com/ndjson/ndjson-spec) is one JSON text per line, lines ended by LF
(a CR before it is tolerated). Bytes arrive in any split; UTF-8 is decoded incrementally so a
code point cut across reads is joined. :meth:`NDJSONDecoder.feed` returns the complete,
non-blank lines; :meth:`NDJSONDecoder.close` returns a last line the server did not terminate.
Parsing is the caller's: a line that is not JSON is a protocol error, except a cut last line,
which the provider reports as truncation when its terminal record never came.
"""

from __future__ import annotations

import codecs

__all__ = ["NDJSONDecoder"]


class NDJSONDecoder:
    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""

    def feed(self, chunk: bytes) -> list[str]:
        """Decode ``chunk`` and return the complete, non-blank lines (without line ends)."""
        text = self._partial + self._utf8.decode(chunk)
        *lines, self._partial = text.split("\n")
        return [line.rstrip("\r") for line in lines if line.strip()]

    def close(self) -> list[str]:
        """End of body: the unterminated last line, if any."""
        text = self._partial + self._utf8.decode(b"", final=True)
        self._partial = ""
        return [text.rstrip("\r")] if text.strip() else []
