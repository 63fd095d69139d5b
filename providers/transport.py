"""HTTP transport shared by the providers: timeouts, the pool and the mapping of failures.

Theory of operation
-------------------
architecture §2 "Timeouts": connecting is bounded by 10 s; waiting for the response headers and
reading an error body are bounded by ``timeout_secs``; the body of a stream is bounded by a
*byte-idle* timeout (``stream_idle_timeout_secs``) that every read resets (every network read that
returned bytes, chunked framing included, where the body is read from h11), so a long answer that
keeps arriving is never cut by a total deadline. httpx's own read timeout would also bound the
headers by the idle value, so we give httpx no read timeout and apply both bounds ourselves.

The idle bound is one watchdog per stream (:class:`IdleWatchdog`), not a cancel scope per read:
a read only stores the loop's time; one timer per idle period compares that time with the bound
and, when it is exceeded while a read is waiting, cancels the reading task, which the read turns
into :class:`providers.errors.ProviderTimeout` (phase ``"idle"``). A scope per read cost more
than the whole decode (bench/README.md).

The pool (:mod:`providers.pool`) holds ``max_connections`` connections per provider (default
1000, architecture §2), with bookkeeping per request instead of httpcore's scan of every
connection, and waiting for one is unbounded: it is not the model's time. The headers bound
starts when the connection is acquired (httpcore's first trace event), so a queued request is
never "the model did not answer in time"; an httpx ``PoolTimeout`` from a client with a pool
bound is a :class:`providers.errors.ProviderConnectionError`, not a timeout.

Every httpx exception is translated once, here, with ``raise ... from exc``.
The watchdog needs the asyncio event loop (uvloop included), the loop relaybot runs on.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import socket
import ssl
import time
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpcore
import httpx

from providers.bounded_json import parse_json
from providers.error_events import special_error
from providers.errors import (
    ConnectionReason,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    StreamProtocolError,
    snippet,
)
from providers.h11_body import h11_body
from providers.net_backend import AsyncioBackend
from providers.pool import ConnectionPool

__all__ = [
    "CONNECT_TIMEOUT_SECS",
    "DEFAULT_MAX_CONNECTIONS",
    "BodyStream",
    "IdleWatchdog",
    "connection_error",
    "error_from_status",
    "is_json_media_type",
    "make_client",
    "open_stream",
    "parse_retry_after",
    "post_json",
]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECS = 10.0
"""Connect timeout in seconds (architecture §2)."""


DEFAULT_MAX_CONNECTIONS = 1000
"""Connections per provider's pool when the config sets none (architecture §2)."""

MAX_KEEPALIVE_CONNECTIONS = 20
"""Idle connections httpcore's own pool keeps for reuse (httpx's default), where that pool is
used: HTTP/2, or an httpx whose pool cannot be replaced. It looks at every connection for each
idle one whenever a request starts or ends, so a thousand idle connections would cost a million
checks per request. :class:`providers.pool.ConnectionPool` keeps every idle connection for its
keep-alive: it never scans them."""


def make_client(
    base_url: str | None = None,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    network_backend: httpcore.AsyncNetworkBackend | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """An httpx client with the connect bound only; reads are bounded by our watchdog and scopes.

    The pool (:class:`providers.pool.ConnectionPool`) holds up to ``max_connections``
    connections, idle ones kept alive between replies for httpx's 5 s; waiting for one is
    unbounded. Its sockets are :class:`providers.net_backend.AsyncioBackend`'s unless
    ``network_backend`` says otherwise (httpcore's ``AnyIOBackend()`` is httpx's own choice).
    TLS verifies with ``ssl_context``, by default httpx's.

    The environment is honoured as the openai and anthropic SDKs honour it (their clients are
    ``httpx.AsyncClient`` with httpx's default ``trust_env=True``): ``HTTPS_PROXY``,
    ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` choose the proxy per URL (a proxied URL goes
    through httpx's own proxy transport), and ``SSL_CERT_FILE``/``SSL_CERT_DIR`` the CA
    certificates (architecture §2 "Wire formats").
    """
    timeout = httpx.Timeout(connect=CONNECT_TIMEOUT_SECS, read=None, write=60.0, pool=None)
    limits = httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=min(max_connections, MAX_KEEPALIVE_CONNECTIONS),
    )
    client = httpx.AsyncClient(
        timeout=timeout, limits=limits, base_url=base_url or "", trust_env=True
    )
    _use_backend(client, limits, network_backend or AsyncioBackend(), ssl_context)
    return client


