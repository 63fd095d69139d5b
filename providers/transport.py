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

A stream is posted straight through the client's aiohttp session (:class:`SharedSession`, the
one its httpx transport uses) when the environment names no proxy: the same request httpx
would send (httpx's JSON encoding, the client's default headers under the request's, aiohttp's
cookie jar as under the transport), without httpx's request building, its auth, redirect and
cookie layers, and the transport's response wrapping — a third of opening a stream, a tenth of
a 2 KB answer's CPU (bench/README.md). With a proxy in the environment every request goes
through httpx's client, which chooses the proxy per URL. A streaming body is a
:class:`providers.body_stream.BodyStream` either way (aiohttp's own reader, the socket held
while a paced read waits, the byte-idle watchdog).

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

import ipaddress
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from functools import lru_cache
from types import SimpleNamespace, TracebackType
from typing import Any
from urllib.request import getproxies

import aiohttp
import anyio
import httpx
import yarl
from httpx_aiohttp import AiohttpTransport

from providers.body_stream import BodyStream, IdleWatchdog, decoded_view
from providers.bounded_json import parse_json
from providers.errors import (
    ProviderError,
    ProviderServerError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.open_admission import OpenAdmission
from providers.pool_queue import PoolQueue, watching
from providers.status_errors import error_from_status
from providers.transport_errors import connection_error, translated

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
        open_admission: the stream opens waiting for a later pass of the event loop
            (:mod:`providers.open_admission`; counts, logged).
    """

    max_connections: int
    pool_queue: PoolQueue
    open_admission: OpenAdmission
    session: SharedSession
    direct: bool
    """Whether :func:`open_stream` posts straight through :attr:`session` (no proxy in the
    environment), not through httpx's client layers."""

    async def aclose(self) -> None:
        """Close the transports, then the aiohttp session (made or not)."""
        try:
            await super().aclose()
        finally:
            await self.session.close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        try:
            await super().__aexit__(exc_type, exc_value, traceback)
        finally:
            await self.session.close()


class SharedSession:
    """The one aiohttp session of a :class:`ProviderClient`, made on first use (inside the
    event loop): its httpx transport's (``AiohttpTransport`` calls :meth:`get`) and
    :func:`open_stream`'s.

    Attributes:
        headers: what httpx adds to every request of the client (``client.headers``: accept,
            accept-encoding, connection, user-agent; lower-case names), sent on a direct
            stream under the request's own.
    """

    __slots__ = ("_closed", "_factory", "_session", "headers")

    def __init__(self, factory: Callable[[], aiohttp.ClientSession]) -> None:
        self._factory = factory
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self.headers: dict[str, str] = {}

    def get(self) -> aiohttp.ClientSession:
        """The session (made now if it was not).

        Raises:
            RuntimeError: the client was closed (as httpx's client raises).
        """
        session = self._session
        if session is None:
            if self._closed:
                raise RuntimeError("Cannot send a request, as the client has been closed.")
            session = self._session = self._factory()
        return session

    async def close(self) -> None:
        """Close the session if it was made; none is made after (idempotent)."""
        self._closed = True
        if self._session is not None:
            await self._session.close()


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
            cookie_jar=aiohttp.CookieJar(unsafe=True),  # an IP address's too, as httpx's jar
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
    mounts = environment_mounts(limits, context)
    session = SharedSession(_session_factory(max_connections, context, queue))
    transport = AiohttpTransport(verify=context, limits=limits, client=session.get)
    client = ProviderClient(
        timeout=httpx.Timeout(
            connect=CONNECT_TIMEOUT_SECS, read=None, write=WRITE_TIMEOUT_SECS, pool=None
        ),
        base_url=base_url or "",
        transport=transport,
        mounts=mounts,
        trust_env=True,
    )
    session.headers = dict(client.headers)
    client.session = session
    client.direct = not any(mounts.values())  # NO_PROXY's entries mount None
    client.max_connections = max_connections
    client.pool_queue = queue
    client.open_admission = OpenAdmission(name or base_url or "(no name)")
    return client


@lru_cache(maxsize=256)
def _parsed_url(url: str) -> httpx.URL:
    """``url`` parsed once: httpx parses a ``str`` URL (in Python) on every request, and an
    ``httpx.URL`` (immutable) is taken as it is; a provider posts to one URL."""
    return httpx.URL(url)


def open_stream(
    client: httpx.AsyncClient,
    url: str,
    *,
    json_body: dict[str, Any],
    headers: dict[str, str],
    timeout_secs: float,
    idle_timeout_secs: float,
) -> AbstractAsyncContextManager[BodyStream]:
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
    if isinstance(client, ProviderClient) and client.direct:
        target = _direct_url(url)
        if target is not None:
            return _direct_stream(
                client, url, target, json_body, headers, timeout_secs, idle_timeout_secs
            )
    return _client_stream(client, url, json_body, headers, timeout_secs, idle_timeout_secs)


@lru_cache(maxsize=256)
def _direct_url(url: str) -> yarl.URL | None:
    """``url`` as httpx sends it (its percent-encoding), for aiohttp to send as it is, parsed
    once; ``None`` for a relative URL (httpx's client joins it to its ``base_url``)."""
    parsed = _parsed_url(url)
    return yarl.URL(str(parsed), encoded=True) if parsed.is_absolute_url else None


def _sent_headers(defaults: dict[str, str], headers: dict[str, str]) -> list[tuple[str, str]]:
    """The header fields of a direct stream, as httpx merges them: the client's defaults under
    the request's (names compared case-insensitively; two names differing in case both sent),
    then ``content-type: application/json`` unless the request names one."""
    own = [(name.lower(), value) for name, value in headers.items()]
    named = {name for name, _ in own}
    sent = [(name, value) for name, value in defaults.items() if name not in named]
    sent += own
    if "content-type" not in named:
        sent.append(("content-type", "application/json"))
    return sent


class _HeadersBound:
    """The bound on a stream's response headers: ``timeout_secs`` from the moment a pooled
    connection is the request's (:meth:`acquired`, called by the pool's trace events), not
    from the request's start: waiting for a connection is not the model's time."""

    __slots__ = ("_timeout", "scope")

    def __init__(self, timeout_secs: float) -> None:
        self._timeout = timeout_secs
        self.scope = anyio.CancelScope()

    def acquired(self) -> None:
        """A connection is the request's: the bound starts now (once)."""
        if self.scope.deadline == float("inf"):
            self.scope.deadline = anyio.current_time() + self._timeout

    def check(self) -> None:
        """After the scope: raise when it ran out.

        Raises:
            ProviderTimeout: phase ``"headers"``.
        """
        if self.scope.cancelled_caught:
            raise ProviderTimeout(
                f"no response headers within {self._timeout:g} s", phase="headers"
            )


async def _refusal(
    status: int, read: Callable[[], Awaitable[bytes]], headers: httpx.Headers, timeout_secs: float
) -> ProviderError:
    """The typed error of a non-2xx answer (:func:`error_from_status`), its body read within
    ``timeout_secs`` (decoded; empty when it cannot be read in time or at all)."""
    try:
        with anyio.fail_after(timeout_secs):
            body = await read()
    except (TimeoutError, aiohttp.ClientError, httpx.TransportError, httpx.DecodingError):
        body = b""
    return error_from_status(status, body, headers)


_DIRECT_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_SECS)
"""A direct stream's aiohttp bounds: the connect only, as the client's (the others are
:func:`open_stream`'s and :class:`BodyStream`'s)."""


