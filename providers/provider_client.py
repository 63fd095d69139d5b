"""A provider's HTTP client: httpx's API over one aiohttp session, its pool, its bounds, the
environment's proxies (architecture §2 "Transport").

Theory of operation
-------------------
A provider's client (:class:`ProviderClient`, made by :func:`make_client`) is an
``httpx.AsyncClient`` (httpx's API, as the vendor SDKs use) whose transport is aiohttp's:
``httpx_aiohttp.AiohttpTransport`` over one ``aiohttp.ClientSession`` made here
(:class:`SharedSession`, which :func:`providers.transport.open_stream` also posts a stream
through when no proxy is named). aiohttp parses HTTP/1.1 in C, chunked framing included, and
bounds reads per socket read; everything is reached through the public interfaces of httpx,
httpx-aiohttp and aiohttp (a test checks that no module imports a private name of httpx or
httpcore). The choice was measured against the previous transport (httpcore's connections under
a pool and network backend of our own): bench/README.md.

Connecting is bounded by 10 s (aiohttp's ``sock_connect``). The pool's trace events
(``on_connection_create_start`` / ``on_connection_reuseconn``) call :data:`ACQUIRED`'s hook,
so the request's headers bound starts once a pooled connection is its own; ``on_request_end``
puts the aiohttp response in :data:`ANSWERED`, for the stream's body reader. No read timeout is
given to the client: it would bound the headers by the idle value too.

The pool (aiohttp's ``TCPConnector``) holds ``max_connections`` connections per provider (default
1000, architecture §2); waiting for one is unbounded: it is not the model's time, and it is
counted and logged (:mod:`providers.pool_queue`). Idle connections are kept alive for httpx's
5 s. Cookies are kept by aiohttp's jar (an IP address's too, as httpx's jar keeps them), and on
httpx's path by its jar, which keeps none it could not send back (:class:`SendableCookies`).

The environment is read as httpx reads it when it builds its own transport (as the openai and
anthropic SDKs do): ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` choose a
proxy per URL (:func:`environment_mounts`; a proxied URL goes through httpx's own proxy
transport, where the byte-idle bound is httpcore's per-read timeout), ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` the CA certificates (``httpx.create_ssl_context``).
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable
from contextvars import ContextVar
from http.cookiejar import Cookie, CookieJar, DefaultCookiePolicy
from types import SimpleNamespace, TracebackType
from urllib.request import Request, getproxies

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from providers.open_admission import OpenAdmission
from providers.pool_queue import PoolQueue
from providers.proxy_transport import ProxiedTransport, proxy_variable

__all__ = [
    "ACQUIRED",
    "ANSWERED",
    "CONNECT_TIMEOUT_SECS",
    "DEFAULT_MAX_CONNECTIONS",
    "KEEPALIVE_SECS",
    "WRITE_TIMEOUT_SECS",
    "ProviderClient",
    "ProxySettingError",
    "SendableCookies",
    "SharedSession",
    "environment_mounts",
    "environment_proxies",
    "make_client",
]

CONNECT_TIMEOUT_SECS = 10.0
"""Connect timeout in seconds (architecture §2)."""

DEFAULT_MAX_CONNECTIONS = 1000
"""Connections per provider's pool when the config sets none (architecture §2)."""

KEEPALIVE_SECS = 5.0
"""How long an idle connection is kept for the next request, in seconds (httpx's default)."""

WRITE_TIMEOUT_SECS = 60.0
"""Bound on sending a request body, in seconds (httpx's proxy transport; aiohttp has none)."""

ACQUIRED: ContextVar[Callable[[], None] | None] = ContextVar("acquired", default=None)
"""Called by the pool's trace events once the current request holds a connection."""
ANSWERED: ContextVar[list[aiohttp.ClientResponse] | None] = ContextVar("answered", default=None)
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
    """Whether :func:`providers.transport.open_stream` posts straight through :attr:`session`
    (no proxy in the environment), not through httpx's client layers."""

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
    :func:`providers.transport.open_stream`'s.

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
    acquired = ACQUIRED.get()
    if acquired is not None:
        acquired()


async def _on_request_end(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestEndParams
) -> None:
    """aiohttp's trace callback: the response headers arrived; the response is kept for its
    :class:`~providers.body_stream.BodyStream` (read from aiohttp's own body reader, its socket
    held while paced)."""
    found = ANSWERED.get()
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
    """The proxy transports the environment asks for (:func:`environment_proxies`), as httpx's
    client mounts them when it builds its own transport. Each proxy's transport is a
    :class:`~providers.proxy_transport.ProxiedTransport`: a failure to reach or pass the proxy
    names it.

    Raises:
        ProxySettingError: a proxy variable httpx cannot read.
    """

    def through(url: str) -> httpx.AsyncHTTPTransport:
        return httpx.AsyncHTTPTransport(proxy=httpx.Proxy(url), verify=ssl_context, limits=limits)

    return {
        pattern: None if proxy is None else ProxiedTransport(through(proxy[0]), *proxy)
        for pattern, proxy in environment_proxies().items()
    }


