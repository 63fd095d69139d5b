"""A local HTTP/1.1 server that replays scripted provider answers byte for byte (architecture §8).

Theory of operation
-------------------
Tests point a provider's ``base_url`` at :attr:`ProviderServer.url` and script, per request path,
a queue of :class:`Reply` objects: the n-th request to a path gets the n-th reply; when the queue
is exhausted the last reply is repeated (or, with ``repeat_last=False``, a 500 saying so is
sent). A path that was never scripted gets a 404.

The server speaks HTTP/1.1 on raw asyncio streams (no web framework), so a test controls every
byte and every pause:

* the body is split at ``cuts`` (byte offsets) into pieces; each piece is written and drained on
  its own, so the client reads it separately whenever a pause follows it;
* ``header_delay_secs`` waits before the status line (to exercise the headers bound),
  ``delay_secs`` waits before every piece but the first, and ``pauses={k: secs}`` waits before
  piece ``k`` (0 = the first piece, right after the headers) on top of that;
* ``framing`` is ``"chunked"`` (default; one HTTP chunk per piece), ``"length"``
  (``Content-Length``) or ``"close"`` (no length; the body ends when the server closes);
* after the pieces the body is ended properly, unless ``hold_open`` (the body is not ended and the
  socket stays open until the client closes it or the server stops: "``[DONE]`` then nothing") or
  ``abort`` (the socket is closed without ending the framing: the client sees a broken body).

"Send headers then nothing" is ``Reply(body=b"", hold_open=True)`` (also :meth:`Reply.stall`).

The audio endpoints of an OpenAI-compatible server are scripted like any path:
``POST /v1/audio/transcriptions`` gets ``Reply.json({"text": ...})`` and its multipart body is
read with :meth:`RecordedRequest.form`; ``POST /v1/audio/speech`` gets
``Reply(body=audio, content_type="audio/ogg")``.

Connections are kept alive between properly ended replies, as httpx pools them. Every request is
recorded in :attr:`ProviderServer.requests` (a :class:`RecordedRequest`, JSON bodies parsed)
before its reply starts; ``ended_at``/``client_closed`` tell when and how serving it ended.

Example::

    async with ProviderServer() as server:
        server.script("/v1/chat/completions", [
            Reply(status=429, headers={"Retry-After": "2"}, body=b"{}",
                  content_type="application/json"),
            Reply(body=sse_bytes, cuts=[10, 37], delay_secs=0.05, hold_open=True),
        ])
        ...  # base_url = server.url + "/v1"
        assert server.requests[0].json["stream"] is True
"""

from __future__ import annotations

import asyncio
import contextlib
import email.policy
import json
import ssl
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from email.parser import BytesParser
from pathlib import Path
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = ["FormPart", "ProviderServer", "RecordedRequest", "Reply", "content_type_for"]

Framing = Literal["chunked", "length", "close"]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Site Overloaded",
}

_CONTENT_TYPES = {
    ".sse": "text/event-stream",
    ".ndjson": "application/x-ndjson",
    ".json": "application/json",
}

_MAX_HEAD_BYTES = 64 * 1024


