"""The sans-I/O half of a streaming provider: body bytes in, stream events out.

Theory of operation
-------------------
A provider's stream decoder is a :class:`StreamReducer`: :meth:`StreamReducer.feed` takes the
body in reads of any size and returns the :data:`providers.events.StreamEvent` they completed;
:meth:`StreamReducer.close` ends the body. A subclass supplies the framing (SSE events or NDJSON
lines, :meth:`StreamReducer._frames`) and the meaning of one decoded JSON object
(:meth:`StreamReducer._on_object`).

Failures never lose events: when a read completes a text delta and then an error event, ``feed``
returns the delta and keeps the error in :attr:`StreamReducer.failure`; the driver yields the
events, then calls :meth:`StreamReducer.raise_failure`. So the events seen before a failure are
the same at every split of the body, which the turn loop's retry rule (architecture §2 "Failures":
the first non-empty text delta divides retry from fallback) depends on.

``feed`` gives one :class:`~providers.events.TextDelta` per wire delta; ``feed(chunk,
joined=True)`` gives one read's events with adjacent text of one kind joined
(:class:`JoinedReadEvents`): a read holding fifty text deltas is one delta for the turn loop,
the policy and delivery, and a read holding one is that one, unchanged (architecture §2
"Events"; a consumer asks for it with :meth:`providers.http_stream.ReducedStream.joined`).

Blocking answers are folded by the same reducer (:meth:`StreamReducer.answer`): a subclass says
which wire objects the answer stands for (:meth:`StreamReducer._answer_objects`), so a stream and
a blocking call of the same answer give equal responses by construction (architecture §2
"Contract").

Typed, always: a wire field of the wrong JSON type is a :class:`StreamProtocolError` (the
reducers check the fields they dispatch on; :data:`_WRONG_SHAPE` catches the rest), and all JSON
is parsed within the bounds of :mod:`providers.bounded_json`.

States: *open* → *done* (the provider's terminal signal was decoded; later bytes are ignored and
the driver stops reading at once) or *failed* (an error event, a frame that is not JSON, or, at
:meth:`close`, EOF before the terminal signal: :class:`providers.errors.StreamTruncated`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from providers.bounded_json import parse_json
from providers.errors import ProviderError, StreamProtocolError, StreamTruncated, snippet
from providers.events import StreamEvent, TextDelta, text_delta

__all__ = [
    "JoinedReadEvents",
    "ReadEvents",
    "StreamReducer",
    "arguments_json",
    "reduce_body",
    "type_field",
]

_WRONG_SHAPE = (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError)
"""What a decoder raises when a wire field has another JSON type than the format says (a list
where a string belongs: ``{"type": []}``). The reducers check the fields they dispatch on
(:func:`type_field`); this net types every other case as :class:`StreamProtocolError` at the cost
of one ``try`` per read, so no untyped error escapes and retry and fallback still run."""


class ReadEvents:
    """The events of one read, in order, as the reducer decodes them: each piece of text its
    own :class:`TextDelta`. A subclass's :meth:`StreamReducer._frames` may add the text of
    the objects it decodes itself (:meth:`text`, :meth:`thought`)."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: list[StreamEvent] = []

    def text(self, piece: str) -> None:
        """Add a piece of answer text (``StreamChunk.delta``; not empty)."""
        self._events.append(text_delta(piece))

    def thought(self, piece: str) -> None:
        """Add a piece of reasoning (``StreamChunk.reasoning``; not empty)."""
        self._events.append(text_delta("", piece))

    def extend(self, events: list[StreamEvent]) -> None:
        """Add ``events`` (those of one decoded object)."""
        self._events += events

    def events(self) -> list[StreamEvent]:
        """The events so far."""
        return self._events