def _use_backend(
    client: httpx.AsyncClient,
    limits: httpx.Limits,
    backend: httpcore.AsyncNetworkBackend,
    ssl_context: ssl.SSLContext | None,
) -> bool:
    """Give the direct (unproxied) transport of ``client`` a pool on ``backend``; proxied
    URLs keep httpx's proxy transports. False, and a warning, when this httpx does not hold
    its pool where 0.27/0.28 do (``AsyncHTTPTransport._pool``, an httpcore pool): httpx takes
    no network backend, so this reaches into it, and a later httpx that moved it keeps its
    own pool and backend (slower, the same behaviour) instead of failing."""
    direct = getattr(client, "_transport", None)
    pool = getattr(direct, "_pool", None)
    if not isinstance(direct, httpx.AsyncHTTPTransport) or not isinstance(
        pool, httpcore.AsyncConnectionPool
    ):
        log.warning(
            "httpx %s keeps its connection pool elsewhere: its own network backend is used",
            httpx.__version__,
        )
        return False
    settings: dict[str, Any] = dict(  # the same settings, our sockets
        ssl_context=ssl_context or getattr(pool, "_ssl_context", None),
        max_connections=limits.max_connections,
        keepalive_expiry=limits.keepalive_expiry,
        http1=getattr(pool, "_http1", True),
        retries=getattr(pool, "_retries", 0),
        network_backend=backend,
    )
    if getattr(pool, "_http2", False):  # several requests per connection: httpcore's pool
        direct._pool = httpcore.AsyncConnectionPool(
            **settings, http2=True, max_keepalive_connections=limits.max_keepalive_connections
        )
    else:  # idle connections cost nothing there: all may stay for their keep-alive
        direct._pool = ConnectionPool(**settings, max_keepalive_connections=limits.max_connections)
    return True


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` (RFC 9110 §10.2.3) as seconds: delta-seconds or an HTTP-date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_fields(body: bytes) -> tuple[str | None, str | None, Any]:
    """(code, message, parsed) from an error body of any of the four APIs."""
    try:
        parsed = parse_json(body, what="error body")
    except StreamProtocolError:
        text = body.decode("utf-8", "replace").strip()
        return None, snippet(text, 300) or None, None
    err: Any = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict):
        code = err.get("type") or err.get("code")
        return (str(code) if code else None), err.get("message"), parsed
    if isinstance(err, str):  # Ollama: {"error": "..."}
        return None, err, parsed
    return None, None, parsed


def error_from_status(
    status: int, body: bytes, headers: httpx.Headers | None = None
) -> ProviderError:
    """Map a non-2xx answer to a typed error (architecture §2 "Failures").

    The codes of the body are read first (:func:`providers.error_events.special_error`):
    ``model_not_found`` or a 404 whose message names a model → :class:`ModelNotFound` (OpenAI,
    Ollama ``model "x" not found``, Anthropic ``not_found_error`` ``model: x``); quota or billing
    (``insufficient_quota``, ``billing_error``, HTTP 402, Anthropic's "credit balance is too
    low") → :class:`QuotaExhausted`. Then by status: 401/403 auth, 429 rate limited (with
    ``Retry-After``), 5xx or a server error code, any other 4xx a bad request.
    """
    code, message, parsed = _error_fields(body)
    text = f"HTTP {status}" + (f": {message}" if message else "")
    codes = _all_codes(parsed, code)
    special = special_error(codes, message, text, status=status)
    if special is not None:
        return special
    if status in (401, 403):
        return ProviderAuthError(text, status_code=status, code=code)
    if status == 429:
        retry_after = parse_retry_after(headers.get("retry-after") if headers else None)
        return ProviderRateLimited(text, retry_after=retry_after, status_code=status, code=code)
    if status >= 500 or code in ("overloaded_error", "server_error", "api_error"):
        return ProviderServerError(text, status_code=status, code=code)
    return ProviderBadRequest(text, status_code=status, code=code)


def _all_codes(parsed: Any, code: str | None) -> tuple[str, ...]:
    """Every code string of an error body: ``error.type`` and ``error.code`` (OpenAI sends
    ``invalid_request_error`` as the type and ``model_not_found`` as the code)."""
    found = [code] if code else []
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict):
        found += [v for v in (err.get("type"), err.get("code")) if isinstance(v, str) and v]
    return tuple(found)


def connection_error(url: str, exc: BaseException) -> ProviderConnectionError:
    """Type a transport failure: an httpx ``ConnectError`` by the OS error beneath it
    (``refused``, ``dns``, ``tls``, else ``other``), any other transport error as ``broken``
    (the connection was made, then closed or broke). ``host`` is the URL's ``host:port``."""
    parts = httpx.URL(url)
    host = f"{parts.host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    reason: ConnectionReason = "other"
    if isinstance(exc, httpx.ConnectError):
        reason = _connect_reason(exc)
    elif isinstance(exc, (httpx.TransportError, httpcore.NetworkError, httpcore.ProtocolError)):
        reason = "broken"
    words = {
        "refused": "connection refused by",
        "dns": "the name does not resolve:",
        "tls": "TLS handshake failed with",
        "broken": "connection broke with",
        "other": "could not connect to",
    }[reason]
    return ProviderConnectionError(f"{words} {host}: {exc!r}", host=host, reason=reason)


def _connect_reason(exc: BaseException) -> ConnectionReason:
    """Why a connect failed, from the exceptions chained beneath it."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLError):
            return "tls"
        if isinstance(cause, socket.gaierror):
            return "dns"
        if isinstance(cause, ConnectionRefusedError) or (
            isinstance(cause, OSError) and "Errno 111" in str(cause)  # several addresses
        ):
            return "refused"
        if "TLS handshake" in str(cause) or "SSL" in str(cause):
            return "tls"
        if "Name or service not known" in str(cause) or "getaddrinfo" in str(cause):
            return "dns"
        if "Connection refused" in str(cause) or "Errno 111" in str(cause):
            return "refused"
        cause = cause.__cause__ or cause.__context__
    return "other"


class IdleWatchdog:
    """The byte-idle bound of one stream: one timer per idle period, not one scope per read.

    Call :meth:`reading` right before awaiting a read and :meth:`read_done` after it (both
    cheap: a clock read and a flag), and :meth:`bytes_arrived` whenever bytes came in during a
    read that hands nothing on yet (chunked framing: a size line, a trailer). When
    ``idle_secs`` seconds pass after a read started, or after its latest bytes, and it is
    still waiting, the timer cancels the reading task; :meth:`expired_by` tells the read
    that the ``CancelledError`` it caught was the watchdog's (and clears that cancellation), so
    it can raise the timeout instead. A cancellation from anywhere else is never taken for it.
    While the consumer works between reads nothing is bounded. :meth:`stop` cancels the timer.
    """

    __slots__ = ("_expired", "_handle", "_idle", "_last", "_loop", "_reading", "_task")

    def __init__(self, idle_secs: float) -> None:
        self._idle = idle_secs
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._reading = False
        self._expired = False
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.TimerHandle | None = None
        if math.isfinite(idle_secs):
            self._handle = self._loop.call_at(self._last + idle_secs, self._check)

    def reading(self) -> None:
        """A read is about to be awaited by the current task."""
        self._last = self._loop.time()
        self._reading = True
        if self._task is None:
            self._task = asyncio.current_task()

    def read_done(self) -> None:
        """The read returned (or raised)."""
        self._reading = False

    def bytes_arrived(self) -> None:
        """Bytes came in during the read being awaited: the idle period starts again."""
        self._last = self._loop.time()

    def expired_by(self) -> bool:
        """True when the ``CancelledError`` being handled is the watchdog's alone.

        Then that cancellation is withdrawn (``Task.uncancel``); when another one is also
        pending, it stays and this returns False, so the caller re-raises it.
        """
        if not self._expired or self._task is None:
            return False
        self._expired = False
        return self._task.uncancel() == 0

    def stop(self) -> None:
        """Cancel the timer (idempotent)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _check(self) -> None:
        now = self._loop.time()
        due = self._last + self._idle
        if not self._reading:
            # The consumer is busy between reads: the next read, whenever it starts, is due
            # no earlier than one bound from now.
            self._handle = self._loop.call_at(now + self._idle, self._check)
        elif now >= due - 1e-3 and self._task is not None:
            self._handle = None
            self._expired = True
            self._task.cancel()
        else:  # a read started after the timer was set: look again when it is due
            self._handle = self._loop.call_at(due, self._check)


try:  # the layers a streamed httpx 0.28 response reads through (private: checked, not assumed)
    from httpcore._async.http11 import HTTP11ConnectionByteStream
    from httpx._client import BoundAsyncStream
    from httpx._transports.default import AsyncResponseStream
except ImportError:  # pragma: no cover - another httpx or httpcore layout: read through httpx
    HTTP11ConnectionByteStream = BoundAsyncStream = AsyncResponseStream = None  # type: ignore[assignment,misc]

_HTTPCORE_READ_ERRORS = (httpcore.NetworkError, httpcore.ProtocolError, httpcore.TimeoutException)


def _connection_body(response: httpx.Response) -> AsyncIterable[bytes] | None:
    """The HTTP/1.1 connection's body stream under httpx's and httpcore's pass-through layers,
    or ``None`` when the layers are not the known ones (then httpx's ``aiter_raw`` is used).

    Each streamed piece passes through four async generators between httpcore's connection and
    ``aiter_raw`` that only forward it (httpx's response and transport streams, httpcore's pool
    stream; httpx's exception mapping, done here instead). Reading the connection's stream
    directly saves their four resumptions per piece; closing still goes through
    ``response.aclose()``, which returns the connection to the pool as before."""
    bound = response.stream
    if BoundAsyncStream is None or type(bound) is not BoundAsyncStream:
        return None
    transport_stream = getattr(bound, "_stream", None)
    if type(transport_stream) is not AsyncResponseStream:
        return None
    pool_stream = getattr(transport_stream, "_httpcore_stream", None)
    connection_stream = getattr(pool_stream, "_stream", None)
    if type(connection_stream) is not HTTP11ConnectionByteStream:
        return None
    return connection_stream


def is_json_media_type(content_type: str | None) -> bool:
    """True for ``application/json`` and ``application/*+json`` (parameters ignored):
    a body that is one JSON value, not a stream of them (``application/x-ndjson`` is not).

    >>> is_json_media_type("application/json; charset=utf-8")
    True
    >>> is_json_media_type("application/x-ndjson")
    False
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


class BodyStream:
    """The body of a 2xx streaming response, read under the byte-idle bound (seconds).

    Attributes:
        whole_json: the server answered with one JSON body (``Content-Type:
            application/json``) instead of a stream: it ignored ``stream: true``
            (architecture §2 "A server that does not stream"). Read once, from the headers.
    """

    def __init__(self, response: httpx.Response, idle_timeout_secs: float) -> None:
        self._response = response
        self._idle = idle_timeout_secs
        self.whole_json = is_json_media_type(response.headers.get("content-type"))

    def _pieces(self, watchdog: IdleWatchdog) -> AsyncIterator[bytes]:
        """The body's pieces, from the shallowest layer that serves them.

        Without a content coding the raw bytes are the body: skip httpx's decoder layer, and
        where the layers are the known ones, httpx's and httpcore's wrappers too; there every
        network read resets ``watchdog``, framing bytes included. Through httpx, only a read
        that hands data on does."""
        response = self._response
        coding = response.headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("", "identity"):
            return response.aiter_bytes()
        raw = _connection_body(response)
        if raw is None:
            return response.aiter_raw()
        return h11_body(raw, watchdog.bytes_arrived) or raw.__aiter__()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        watchdog = IdleWatchdog(self._idle)
        try:
            read = self._pieces(watchdog).__anext__
            while True:
                watchdog.reading()
                try:
                    chunk = await read()
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if watchdog.expired_by():
                        raise ProviderTimeout(
                            f"no bytes for {self._idle:g} s (stream_idle_timeout_secs)",
                            phase="idle",
                        ) from None
                    raise
                except (httpx.TransportError, *_HTTPCORE_READ_ERRORS) as exc:
                    raise ProviderConnectionError(
                        f"connection broke while reading: {exc!r}", reason="broken"
                    ) from exc
                except httpx.DecodingError as exc:  # e.g. a corrupt gzip body
                    raise StreamProtocolError(f"the body could not be decoded: {exc}") from exc
                finally:
                    watchdog.read_done()
                if chunk:
                    yield chunk
        finally:
            watchdog.stop()


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient,
    url: str,
    *,
    json_body: dict[str, Any],
    headers: dict[str, str],
    timeout_secs: float,
    idle_timeout_secs: float,
) -> AsyncIterator[BodyStream]:
    """POST ``json_body`` and yield the 2xx body as a :class:`BodyStream`.

    ``timeout_secs`` bounds the headers from the moment a pooled connection is acquired (the
    wait for one is not bounded here), then the error body of a non-2xx answer.

    Raises:
        ProviderTimeout: connect (10 s) or headers/error body (``timeout_secs``) took too long.
        ProviderConnectionError: could not connect, or a pool bound of the client ran out.
        ProviderError: a typed error for a non-2xx answer (see :func:`error_from_status`).
    """
    request = client.build_request("POST", url, json=json_body, headers=headers)
    scope = anyio.CancelScope()
    acquired = False

    async def on_trace(name: str, info: dict[str, Any]) -> None:
        # httpcore's first event (connect or send headers) comes once a pooled connection is
        # ours: the headers bound starts there, so waiting in the pool is not counted.
        nonlocal acquired
        if not acquired:
            acquired = True
            scope.deadline = anyio.current_time() + timeout_secs
            # The one event needed: httpcore reads the extension per phase, so the request's
            # other dozen phases (send, receive, close) call nothing.
            extensions.pop("trace", None)

    extensions = request.extensions
    extensions["trace"] = on_trace
    if not isinstance(getattr(client, "_transport", None), httpx.AsyncHTTPTransport):
        # Not httpcore (a mounted or mock transport): no trace events, bound from now.
        scope.deadline = anyio.current_time() + timeout_secs
    try:
        with scope:
            response = await client.send(request, stream=True)
    except httpx.PoolTimeout as exc:
        raise ProviderConnectionError(f"no free connection to {url}: {exc!r}") from exc
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(f"connect timed out: {exc!r}", phase="connect") from exc
    except httpx.TransportError as exc:
        raise connection_error(url, exc) from exc
    if scope.cancelled_caught:
        raise ProviderTimeout(f"no response headers within {timeout_secs:g} s", phase="headers")
    try:
        if response.status_code >= 300:
            try:
                with anyio.fail_after(timeout_secs):
                    body = await response.aread()
            except (TimeoutError, httpx.TransportError, httpx.DecodingError):
                body = b""
            raise error_from_status(response.status_code, body, response.headers)
        yield BodyStream(response, idle_timeout_secs)
    finally:
        await response.aclose()


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    json_body: dict[str, Any],
    headers: dict[str, str],
    timeout_secs: float,
) -> Any:
    """A blocking POST bounded as a whole by ``timeout_secs``; returns the parsed JSON body.

    Raises:
        ProviderTimeout, ProviderConnectionError, ProviderError: as :func:`open_stream`;
        ProviderServerError when a 2xx body is not JSON; StreamProtocolError when it is larger
        than 8 MiB or nested deeper than 256 levels (:mod:`providers.bounded_json`).
    """
    try:
        with anyio.fail_after(timeout_secs):
            response = await client.post(url, json=json_body, headers=headers)
    except TimeoutError as exc:
        raise ProviderTimeout(f"no answer within {timeout_secs:g} s", phase="total") from exc
    except httpx.PoolTimeout as exc:
        raise ProviderConnectionError(f"no free connection to {url}: {exc!r}") from exc
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(f"connect timed out: {exc!r}", phase="connect") from exc
    except httpx.TransportError as exc:
        raise connection_error(url, exc) from exc
    except httpx.DecodingError as exc:  # e.g. a corrupt gzip body
        raise StreamProtocolError(f"the answer could not be decoded: {exc}") from exc
    if response.status_code >= 300:
        raise error_from_status(response.status_code, response.content, response.headers)
    try:
        return parse_json(response.content, what="answer")
    except StreamProtocolError as exc:
        if isinstance(exc.__cause__, ValueError):  # not JSON at all (not a bound crossed)
            raise ProviderServerError(exc.message) from exc
        raise
