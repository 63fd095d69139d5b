"""HTTP transport shared by the providers: the client, its timeouts, and the failures typed.

Theory of operation
-------------------
A provider's client is an ``httpx.AsyncClient`` (httpx's API, as the vendor SDKs use) whose
transport is aiohttp's: ``httpx_aiohttp.AiohttpTransport`` over one ``aiohttp.ClientSession``
made here. aiohttp parses HTTP/1.1 in C, chunked framing included, and bounds reads per socket
read; everything is reached through the public interfaces of httpx, httpx-aiohttp and aiohttp
(a test checks that no module imports a private name of httpx or httpcore). The choice was
measured against the previous transport (httpcore's connections under a pool and network
backend of our own): bench/README.md.

architecture §2 "Timeouts": connecting is bounded by 10 s (aiohttp's ``sock_connect``); waiting
for the response headers is bounded by ``timeout_secs`` from the moment a pooled connection is
ours (aiohttp's trace events ``on_connection_create_start`` / ``on_connection_reuseconn``, told
to the request through a context variable; httpcore's ``trace`` extension for a proxied
request), so a request queued for a connection is never "the model did not answer in time";
reading an error body is bounded by ``timeout_secs``. The body of a stream is bounded by a
*byte-idle* timeout (``stream_idle_timeout_secs``) that every read that brought data resets, so
a long answer that keeps arriving is never cut by a total deadline. No read timeout is given to
the client: it would bound the headers by the idle value too.

A streaming body is read from aiohttp's own reader (``ClientResponse.content``, at most
:data:`READ_BYTES` a read), the response reached through aiohttp's public ``on_request_end``
trace event, not through httpx's byte-stream layers, which add nothing for a body without a
content coding (httpx decodes one that has one). The same response's connection lends its
transport to :meth:`BodyStream.held`: while the reader paces its reads (architecture §5 "Read
pacing") the socket is not read, so a burst the model sends meanwhile costs one ``recv`` later,
not a wakeup of the loop per packet.

The idle bound is one watchdog per stream (:class:`IdleWatchdog`), not a timer per read: a read
only stores the loop's time; one timer per idle period compares that time with the bound and,
when it is exceeded while a read is waiting, cancels the reading task, which the read turns into
:class:`providers.errors.ProviderTimeout` (phase ``"idle"``). aiohttp's own per-read bound
(``sock_read``) re-arms a timer on every received packet, and it is dropped, leaving the read
waiting for good, when aiohttp's parser meets broken chunked framing after the first read
(aiohttp 3.14): the watchdog ends such a stream at the bound. Framing bytes (a chunk's size
line) are parsed inside aiohttp and do not reset the bound; data does.

The pool (aiohttp's ``TCPConnector``) holds ``max_connections`` connections per provider (default
1000, architecture §2); waiting for one is unbounded: it is not the model's time, and it is
counted and logged (:mod:`providers.pool_queue`). Idle
connections are kept alive for httpx's 5 s.

The environment is read as httpx reads it when it builds its own transport (as the openai and
anthropic SDKs do): ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` choose a
proxy per URL (:func:`environment_mounts`; a proxied URL goes through httpx's own proxy
transport, where the byte-idle bound is httpcore's per-read timeout), ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` the CA certificates (``httpx.create_ssl_context``).

Every exception of the client is translated once, with ``raise ... from exc``, by the table of
:mod:`providers.transport_errors`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from contextvars import ContextVar
from functools import lru_cache, partial
from types import SimpleNamespace
from typing import Any
from urllib.request import getproxies

import aiohttp
import anyio
import httpx
from httpx_aiohttp import AiohttpTransport

from providers.bounded_json import parse_json
from providers.errors import (
    ProviderServerError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.pool_queue import PoolQueue, watching
from providers.status_errors import error_from_status, is_json_media_type
from providers.transport_errors import Phase, Where, connection_error, provider_error

__all__ = [
    "CONNECT_TIMEOUT_SECS",
    "DEFAULT_MAX_CONNECTIONS",
    "KEEPALIVE_SECS",
    "BodyStream",
    "IdleWatchdog",
    "ProviderClient",
    "connection_error",
    "environment_mounts",
    "make_client",
    "open_stream",
    "post_json",
]

CONNECT_TIMEOUT_SECS = 10.0
"""Connect timeout in seconds (architecture §2)."""

DEFAULT_MAX_CONNECTIONS = 1000
"""Connections per provider's pool when the config sets none (architecture §2)."""