class JoinedReadEvents(ReadEvents):
    """:class:`ReadEvents` with adjacent text of one kind joined into one :class:`TextDelta`
    (architecture §2 "Events"): pieces of answer text (``delta``) with nothing between them
    make one delta, as do pieces of reasoning; a delta carrying both, and every other event,
    stays where it is and ends the run. So the consumer runs once per read when a server
    sends faster than it is read, and exactly as unjoined when each read brings one event (a
    model's pace); the joined text and the other events are the same at every split of the
    body (tests/test_read_events.py)."""

    __slots__ = ("_pieces", "_reasoning")

    def __init__(self) -> None:
        super().__init__()
        self._pieces: list[str] = []
        self._reasoning = False  # the pieces held are reasoning, not answer text

    def text(self, piece: str) -> None:
        if self._reasoning:
            self._flush()
            self._reasoning = False
        self._pieces.append(piece)

    def thought(self, piece: str) -> None:
        if not self._reasoning:
            self._flush()
            self._reasoning = True
        self._pieces.append(piece)

    def extend(self, events: list[StreamEvent]) -> None:
        for event in events:
            if type(event) is TextDelta:
                chunk = event.chunk
                if chunk.delta and not chunk.reasoning:
                    self.text(chunk.delta)
                    continue
                if chunk.reasoning and not chunk.delta:
                    self.thought(chunk.reasoning)
                    continue
            self._flush()
            self._events.append(event)

    def events(self) -> list[StreamEvent]:
        self._flush()
        return self._events

    def _flush(self) -> None:
        pieces = self._pieces
        if not pieces:
            return
        text = pieces[0] if len(pieces) == 1 else "".join(pieces)
        self._events.append(text_delta("", text) if self._reasoning else text_delta(text))
        pieces.clear()