def content_type_for(path: Path) -> str:
    """The real Content-Type of a fixture file, by suffix (``.sse``, ``.ndjson``, ``.json``)."""
    return _CONTENT_TYPES.get(path.suffix, "application/octet-stream")


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        body: the body bytes, sent as they are.
        status: HTTP status code.
        content_type: the ``Content-Type`` header (omitted when empty).
        headers: extra response headers (e.g. ``{"Retry-After": "3"}``).
        cuts: byte offsets at which ``body`` is split into pieces (any order; out-of-range and
            duplicate offsets only make empty pieces, which are not written but keep their index).
        delay_secs: seconds to wait before each piece except the first.
        pauses: ``{piece_index: seconds}`` waited before that piece, in addition to
            ``delay_secs`` (index 0 waits between the headers and the first piece).
        header_delay_secs: seconds to wait after reading the request, before the status line.
        framing: ``"chunked"``, ``"length"`` or ``"close"`` (see the module docstring).
        hold_open: after the pieces, do not end the body; keep the socket open until the client
            closes it or the server stops. Not with ``framing="length"``.
        abort: after the pieces, close the socket without ending the body: a chunked body
            misses its last chunk; a ``"length"`` body advertises one byte more than it sends.
    """

    body: bytes = b""
    status: int = 200
    content_type: str = "text/event-stream"
    headers: Mapping[str, str] = field(default_factory=dict)
    cuts: Sequence[int] = ()
    delay_secs: float = 0.0
    pauses: Mapping[int, float] = field(default_factory=dict)
    header_delay_secs: float = 0.0
    framing: Framing = "chunked"
    hold_open: bool = False
    abort: bool = False

    def __post_init__(self) -> None:
        if self.hold_open and self.abort:
            raise ValueError("hold_open and abort exclude each other")
        if self.hold_open and self.framing == "length":
            raise ValueError("hold_open needs framing 'chunked' or 'close'")

    @classmethod
    def json(cls, obj: Any, *, status: int = 200, **kwargs: Any) -> Reply:
        """A JSON answer (``application/json``), e.g. a blocking completion or an error body."""
        body = json.dumps(obj).encode()
        return cls(body=body, status=status, content_type="application/json", **kwargs)

    @classmethod
    def fixture(cls, path: Path, **kwargs: Any) -> Reply:
        """A recorded body served with its real Content-Type (by suffix)."""
        kwargs.setdefault("content_type", content_type_for(path))
        return cls(body=path.read_bytes(), **kwargs)

    @classmethod
    def stall(cls, *, content_type: str = "text/event-stream", **kwargs: Any) -> Reply:
        """Status line and headers, then no body byte; the socket stays open."""
        return cls(body=b"", content_type=content_type, hold_open=True, **kwargs)

    def pieces(self) -> list[bytes]:
        """``body`` split at ``cuts``; empty pieces kept so piece indices match ``pauses``."""
        bounds = sorted({min(max(c, 0), len(self.body)) for c in self.cuts})
        out: list[bytes] = []
        start = 0
        for cut in bounds:
            out.append(self.body[start:cut])
            start = cut
        out.append(self.body[start:])
        return out


@dataclass
class RecordedRequest:
    """One request as the server received it.

    Attributes:
        method: ``"POST"``, ``"GET"``...
        path: the path without the query string.
        query: the raw query string (``""`` when none).
        headers: header names lower-cased; a repeated header keeps its last value.
        body: the raw request body.
        json: the body parsed as JSON, or ``None`` when empty or not JSON.
        received_at: ``time.monotonic()`` (seconds) when the request was read completely.
        ended_at: ``time.monotonic()`` when serving it ended (``None`` while serving).
        client_closed: the client closed the connection before the reply was finished
            (always the case for ``hold_open`` replies the client abandons).
        ended: set when serving it ended; see :meth:`wait_ended`.
    """

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    json: Any
    received_at: float
    ended_at: float | None = None
    client_closed: bool = False
    ended: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    async def wait_ended(self) -> None:
        """Wait until serving this request ended (reply finished, aborted, or client gone)."""
        await self.ended.wait()

    def form(self) -> dict[str, FormPart]:
        """A ``multipart/form-data`` body (RFC 7578) by part name, e.g. the ``file``, ``model``
        of ``POST /v1/audio/transcriptions``. Raises ``ValueError`` for another body."""
        content_type = self.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            raise ValueError(f"not a multipart/form-data body: {content_type!r}")
        head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1")
        message = BytesParser(policy=email.policy.HTTP).parsebytes(head + self.body)
        parts: dict[str, FormPart] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            parts[str(name)] = FormPart(
                payload if isinstance(payload, bytes) else b"",
                part.get_filename(),
                part.get_content_type(),
            )
        return parts


@dataclass(frozen=True)
class FormPart:
    """One part of a multipart form: its bytes, file name (``None`` for a plain field) and
    content type."""

    data: bytes
    filename: str | None
    content_type: str

    @property
    def text(self) -> str:
        return self.data.decode()


class _Script:
    def __init__(self, replies: list[Reply], repeat_last: bool) -> None:
        self.replies = replies
        self.repeat_last = repeat_last
        self.served = 0

    def next(self) -> Reply:
        index = self.served
        self.served += 1
        if index < len(self.replies):
            return self.replies[index]
        if self.repeat_last and self.replies:
            return self.replies[-1]
        return Reply(
            body=b"no scripted reply left", status=500, content_type="text/plain; charset=utf-8"
        )


class _ClientGone(Exception):
    """The client closed the connection while we were writing or waiting."""


class ProviderServer:
    """Scripted HTTP/1.1 server on 127.0.0.1, an async context manager.

    Args:
        tls: serve HTTPS with this server context (its certificate must name 127.0.0.1).

    Attributes:
        url: ``http://127.0.0.1:<port>`` (``https://`` with ``tls``; no trailing slash), set on
            entry.
        requests: every request received, in order.
    """

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.url = ""
        self._tls = tls
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str, _Script] = {}
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    def script(
        self, path: str, replies: Reply | Iterable[Reply], *, repeat_last: bool = True
    ) -> None:
        """Queue ``replies`` for requests to ``path`` (replacing any earlier script for it).

        Args:
            path: the request path to match exactly, query string ignored (``"/v1/x"``).
            replies: one reply or a sequence, served one per request in order.
            repeat_last: when exhausted, repeat the last reply; if False answer 500.
        """
        queue = [replies] if isinstance(replies, Reply) else list(replies)
        self._scripts[path] = _Script(queue, repeat_last)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The recorded requests whose path is ``path``."""
        return [r for r in self.requests if r.path == path]

    async def __aenter__(self) -> ProviderServer:
        self._server = await asyncio.start_server(
            self._on_connection, "127.0.0.1", 0, ssl=self._tls
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self._tls else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop listening, close every connection and wait for their handlers to end."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    # -- connection handling ---------------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            await self._serve_connection(reader, writer)
        except asyncio.CancelledError:
            # Only aclose() cancels a handler, and it awaits it. Ending normally matters: the
            # done-callback of asyncio.start_server in Python 3.11 calls task.exception() and
            # logs a cancelled handler as an error (fixed in 3.12).
            pass

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # owned by the server: cancelled and awaited in aclose()
        self._writers.add(writer)
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    return
                self.requests.append(request)
                script = self._scripts.get(request.path)
                reply = (
                    script.next()
                    if script is not None
                    else Reply(body=b"not scripted", status=404, content_type="text/plain")
                )
                try:
                    keep_alive = await self._send_reply(reply, reader, writer)
                except _ClientGone:
                    request.client_closed = True
                    return
                finally:
                    request.ended_at = time.monotonic()
                    request.ended.set()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._tasks.discard(task)

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None  # the client closed an idle keep-alive connection
        except asyncio.LimitOverrunError as exc:
            raise ConnectionError("request head too large") from exc
        if len(head) > _MAX_HEAD_BYTES:
            raise ConnectionError("request head too large")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await _read_chunked(reader)
        else:
            body = await reader.readexactly(int(headers.get("content-length", "0")))
        parts = urlsplit(target)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        return RecordedRequest(
            method=method,
            path=parts.path,
            query=parts.query,
            headers=headers,
            body=body,
            json=parsed,
            received_at=time.monotonic(),
        )

    async def _send_reply(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Write ``reply``; True when the connection may serve another request."""
        if reply.header_delay_secs:
            await _sleep_or_gone(reply.header_delay_secs, reader)
        head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
        if reply.content_type:
            head.append(f"Content-Type: {reply.content_type}")
        if reply.framing == "chunked":
            head.append("Transfer-Encoding: chunked")
        elif reply.framing == "length":
            length = len(reply.body) + (1 if reply.abort else 0)
            head.append(f"Content-Length: {length}")
        else:
            head.append("Connection: close")
        head.extend(f"{name}: {value}" for name, value in reply.headers.items())
        await _write(writer, ("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))

        for index, piece in enumerate(reply.pieces()):
            wait = reply.pauses.get(index, 0.0) + (reply.delay_secs if index else 0.0)
            if wait:
                await _sleep_or_gone(wait, reader)
            if not piece:
                continue
            if reply.framing == "chunked":
                piece = b"%x\r\n%s\r\n" % (len(piece), piece)
            await _write(writer, piece)

        if reply.hold_open:
            await _wait_gone(reader)
            raise _ClientGone
        if reply.abort:
            _abort(writer)
            return False
        if reply.framing == "chunked":
            await _write(writer, b"0\r\n\r\n")
        return reply.framing != "close"


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def _write(writer: asyncio.StreamWriter, data: bytes) -> None:
    if writer.is_closing():
        raise _ClientGone
    writer.write(data)
    try:
        await writer.drain()
    except ConnectionError as exc:
        raise _ClientGone from exc


async def _wait_gone(reader: asyncio.StreamReader) -> None:
    """Wait until the client closes the connection (anything it sends meanwhile is dropped)."""
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass


async def _sleep_or_gone(seconds: float, reader: asyncio.StreamReader) -> None:
    """Sleep ``seconds``; raise :class:`_ClientGone` if the client closes meanwhile."""
    gone = asyncio.ensure_future(_wait_gone(reader))
    try:
        done, _ = await asyncio.wait({gone}, timeout=seconds)
    finally:
        if not gone.done():
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone
    if done:
        raise _ClientGone


def _abort(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    transport.abort()