KEEPALIVE_SECS = 5.0
"""How long an idle connection is kept for the next request, in seconds (httpx's default)."""

READ_BYTES = 16 * 1024
"""The most one read of a body takes (bytes), as httpx-aiohttp's own reads of it."""

WRITE_TIMEOUT_SECS = 60.0
"""Bound on sending a request body, in seconds (httpx's proxy transport; aiohttp has none)."""

_acquired: ContextVar[Callable[[], None] | None] = ContextVar("acquired", default=None)
"""Called by the pool's trace events once the current request holds a connection."""
_answered: ContextVar[list[aiohttp.ClientResponse] | None] = ContextVar("answered", default=None)
"""Where aiohttp's ``on_request_end`` trace event puts the current request's response."""


class ProviderClient(httpx.AsyncClient):
    """The client :func:`make_client` makes: an ``httpx.AsyncClient`` whose transports report
    when a request's connection is acquired (so the headers bound starts there).

    Attributes:
        max_connections: the most connections its pool holds.
        pool_queue: the requests waiting for one of them (counts, logged).
    """

    max_connections: int
    pool_queue: PoolQueue


async def _on_connection(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: object
) -> None:
    """aiohttp's trace callback: a connection is being made or was taken from the pool."""
    acquired = _acquired.get()
    if acquired is not None:
        acquired()


async def _on_request_end(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestEndParams
) -> None:
    """aiohttp's trace callback: the response headers arrived; the response is kept for its
    :class:`BodyStream` (read from aiohttp's own body reader, its socket held while paced)."""
    found = _answered.get()
    if found is not None:
        found.append(params.response)


def _session_factory(
    max_connections: int, ssl_context: ssl.SSLContext, queue: PoolQueue
) -> Callable[[], aiohttp.ClientSession]:
    """Makes the aiohttp session when the first request needs it (inside the event loop)."""

    def session() -> aiohttp.ClientSession:
        trace = aiohttp.TraceConfig()
        trace.on_connection_create_start.append(_on_connection)
        trace.on_connection_reuseconn.append(_on_connection)
        trace.on_request_end.append(_on_request_end)
        queue.trace(trace)
        connector = aiohttp.TCPConnector(
            limit=max_connections,
            limit_per_host=0,
            keepalive_timeout=KEEPALIVE_SECS,
            ssl=ssl_context,
        )
        return aiohttp.ClientSession(
            connector=connector,
            trace_configs=[trace],
            trust_env=False,  # the environment's proxies are httpx's mounts
            auto_decompress=False,  # httpx decodes content codings
            timeout=aiohttp.ClientTimeout(total=None),
        )

    return session


