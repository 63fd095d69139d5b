"""The I/O half of a streaming provider: one POST, its body fed to a :class:`StreamReducer`.

Theory of operation
-------------------
:class:`ReducedStream` is what ``ModelProvider.stream()`` returns for the Anthropic, Responses
and Ollama providers: an async iterator of stream events that, on first use, enters the request
it was given, an unentered :func:`providers.transport.open_stream` (connect 10 s, headers
bounded by ``timeout_secs``, every read bounded by the byte-idle timeout), and feeds each read to
the reducer. It yields the events of a read, then raises the reducer's failure if that read ended
the stream badly. A read's own failure (the idle bound, a dropped connection) ends the stream as
EOF would when the reducer says the answer is already whole (:meth:`StreamReducer.ends_at`: Chat
Completions after a ``finish_reason``, architecture §2), else it is raised.

When the reducer decodes the terminal signal, its events are yielded at once; the rest of the body
is then read for at most :data:`DRAIN_SECS` and dropped, so a server's last chunk, written a
moment after ``[DONE]``, ends the message and the connection goes back to the pool (the vendor
SDKs read the whole body for the same reason, without a bound), and the response is closed: the
socket is never awaited for an EOF that a server may not send (architecture §2, C08 B). Closing
the iterator early (``aclose()``, or cancelling the task iterating it) closes the HTTP response; no
request is re-sent.

``joined()`` is the same stream with the text of each read joined (one ``TextDelta`` per run of
adjacent text of one kind, :class:`providers.stream_reducer.JoinedReadEvents`; architecture §2
"Events"): a consumer that counts on nothing finer than a read takes it instead of the stream.

``provider_items`` exposes the reducer's opaque items once the stream is done, so the caller can
store them with the assistant message (``folder.provider_items = stream.provider_items``).

A server that ignores ``stream: true`` answers with one ``application/json`` body (several
proxies do; architecture §2 "A server that does not stream"). That is decided once per response,
from its headers (:attr:`providers.transport.BodyStream.whole_json`), never per event: the body
is read whole, under the same byte-idle bound and within :data:`MAX_FRAME_BYTES`, and folded by
the reducer's blocking parse (:meth:`StreamReducer.answer`, the one a blocking call uses), so it
yields the events the stream of that answer would have, and an error object in it raises the
typed error the blocking call would. ``on_unstreamed`` is told, so the provider can log it. A body
so labelled that is not one JSON value (a stream with the wrong label) is decoded as the stream it
is, all at once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, aclosing, nullcontext
from typing import Any, cast

import anyio

from providers.base import PacedStream
from providers.bounded_json import MAX_FRAME_BYTES, parse_json
from providers.errors import ProviderError, StreamProtocolError
from providers.events import StreamEvent
from providers.stream_reducer import StreamReducer
from providers.transport import BodyStream

__all__ = ["DRAIN_SECS", "ReducedStream"]

DRAIN_SECS = 0.05
"""How long the body is read on after the terminal signal (seconds): long enough for the last
chunk a server sends right after its final event, short enough that a server holding the socket
open (C08 B) delays the end of the stream by no more than this."""


class ReducedStream(PacedStream):
    """``AsyncIterator[StreamEvent]`` over one streaming POST, decoded by ``reducer``.

    Args:
        body: the request, not yet sent: :func:`providers.transport.open_stream`'s context
            manager, entered on the first ``__anext__`` and exited when the stream ends.
        reducer: a fresh reducer for this body.
        on_unstreamed: called (no arguments) when the server answered with one JSON body
            instead of a stream, before that body is read.

    Raises (from ``__anext__``): the errors of :func:`providers.transport.open_stream`,
    :class:`providers.errors.ProviderTimeout` (phase ``"idle"``) when no byte arrived for
    ``idle_timeout_secs`` seconds, :class:`providers.errors.ProviderConnectionError` when the
    connection broke, and the reducer's failure (typed error events, ``StreamProtocolError``,
    ``StreamTruncated``).
    """

    def __init__(
        self,
        body: AbstractAsyncContextManager[AsyncIterable[bytes]],
        reducer: StreamReducer,
        *,
        on_unstreamed: Callable[[], None] | None = None,
    ) -> None:
        self._reducer = reducer
        self._pace: Callable[[], Awaitable[None] | None] | None = None
        self._joined = False
        self._events = self._run(body, reducer, on_unstreamed)

    def pace_reads(self, wait: Callable[[], Awaitable[None] | None]) -> None:
        """Call ``wait()`` before each read that follows a read whose events were all taken
        and await what it returns, the socket held meanwhile (:meth:`BodyStream.held`; see
        :class:`providers.base.PacedStream`). Not for a body whose reads bring one HTTP chunk
        each (:attr:`BodyStream.paceable`, a proxied request): it is read as it arrives."""
        self._pace = wait

    def joined(self) -> AsyncGenerator[StreamEvent, None]:
        """The same stream with each read's adjacent text of one kind joined into one
        :class:`~providers.events.TextDelta` (:class:`providers.stream_reducer.JoinedReadEvents`;
        architecture §2 "Events"): iterate it instead of the stream, from before its first
        event, when nothing counts on one delta per wire delta. The same text, reasoning and
        other events in the same order; one delta per read when a server sends faster than it
        is read."""
        self._joined = True
        return self._events

    @property
    def provider_items(self) -> tuple[dict[str, Any], ...]:
        """Opaque output items to store with the assistant message (``()`` until done)."""
        return self._reducer.provider_items

    def __aiter__(self) -> AsyncGenerator[StreamEvent, None]:
        # The generator itself: ``async for`` then resumes it with no wrapper call per event.
        return self._events

    async def __anext__(self) -> StreamEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop reading and close the HTTP response (idempotent)."""
        await self._events.aclose()

    async def _run(
        self,
        opening: AbstractAsyncContextManager[AsyncIterable[bytes]],
        reducer: StreamReducer,
        on_unstreamed: Callable[[], None] | None,
    ) -> AsyncGenerator[StreamEvent, None]:
        async with opening as body:
            reads = cast("AsyncGenerator[bytes, None]", aiter(body))
            async with aclosing(reads):
                if isinstance(body, BodyStream) and body.whole_json:
                    if on_unstreamed is not None:
                        on_unstreamed()
                    for event in _whole_answer(await _read_whole(reads), reducer):
                        yield event
                    reducer.raise_failure()
                    return
                read = reads.__anext__
                held = body.held if isinstance(body, BodyStream) else nullcontext
                paceable = not isinstance(body, BodyStream) or body.paceable
                while True:
                    try:
                        chunk = await read()
                    except StopAsyncIteration:
                        break
                    except ProviderError as exc:
                        if reducer.ends_at(exc):  # the answer is whole: as at EOF
                            break
                        raise
                    for event in reducer.feed(chunk, joined=self._joined):
                        yield event
                    reducer.raise_failure()
                    if reducer.done:  # terminal signal: do not wait for the server's EOF
                        await _drain(reads)
                        return
                    if (
                        paceable
                        and self._pace is not None
                        and (waiting := self._pace()) is not None
                    ):
                        with held():  # the bytes sent meanwhile wait in the socket
                            await waiting
            for event in reducer.close():
                yield event
            reducer.raise_failure()


