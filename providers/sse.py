"""Incremental Server-Sent Events decoder (pure, sans-I/O).

Theory of operation
-------------------
Implements the WHATWG HTML "Interpreting an event stream" algorithm
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):

* The body is UTF-8, decoded a whole line at a time, so a code point split across reads is
  joined (invalid bytes become U+FFFD, as the spec's "UTF-8 decode" does); one leading BOM is
  dropped.
* Lines end at CRLF, LF or CR only. A CR at the end of one read followed by an LF at the start of
  the next is one line end. U+2028, U+0085 and friends are *not* line ends (so ``str.splitlines``
  must not be used).
* A line starting with ``:`` is a comment. ``field: value`` loses one leading space of the value.
  ``data`` lines are joined with ``\\n``; ``event``, ``id`` and ``retry`` set their buffers.
* A blank line dispatches the event, unless its data buffer is empty (field-only events such as a
  lone ``retry:`` are not dispatched).

One deliberate deviation, forced by servers that omit the final blank line: :meth:`close`
dispatches a last event whose lines were all terminated. An event whose last line is
unterminated is discarded whole, as the spec says, so a body cut mid-line (mid-JSON) is never
parsed as if it were whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from providers.bounded_json import MAX_FRAME_BYTES, parse_json
from providers.errors import StreamProtocolError

__all__ = ["MAX_FRAME_BYTES", "SSEDecoder", "ServerSentEvent", "parse_event_json"]

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = "\ufeff"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event. ``retry`` is the reconnection time in milliseconds, if sent."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed bytes in any split; get complete events back.

    Example::

        decoder = SSEDecoder()
        for chunk in response.aiter_bytes():
            for event in decoder.feed(chunk): ...
        for event in decoder.close(): ...

    Bounds: a line, or the ``data`` lines of one event together, longer than
    :data:`MAX_FRAME_BYTES` (8 MiB of UTF-8) is a :class:`StreamProtocolError`. The events a
    read completed before the limit was crossed are returned first; the error is raised by that
    same call when there are none, else by the next :meth:`feed` or :meth:`close`. An
    unterminated line is kept as a list of reads (joined once, when it ends), so a long line
    costs time linear in its length and at most 8 MiB plus one read of memory.
    """

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # reads of the current, not yet terminated, line
        self._pending_size = 0
        self._skip_lf = False  # the previous read ended with CR
        self._bom_checked = False
        self._data: list[str] = []
        self._data_size = 0  # UTF-8 bytes of the data lines since the last dispatch (≥ data)
        self._line_size = 0  # UTF-8 bytes of the line being processed
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._has_lines = False  # a field line was seen since the last dispatch
        self._failure: StreamProtocolError | None = None
        self._objects = True  # dispatch ServerSentEvent objects (feed) or data alone (feed_data)

    @property
    def continues_event(self) -> bool:
        """Whether the next read may complete an event begun in an earlier one (part of a line,
        or field lines not yet dispatched, are held). When False, every event the next
        :meth:`feed_payloads` returns is made of that read's bytes alone. A query."""
        return self._has_lines or bool(self._pending)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` (bytes, any split) and return the events it completed.

        Raises:
            StreamProtocolError: a line or an event's data is larger than 8 MiB.
        """
        self._objects = True
        return self._checked(self._feed_bytes(chunk))

    def feed_data(self, chunk: bytes) -> list[str]:
        """:meth:`feed`, returning only the ``data`` of each event (no event objects are made:
        the provider decoders read nothing else). The same bounds and errors as :meth:`feed`."""
        return [data.decode("utf-8", "replace") for data in self.feed_payloads(chunk)]

    def feed_payloads(self, chunk: bytes) -> list[bytes]:
        """:meth:`feed_data` before the text is decoded: each event's ``data`` as UTF-8 bytes,
        which ``bytes.decode("utf-8", "replace")`` turns into the data :meth:`feed_data` gives
        (the bytes as they came when an event was one ``data:`` line, so a JSON parser can
        read them without a decode in between). The same bounds and errors as :meth:`feed`.

        A read without a CR (once the BOM was looked for) is framed in bulk: its events end at
        each ``\\n\\n`` (``bytes.split``, C speed), and an event that is one ``data:`` line,
        maybe after an ``event:`` line (the type is not returned), is sliced out as it is, with
        no line loop (a run of ``data: `` events is split at each ``\\n\\ndata: ``, a run of
        ``event:`` + ``data: `` events at each ``\\ndata: ``); every other event, the end of an
        event begun in an earlier read and the start of one still arriving go through the line
        loop, which follows the spec to the letter. Both give the same data at every split
        (tests/test_sse.py, tests/test_sse_bulk.py)."""
        self._objects = False
        if (
            self._bom_checked
            and not self._skip_lf
            and self._failure is None
            and len(chunk) <= MAX_FRAME_BYTES
            and b"\r" not in chunk
        ):
            return self._checked(self._feed_bulk(chunk))
        return [data.encode() for data in self._checked(self._feed_bytes(chunk))]

    def _feed_bulk(self, chunk: bytes) -> list[bytes]:
        """:meth:`feed_payloads` of a read without a CR (see there). Every event the read
        completes is at most the read's size, so no bound can be crossed inside it."""
        out: list[bytes] = []
        if self._pending or self._has_lines:  # the read continues an event: its end first
            end = chunk.find(b"\n\n") + 2
            if end == 1:  # it does not end in this read
                return [data.encode() for data in self._feed_lf_lines(chunk)]
            out = [data.encode() for data in self._feed_lf_lines(chunk[:end])]
            if self._failure is not None:
                return out
            chunk = chunk[end:]  # a blank line ended it: every buffer is clear again
        if chunk.startswith(b"data: "):
            # Data-only events (Chat Completions): between two "\n\ndata: " lies the data of
            # one event when it holds no LF (its one line, then the blank line ending it).
            events = chunk[6:].split(b"\n\ndata: ")
            chunk = b"data: " + events.pop()  # the last event, and whatever follows it
            for data in events:
                if b"\n" in data:
                    out.extend(d.encode() for d in self._feed_lf_lines(b"data: " + data + b"\n\n"))
                else:
                    out.append(data)
        elif chunk.startswith(b"event:"):
            chunk = _typed_events(chunk, out)
        blocks = chunk.split(b"\n\n")
        rest = blocks.pop()  # after the last blank line: an event still arriving
        for block in blocks:
            if block.startswith(b"data:"):
                if b"\n" not in block:
                    out.append(block[6:] if block[5:6] == b" " else block[5:])
                    continue
            elif block.startswith(b"event:"):
                line = block.find(b"\n") + 1
                if line and block.startswith(b"data:", line) and block.find(b"\n", line) < 0:
                    data = (
                        block[line + 6 :]
                        if block[line + 5 : line + 6] == b" "
                        else block[line + 5 :]
                    )
                    out.append(data)
                    continue
            elif not block:
                continue  # two blank lines: nothing to dispatch
            out.extend(data.encode() for data in self._feed_lf_lines(block + b"\n\n"))
        if rest:
            out.extend(data.encode() for data in self._feed_lf_lines(rest))
        return out

    def _checked(self, events: list[Any]) -> list[Any]:
        if self._failure is not None and not events:
            self._raise_failure()
        return events

    def close(self) -> list[ServerSentEvent]:
        """End of body: dispatch a last fully-terminated event.

        When the last line is unterminated, that line and the event it belongs to are discarded
        (WHATWG: "If the file ends in the middle of an event, before the final empty line, the
        incomplete event is not dispatched"). The decoder must not be fed after ``close()``.

        Raises:
            StreamProtocolError: the limit was crossed by the last read (see :meth:`feed`).
        """
        self._objects = True
        return self._close()

    def close_data(self) -> list[str]:
        """:meth:`close`, returning only the last event's ``data`` (see :meth:`feed_data`)."""
        self._objects = False
        return self._close()

    def close_payloads(self) -> list[bytes]:
        """:meth:`close_data` as UTF-8 bytes (see :meth:`feed_payloads`)."""
        return [data.encode() for data in self.close_data()]

    def _close(self) -> list[Any]:
        self._raise_failure()
        if self._pending:
            # The last line was cut: the whole pending event is incomplete, not only that line.
            self._pending, self._pending_size = [], 0
            self._reset_event()
        elif self._has_lines:
            event = self._dispatch()
            if event is not None:
                return [event]
        return []

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _fail(self, what: str) -> None:
        self._failure = StreamProtocolError(f"{what} is larger than {MAX_FRAME_BYTES} bytes")
        self._pending, self._pending_size = [], 0
        self._reset_event()

    def _feed_bytes(self, chunk: bytes) -> list[Any]:
        self._raise_failure()
        if not chunk:
            return []
        start = 0
        if self._skip_lf:
            self._skip_lf = False
            if chunk.startswith(b"\n"):
                start = 1
        if self._bom_checked and b"\r" not in chunk:
            return self._feed_lf_lines(chunk[start:] if start else chunk)
        events: list[Any] = []
        for end, after in _line_ends(chunk, start):
            raw = chunk[start:end]
            if self._pending:
                self._pending.append(raw)
                raw = b"".join(self._pending)
                self._pending, self._pending_size = [], 0
            start = after
            if len(raw) > MAX_FRAME_BYTES:
                self._fail("an event-stream line")
                return events
            if after == len(chunk) and after - end == 1 and chunk[end] == 0x0D:
                self._skip_lf = True  # a following LF in the next read belongs to this CR
            self._line_size = len(raw)
            event = self._process_line(self._decode(raw))
            if self._failure is not None:
                return events
            if event is not None:
                events.append(event)
        if start < len(chunk):
            self._hold(chunk[start:])
        return events

    def _feed_lf_lines(self, chunk: bytes) -> list[Any]:
        """The common case of :meth:`_feed_bytes`: no CR in the read and the BOM already
        checked, so the lines are ``chunk.split(b"\\n")``; a ``data:`` line is handled inline
        (its value decoded alone: the field name is ASCII, so this equals decoding the line)."""
        events: list[Any] = []
        lines = chunk.split(b"\n")
        rest = lines.pop()  # after the last LF: the start of a line still arriving
        if self._pending and lines:
            self._pending.append(lines[0])
            lines[0] = b"".join(self._pending)
            self._pending, self._pending_size = [], 0
        data = self._data
        for raw in lines:
            if not raw:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
                data = self._data
                continue
            size = len(raw)
            if size > MAX_FRAME_BYTES:
                self._fail("an event-stream line")
                return events
            if raw.startswith(b"data:"):
                self._has_lines = True
                self._data_size += size  # "data:" is longer than the LF joining values
                if self._data_size > MAX_FRAME_BYTES:
                    self._fail("an event's data")
                    return events
                data.append((raw[6:] if raw[5:6] == b" " else raw[5:]).decode("utf-8", "replace"))
                continue
            self._line_size = size
            event = self._process_line(raw.decode("utf-8", "replace"))
            if self._failure is not None:
                return events
            if event is not None:
                events.append(event)
            data = self._data
        if rest:
            self._hold(rest)
        return events

    def _hold(self, rest: bytes) -> None:
        """Keep the start of a line not yet terminated (bounded by :data:`MAX_FRAME_BYTES`)."""
        self._pending.append(rest)
        self._pending_size += len(rest)
        if self._pending_size > MAX_FRAME_BYTES:
            self._fail("an event-stream line")

    def _decode(self, raw: bytes) -> str:
        """One line as text: UTF-8 (invalid bytes → U+FFFD); one leading BOM of the stream
        dropped. A line end is ASCII, never inside a multi-byte character, so decoding whole
        lines equals decoding the stream incrementally."""
        line = raw.decode("utf-8", "replace")
        if not self._bom_checked:
            self._bom_checked = True
            if line.startswith(_BOM):
                line = line[1:]
        return line

    def _process_line(self, line: str) -> ServerSentEvent | str | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        self._has_lines = True
        if name == "data":
            self._data_size += self._line_size  # "data:" is longer than the LF joining values
            if self._data_size > MAX_FRAME_BYTES:
                self._fail("an event's data")
                return None
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | str | None:
        """The event the buffers hold (its data alone when fed by :meth:`feed_data`), or
        ``None`` when the data buffer is empty; the buffers are cleared either way."""
        if not self._data:
            self._reset_event()
            return None
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        if self._objects:
            event: ServerSentEvent | str = ServerSentEvent(
                data=data,
                event=self._event or "message",
                id=self._last_id,
                retry=self._retry,
            )
        else:
            event = data
        self._reset_event()
        return event

    def _reset_event(self) -> None:
        """Clear the data and event-type buffers (the last event ID and retry persist)."""
        self._has_lines = False
        self._data = []
        self._data_size = 0
        self._event = ""


def _typed_events(chunk: bytes, out: list[bytes]) -> bytes:
    """The events at the start of ``chunk`` that are an ``event:`` line, a ``data: `` line and
    a blank line (Anthropic's, Responses'), their data appended to ``out``; returns the rest of
    the read, from the first event of another form (or the last one, which may be unfinished).

    Between two ``\\ndata: `` lies one such event's data, its blank line and the next event's
    ``event:`` line; the type is not returned, and a dispatch clears it, so skipping the line
    is what the line loop does in effect."""
    pieces = chunk.split(b"\ndata: ")
    if len(pieces) < 3 or b"\n" in pieces[0]:
        return chunk
    before, at = pieces[0], 0  # the current event's first line: before[at:]
    for k in range(1, len(pieces) - 1):
        piece = pieces[k]
        end = piece.find(b"\n")
        if end < 0 or not piece.startswith(b"\n\nevent:", end) or piece.find(b"\n", end + 2) >= 0:
            return b"\ndata: ".join([before[at:], *pieces[k:]])
        out.append(piece[:end])
        before, at = piece, end + 2
    return before[at:] + b"\ndata: " + pieces[-1]


def _line_ends(chunk: bytes, start: int) -> Iterator[tuple[int, int]]:
    """``(end, after)`` of every line end in ``chunk`` from ``start``: the line's last index + 1
    and the index after its CR, LF or CRLF. Without a CR in the read (the common case) LFs are
    found with ``bytes.find`` (C speed); otherwise with a regular expression."""
    if b"\r" in chunk:
        for match in _LINE_END.finditer(chunk, start):
            yield match.start(), match.end()
        return
    while (end := chunk.find(b"\n", start)) >= 0:
        start = end + 1
        yield end, start


def parse_event_json(data: str) -> Any:
    """Parse one event's data as JSON, bounded (:func:`providers.bounded_json.parse_json`).

    Raises:
        StreamProtocolError: the data is not JSON (never silently skipped), or nested deeper
            than 256 levels.
    """
    return parse_json(data, what="event data")