def environment_mounts(
    limits: httpx.Limits, ssl_context: ssl.SSLContext
) -> dict[str, httpx.AsyncBaseTransport | None]:
    """The proxy transports the environment asks for, as httpx's client mounts them when it
    builds its own transport (``httpx._utils.get_environment_proxies``, 0.28): ``HTTP_PROXY``,
    ``HTTPS_PROXY`` and ``ALL_PROXY`` mount a proxy on ``http://``, ``https://``, ``all://``;
    each ``NO_PROXY`` entry mounts none on its hosts (``*``: no proxy at all; ``example.com``
    also matches its subdomains, ``.example.com`` only them)."""
    found = getproxies()
    patterns: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if found.get(scheme):
            url = found[scheme]
            patterns[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    for host in (entry.strip() for entry in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if not host:
            continue
        if "://" in host:
            patterns[host] = None
        elif _is_ip(host) or host.lower() == "localhost":
            patterns[f"all://[{host}]" if ":" in host else f"all://{host}"] = None
        else:
            patterns[f"all://*{host}"] = None
    return {
        pattern: None
        if url is None
        else httpx.AsyncHTTPTransport(proxy=httpx.Proxy(url), verify=ssl_context, limits=limits)
        for pattern, url in patterns.items()
    }


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("/", 1)[0])
    except ValueError:
        return False
    return True


def make_client(
    base_url: str | None = None,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ssl_context: ssl.SSLContext | None = None,
    name: str = "",
) -> ProviderClient:
    """A provider's client (see the module docstring): aiohttp's transport, a pool of
    ``max_connections`` connections (waiting for one is unbounded), the connect bound only
    (the other bounds come with each request), the environment's proxies and CA certificates.
    TLS verifies with ``ssl_context``, by default httpx's (``SSL_CERT_FILE``/``SSL_CERT_DIR``,
    else certifi's). A request waiting for a connection is counted and logged
    (:class:`~providers.pool_queue.PoolQueue`, ``name`` in its log lines, else the URL)."""
    context = ssl_context or httpx.create_ssl_context(trust_env=True)
    limits = httpx.Limits(max_connections=max_connections, keepalive_expiry=KEEPALIVE_SECS)
    queue = PoolQueue(name or base_url or "(no name)", max_connections)
    transport = AiohttpTransport(
        verify=context, limits=limits, client=_session_factory(max_connections, context, queue)
    )
    client = ProviderClient(
        timeout=httpx.Timeout(
            connect=CONNECT_TIMEOUT_SECS, read=None, write=WRITE_TIMEOUT_SECS, pool=None
        ),
        base_url=base_url or "",
        transport=transport,
        mounts=environment_mounts(limits, context),
        trust_env=True,
    )
    client.max_connections = max_connections
    client.pool_queue = queue
    return client


class IdleWatchdog:
    """The byte-idle bound of one stream: one timer per idle period, not one scope per read.

    Call :meth:`reading` right before awaiting a read and :meth:`read_done` after it (both
    cheap: a clock read and a flag). When
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


@lru_cache(maxsize=256)
def _parsed_url(url: str) -> httpx.URL:
    """``url`` parsed once: httpx parses a ``str`` URL (in Python) on every request, and an
    ``httpx.URL`` (immutable) is taken as it is; a provider posts to one URL."""
    return httpx.URL(url)


def _translated(exc: Exception, url: str, phase: Phase, idle_secs: float = 0.0) -> Exception:
    """``exc`` as the provider error it is, or itself (re-raised as it is)."""
    return provider_error(exc, Where(url, phase, idle_secs)) or exc


class _Held:
    """:meth:`BodyStream.held`'s context manager: pauses ``transport`` when it is reading and
    not closing; on the way out resumes it, when the pause was its own and it is not closing."""

    __slots__ = ("_paused", "_transport")

    def __init__(self, transport: asyncio.ReadTransport | None) -> None:
        self._transport = transport
        self._paused = False

    def __enter__(self) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing() and transport.is_reading():
            transport.pause_reading()
            self._paused = True

    def __exit__(self, *exc_info: object) -> None:
        transport = self._transport
        if self._paused and transport is not None and not transport.is_closing():
            transport.resume_reading()


class BodyStream:
    """The body of a 2xx streaming response, read under the byte-idle bound (seconds).

    Attributes:
        whole_json: the server answered with one JSON body (``Content-Type:
            application/json``) instead of a stream: it ignored ``stream: true``
            (architecture §2 "A server that does not stream"). Read once, from the headers.
        paceable: a read takes all that arrived (up to :data:`READ_BYTES`; aiohttp's reader),
            not one HTTP chunk as httpx's own transports give (a proxied request), where a
            paced reader would fall one chunk a pause behind (architecture §5 "Read pacing").
    """

    def __init__(
        self,
        response: httpx.Response,
        url: str,
        idle_timeout_secs: float,
        answer: aiohttp.ClientResponse | None = None,
    ) -> None:
        self._response = response
        self._url = url
        self._idle = idle_timeout_secs
        self._answer = answer
        self.paceable = answer is not None
        self.whole_json = is_json_media_type(response.headers.get("content-type"))

    def held(self) -> AbstractContextManager[None]:
        """While inside, the connection's socket is not read (asyncio's
        ``ReadTransport.pause_reading``): what the server sends meanwhile waits in the kernel's
        buffer, and the first read after takes it in one ``recv`` and one parse of aiohttp's,
        instead of one wakeup of the loop per packet. Nothing is lost or reordered. A transport
        already paused (aiohttp's own flow control) or closing is left as it is, and only a
        pause made here is undone on the way out (cancellation included), so the connection
        goes back to the pool reading. Without a transport (a proxied request) it does nothing,
        nor once aiohttp has the whole body and gave the connection back to the pool, where
        another request may be using it (``ClientResponse.connection`` is ``None``). A plain
        context manager (no generator per pause: it is entered before every paced read).
        """
        connection = None if self._answer is None else self._answer.connection
        return _Held(None if connection is None else connection.transport)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive: the raw bytes without a content coding (httpx's
        decoder layer skipped), else decoded.

        Raises:
            ProviderTimeout: phase ``"idle"``, no byte for ``idle_timeout_secs`` seconds.
            ProviderConnectionError: the connection broke.
            StreamProtocolError: the body could not be decoded (e.g. corrupt gzip).
        """
        response = self._response
        coding = response.headers.get("content-encoding", "identity").strip().lower()
        raw = coding in ("", "identity")
        if raw and self._answer is not None:  # aiohttp's own reader, no layer between
            read: Callable[[], Awaitable[bytes]] = partial(self._answer.content.read, READ_BYTES)
        else:
            read = (response.aiter_raw() if raw else response.aiter_bytes()).__anext__
        watchdog = IdleWatchdog(self._idle)
        try:
            while True:
                watchdog.reading()
                try:
                    chunk = await read()
                    if not chunk and self._answer is not None and raw:
                        return  # aiohttp's reader's end of the body
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if watchdog.expired_by():
                        raise ProviderTimeout(
                            f"no bytes for {self._idle:g} s (stream_idle_timeout_secs)",
                            phase="idle",
                        ) from None
                    raise
                except Exception as exc:
                    raise _translated(exc, self._url, "read", self._idle) from exc
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
    wait for one is not bounded here; from the start with a client :func:`make_client` did not
    make), then the error body of a non-2xx answer; ``idle_timeout_secs`` bounds the body's
    silences (:class:`BodyStream`).

    Raises:
        ProviderTimeout: connect (10 s) or headers/error body (``timeout_secs``) took too long.
        ProviderConnectionError: could not connect, or a pool bound of the client ran out.
        ProviderError: a typed error for a non-2xx answer (see :func:`error_from_status`).
    """
    request = client.build_request("POST", _parsed_url(url), json=json_body, headers=headers)
    scope = anyio.CancelScope()

    def acquired() -> None:
        if scope.deadline == float("inf"):
            scope.deadline = anyio.current_time() + timeout_secs

    async def on_trace(name: str, info: dict[str, Any]) -> None:
        # httpcore's trace events (a proxied request): the first one comes once a pooled
        # connection is ours. Only the first is wanted, so the extension goes with it.
        acquired()
        request.extensions.pop("trace", None)

    request.extensions["trace"] = on_trace
    if not isinstance(client, ProviderClient):  # its transport may report nothing
        acquired()
    token = _acquired.set(acquired)
    answered: list[aiohttp.ClientResponse] = []
    answered_token = _answered.set(answered)
    try:
        with scope, watching():
            response = await client.send(request, stream=True)
    except Exception as exc:
        raise _translated(exc, url, "send", idle_timeout_secs) from exc
    finally:
        _answered.reset(answered_token)
        _acquired.reset(token)
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
        yield BodyStream(response, url, idle_timeout_secs, answered[-1] if answered else None)
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
        than 8 MiB or nested deeper than 256 levels (:mod:`providers.bounded_json`), or its
        content coding could not be decoded.
    """
    try:
        with anyio.fail_after(timeout_secs), watching():
            response = await client.post(_parsed_url(url), json=json_body, headers=headers)
    except TimeoutError as exc:
        raise ProviderTimeout(f"no answer within {timeout_secs:g} s", phase="total") from exc
    except Exception as exc:
        raise _translated(exc, url, "post") from exc
    if response.status_code >= 300:
        raise error_from_status(response.status_code, response.content, response.headers)
    try:
        return parse_json(response.content, what="answer")
    except StreamProtocolError as exc:
        if isinstance(exc.__cause__, ValueError):  # not JSON at all (not a bound crossed)
            raise ProviderServerError(exc.message) from exc
        raise