async def _drain(reads: AsyncGenerator[bytes, None]) -> None:
    """Read and drop what ``reads`` still brings within :data:`DRAIN_SECS`; the answer is whole,
    so a broken or endless tail changes nothing."""
    with anyio.move_on_after(DRAIN_SECS):
        try:
            async for _ in reads:
                pass
        except ProviderError:
            pass


async def _read_whole(reads: AsyncGenerator[bytes, None]) -> bytes:
    """The whole body, each read under the byte-idle bound.

    Raises:
        StreamProtocolError: the body is larger than :data:`MAX_FRAME_BYTES` (checked as it
            arrives, so no more than that is held).
    """
    parts: list[bytes] = []
    size = 0
    async for chunk in reads:
        size += len(chunk)
        if size > MAX_FRAME_BYTES:
            raise StreamProtocolError(f"the answer is larger than {MAX_FRAME_BYTES} bytes")
        parts.append(chunk)
    return b"".join(parts)


def _whole_answer(body: bytes, reducer: StreamReducer) -> list[StreamEvent]:
    """The events of a whole JSON body, folded by ``reducer``'s blocking parse; a body that is
    not one JSON value is fed to it as the stream it may be (then :attr:`StreamReducer.failure`
    holds what ended it badly).

    Raises:
        ProviderError: as :meth:`StreamReducer.answer` (an error object, typed; a protocol
            violation; no terminal signal), or a bound of :func:`parse_json` crossed.
    """
    try:
        answer = parse_json(body, what="answer")
    except StreamProtocolError as exc:
        if not isinstance(exc.__cause__, ValueError):  # a bound crossed, not a framing question
            raise
        return reducer.feed(body) + reducer.close()
    return reducer.answer(answer)