def environment_proxies() -> dict[str, tuple[str, str] | None]:
    """The environment's proxies as httpx reads them (``httpx._utils.get_environment_proxies``,
    0.28): URL pattern → (proxy URL, the variable that named it), or ``None`` for no proxy.
    ``HTTP_PROXY``, ``HTTPS_PROXY`` and ``ALL_PROXY`` give ``http://``, ``https://``, ``all://``;
    each ``NO_PROXY`` entry gives ``None`` on its hosts (``*``: no proxy at all; ``example.com``
    also matches its subdomains, ``.example.com`` only them; an IPv6 address with or without
    brackets). Each value is checked as httpx will read it, once, here.

    Raises:
        ProxySettingError: a proxy URL or a ``NO_PROXY`` entry httpx cannot read.
    """
    found = getproxies()
    patterns: dict[str, tuple[str, str] | None] = {}
    for scheme in ("http", "https", "all"):
        if found.get(scheme):
            url = found[scheme]
            url = url if "://" in url else f"http://{url}"
            variable = proxy_variable(scheme)
            _checked(variable, httpx.Proxy, url)
            patterns[f"{scheme}://"] = (url, variable)
    for host in (entry.strip() for entry in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if not host:
            continue
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if "://" in host:
            pattern = host
        elif _is_ip(bare) or host.lower() == "localhost":
            pattern = f"all://[{bare}]" if ":" in bare else f"all://{bare}"
        else:
            pattern = f"all://*{host}"
        _checked(proxy_variable("no"), httpx.URL, pattern)  # as httpx's URLPattern reads it
        patterns[pattern] = None
    return patterns


class ProxySettingError(ValueError):
    """A proxy variable of the environment that httpx cannot read: ``str()`` is one line,
    ``VARIABLE: what is wrong``."""


def _checked(variable: str, read: Callable[[str], object], value: str) -> None:
    try:
        read(value)
    except (ValueError, httpx.InvalidURL) as exc:
        scheme = value.split("://", 1)[0].lower()
        if scheme not in ("http", "https", "socks5", "socks5h", "all"):
            why = f"{scheme}:// is not a proxy's scheme"
        elif "@" in value:  # httpx's message may quote the URL, its password with it
            why = "not a URL"
        else:
            why = str(exc)
        raise ProxySettingError(f"{variable}: {why}") from None


class SendableCookies(DefaultCookiePolicy):
    """httpx's cookie policy (the standard library's default), but a cookie that could not be
    sent back is not kept: httpx encodes a request's headers as ASCII, so a ``Set-Cookie`` with
    a name or value outside it (a raw byte, read as Latin-1) would make every later request of
    the client fail to encode (``UnicodeEncodeError``). (aiohttp's jar, on a direct stream,
    sends a UTF-8 value back quoted, as it escapes it.)"""

    def set_ok(self, cookie: Cookie, request: Request) -> bool:
        value = cookie.value or ""
        return cookie.name.isascii() and value.isascii() and super().set_ok(cookie, request)


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
    proxies: bool = True,
) -> ProviderClient:
    """A provider's client (see the module docstring): aiohttp's transport, a pool of
    ``max_connections`` connections (waiting for one is unbounded), the connect bound only
    (the other bounds come with each request), the environment's proxies (none without
    ``proxies``: a provider's ``proxy: none``) and CA certificates. TLS verifies with
    ``ssl_context``, by default httpx's (``SSL_CERT_FILE``/``SSL_CERT_DIR``, else certifi's). A
    request waiting for a connection is counted and logged
    (:class:`~providers.pool_queue.PoolQueue`, ``name`` in its log lines, else the URL)."""
    context = ssl_context or httpx.create_ssl_context(trust_env=True)
    limits = httpx.Limits(max_connections=max_connections, keepalive_expiry=KEEPALIVE_SECS)
    queue = PoolQueue(name or base_url or "(no name)", max_connections)
    mounts = environment_mounts(limits, context) if proxies else {}
    session = SharedSession(_session_factory(max_connections, context, queue))
    transport = AiohttpTransport(verify=context, limits=limits, client=session.get)
    client = ProviderClient(
        cookies=CookieJar(SendableCookies()),
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
