"""Incremental Server-Sent Events decoder (pure, sans-I/O).

Theory of operation
-------------------
Implements the WHATWG HTML "Interpreting an event stream" algorithm
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):

* The body is UTF-8, decoded incrementally so a code point split across reads is joined
  (invalid bytes become U+FFFD, as the spec's "UTF-8 decode" does); one leading BOM is dropped.
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

import codecs
import json
import re
from dataclasses import dataclass
from typing import Any

from providers.errors import StreamProtocolError, snippet

__all__ = ["SSEDecoder", "ServerSentEvent", "parse_event_json"]

_LINE_END = re.compile(r"\r\n|\r|\n")


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
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""  # text of the current, not yet terminated, line
        self._skip_lf = False  # the previous read ended with CR
        self._bom_checked = False
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._has_lines = False  # a field line was seen since the last dispatch

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` (bytes, any split) and return the events it completed."""
        return self._feed_text(self._utf8.decode(chunk))

    def close(self) -> list[ServerSentEvent]:
        """End of body: flush the UTF-8 decoder; dispatch a last fully-terminated event.

        When the last line is unterminated, that line and the event it belongs to are discarded
        (WHATWG: "If the file ends in the middle of an event, before the final empty line, the
        incomplete event is not dispatched"). The decoder must not be fed after ``close()``.
        """
        events = self._feed_text(self._utf8.decode(b"", final=True))
        if self._partial:
            # The last line was cut: the whole pending event is incomplete, not only that line.
            self._partial = ""
            self._reset_event()
        elif self._has_lines:
            event = self._dispatch()
            if event is not None:
                events.append(event)
        return events

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if not self._bom_checked:
            self._bom_checked = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        events: list[ServerSentEvent] = []
        start = 0
        for match in _LINE_END.finditer(text):
            line = text[start : match.start()]
            if self._partial:
                line = self._partial + line
                self._partial = ""
            start = match.end()
            if match.group() == "\r" and start == len(text):
                self._skip_lf = True  # a following LF in the next read belongs to this CR
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        if start < len(text):
            self._partial += text[start:]
        return events

    def _process_line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        self._has_lines = True
        if name == "data":
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

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._reset_event()
            return None
        event = ServerSentEvent(
            data="\n".join(self._data),
            event=self._event or "message",
            id=self._last_id,
            retry=self._retry,
        )
        self._reset_event()
        return event

    def _reset_event(self) -> None:
        """Clear the data and event-type buffers (the last event ID and retry persist)."""
        self._has_lines = False
        self._data = []
        self._event = ""


def parse_event_json(data: str) -> Any:
    """Parse one event's data as JSON.

    Raises:
        StreamProtocolError: the data is not JSON (never silently skipped).
    """
    try:
        return json.loads(data)
    except ValueError as exc:
        raise StreamProtocolError(f"event data is not JSON: {snippet(data)!r}") from exc