class StreamReducer(ABC):
    """Decode one streaming response body into events (pure: no I/O, no clock).

    Attributes:
        done: the terminal signal was decoded (``Final`` was returned).
        failure: the error that ended the stream, raised by :meth:`raise_failure`.
        provider_items: opaque output items to send back verbatim with the assistant message
            (architecture §2; Responses ``reasoning``/``function_call`` items, Anthropic thinking
            blocks), set when the terminal signal is decoded; ``()`` otherwise.
    """

    terminal_signal: str = "the terminal event"
    """Named in the :class:`StreamTruncated` message."""

    def __init__(self) -> None:
        self.done = False
        self.failure: ProviderError | None = None
        self.provider_items: tuple[dict[str, Any], ...] = ()
        self._closed = False
        self._read = ReadEvents()
        """The events of the read being decoded; a subclass's :meth:`_frames` may add text to
        it directly (:meth:`ReadEvents.text`) for the objects it decodes itself."""

    def feed(self, chunk: bytes, *, joined: bool = False) -> list[StreamEvent]:
        """Decode one read of the body (bytes, any split); return the events it completed,
        with adjacent text of one kind joined when ``joined`` (:class:`JoinedReadEvents`).

        After the stream is done or failed, bytes are ignored and ``[]`` is returned.
        """
        if self.done or self.failure is not None or self._closed:
            return []
        return self._run(chunk, final=False, joined=joined)

    def close(self) -> list[StreamEvent]:
        """End of body: decode what the framing still holds; then, unless done or failed,
        record :class:`StreamTruncated` in :attr:`failure`."""
        if self._closed:
            return []
        events: list[StreamEvent] = []
        if not self.done and self.failure is None:
            events = self._run(b"", final=True)
        self._closed = True
        if not self.done and self.failure is None:
            self.failure = StreamTruncated(
                f"the stream ended before {self.terminal_signal}; the answer is incomplete"
            )
        return events

    def ends_at(self, error: ProviderError) -> bool:
        """True when ``error``, a read's failure (the byte-idle bound, a dropped connection),
        ends the stream properly instead, as EOF would (the driver then calls :meth:`close`).
        Default: never."""
        return False

    def raise_failure(self) -> None:
        """Raise :attr:`failure` if there is one.

        Raises:
            ProviderError: the typed error that ended the stream.
        """
        if self.failure is not None:
            raise self.failure

    def feed_object(self, obj: Any) -> list[StreamEvent]:
        """Decode one already-parsed JSON value as if it had been framed in the body (one wire
        object, e.g. one Ollama record). Call :meth:`close` afterwards. A whole blocking answer
        goes through :meth:`answer` instead.
        """
        if self.done or self.failure is not None or self._closed:
            return []
        return self._run_objects([obj])

    def answer(self, answer: Any) -> list[StreamEvent]:
        """Decode a blocking answer (its parsed JSON body) with this same reducer: the events
        the stream of the same answer would give, so both fold equal by construction.

        Use a fresh reducer; it is closed afterwards.

        Raises:
            ProviderError: the failure that ended it (an error object, a protocol violation,
                or :class:`StreamTruncated` when the answer lacks the terminal signal).
        """
        events: list[StreamEvent] = []
        if not (self.done or self.failure is not None or self._closed):

            def objects() -> Iterable[Any]:  # lazy, so shape errors surface inside the try
                yield from self._answer_objects(answer)

            events = self._run_objects(objects())
        events.extend(self.close())
        self.raise_failure()
        return events

    def _answer_objects(self, answer: Any) -> Iterable[Any]:
        """The wire objects a blocking answer stands for, in stream order. Default: the answer
        itself is one object of the stream (Ollama's final record).

        Raises:
            StreamProtocolError: the answer does not have the format's shape.
        """
        return (answer,)

    def _run(self, chunk: bytes, *, final: bool, joined: bool = False) -> list[StreamEvent]:
        out = self._read = JoinedReadEvents() if joined else ReadEvents()
        try:  # the framing is inside the try too: its errors are the stream's failure
            for obj in self._frames(chunk, final=final):
                if type(obj) is not dict and not isinstance(obj, dict):
                    raise StreamProtocolError(f"expected a JSON object, got {type(obj).__name__}")
                out.extend(self._on_object(obj))
                if self.done:
                    break  # anything after the terminal signal is ignored
        except ProviderError as exc:
            self.failure = exc
        except _WRONG_SHAPE as exc:  # a field of the wrong JSON type reached the reducer
            self.failure = _wrong_shape(exc)
        return out.events()

    def _run_objects(self, objects: Iterable[Any]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        try:
            for obj in objects:
                if not isinstance(obj, dict):
                    raise StreamProtocolError(f"expected a JSON object, got {type(obj).__name__}")
                out.extend(self._on_object(obj))
                if self.done:
                    break  # anything after the terminal signal is ignored
        except ProviderError as exc:
            self.failure = exc
        except _WRONG_SHAPE as exc:  # a field of the wrong JSON type reached the reducer
            self.failure = _wrong_shape(exc)
        return out

    @abstractmethod
    def _frames(self, chunk: bytes, *, final: bool) -> Iterable[Any]:
        """The JSON values completed by ``chunk`` (``final``: the body ended), lazily.

        Raises:
            StreamProtocolError: a frame is not JSON.
        """

    @abstractmethod
    def _on_object(self, obj: dict[str, Any]) -> list[StreamEvent]:
        """The events of one decoded JSON object; set :attr:`done` on the terminal signal.

        Raises:
            ProviderError: an error the provider sent, or a protocol violation.
        """


def _wrong_shape(exc: BaseException) -> StreamProtocolError:
    return StreamProtocolError(
        f"a field has the wrong JSON type ({type(exc).__name__}: {snippet(str(exc))})"
    )


def type_field(obj: dict[str, Any], key: str = "type") -> str | None:
    """``obj[key]`` when it is a string, ``None`` when absent or ``null``.

    Raises:
        StreamProtocolError: the field holds another JSON type (``{"type": []}``).
    """
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise StreamProtocolError(f"the {key!r} field is not a string but {type(value).__name__}")


def arguments_json(value: Any) -> str:
    """Tool-call arguments as JSON text of an object (``"{}"`` when none were sent).

    ``value`` is an object (Anthropic ``input``, Ollama ``arguments``), JSON text of one (as
    streamed in fragments and concatenated), or ``None``/blank text. Objects are serialised with
    ``json.dumps`` defaults and ``ensure_ascii=False``, so a streamed and a blocking answer give
    the same text.

    Raises:
        StreamProtocolError: the text is not JSON, or not a JSON object.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return "{}"
    if isinstance(value, str):
        value = parse_json(value, what="tool arguments")
    if not isinstance(value, dict):
        raise StreamProtocolError(f"tool arguments are not a JSON object: {value!r:.80}")
    return json.dumps(value, ensure_ascii=False)


def reduce_body(
    reducer: StreamReducer, chunks: Iterable[bytes]
) -> tuple[list[StreamEvent], ProviderError | None]:
    """Feed ``chunks`` then close; return ``(events, failure)``. For blocking parses and tests."""
    events: list[StreamEvent] = []
    for chunk in chunks:
        events.extend(reducer.feed(chunk))
        if reducer.done or reducer.failure is not None:
            break
    events.extend(reducer.close())
    return events, reducer.failure