@asynccontextmanager
async def _direct_stream(
    client: ProviderClient,
    url: str,
    target: yarl.URL,
    json_body: dict[str, Any],
    headers: dict[str, str],
    timeout_secs: float,
    idle_timeout_secs: float,
) -> AsyncIterator[BodyStream]:
    """:func:`open_stream` through aiohttp's session alone: the request httpx would send (its
    JSON encoding, its default headers under the request's), the response read by aiohttp,
    a content coding decoded by httpx's decoders (:func:`decoded_view`)."""
    await client.open_admission.admitted()
    data = json.dumps(json_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    sent = _sent_headers(client.session.headers, headers)
    bound = _HeadersBound(timeout_secs)
    token = _acquired.set(bound.acquired)
    try:
        with bound.scope, watching():
            response = await client.session.get().post(
                target,
                data=data.encode(),
                headers=sent,
                allow_redirects=False,
                compress=False,
                timeout=_DIRECT_TIMEOUT,
            )
    except Exception as exc:
        raise translated(exc, url, "send", idle_timeout_secs) from exc
    finally:
        _acquired.reset(token)
    bound.check()
    try:
        if response.status >= 300:
            view = decoded_view(response)
            raise await _refusal(response.status, view.aread, view.headers, timeout_secs)
        yield BodyStream(None, url, idle_timeout_secs, response)
    finally:
        response.release()
        await response.wait_for_close()


@asynccontextmanager
async def _client_stream(
    client: httpx.AsyncClient,
    url: str,
    json_body: dict[str, Any],
    headers: dict[str, str],
    timeout_secs: float,
    idle_timeout_secs: float,
) -> AsyncIterator[BodyStream]:
    if isinstance(client, ProviderClient):
        await client.open_admission.admitted()
    request = client.build_request("POST", _parsed_url(url), json=json_body, headers=headers)
    bound = _HeadersBound(timeout_secs)

    async def on_trace(name: str, info: dict[str, Any]) -> None:
        # httpcore's trace events (a proxied request): the first one comes once a pooled
        # connection is ours. Only the first is wanted, so the extension goes with it.
        bound.acquired()
        request.extensions.pop("trace", None)

    request.extensions["trace"] = on_trace
    if not isinstance(client, ProviderClient):  # its transport may report nothing
        bound.acquired()
    token = _acquired.set(bound.acquired)
    answered: list[aiohttp.ClientResponse] = []
    answered_token = _answered.set(answered)
    try:
        with bound.scope, watching():
            response = await client.send(request, stream=True)
    except Exception as exc:
        raise translated(exc, url, "send", idle_timeout_secs) from exc
    finally:
        _answered.reset(answered_token)
        _acquired.reset(token)
    bound.check()
    try:
        if response.status_code >= 300:
            raise await _refusal(
                response.status_code, response.aread, response.headers, timeout_secs
            )
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
        raise translated(exc, url, "post") from exc
    if response.status_code >= 300:
        raise error_from_status(response.status_code, response.content, response.headers)
    try:
        return parse_json(response.content, what="answer")
    except StreamProtocolError as exc:
        if isinstance(exc.__cause__, ValueError):  # not JSON at all (not a bound crossed)
            raise ProviderServerError(exc.message) from exc
        raise
