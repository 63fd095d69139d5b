"""Transport failures as provider errors: one class → outcome table, walked by the class tree.

Theory of operation
-------------------
Every exception the HTTP client raises is translated once, by :func:`provider_error`, as httpx's
``map_httpcore_exceptions`` translates httpcore's: the exception's classes are walked in method
resolution order (most specific first) and the first one in :data:`OUTCOMES` decides. An
outcome is a function of the exception and of *where* it was raised (:class:`Where`): the same
``httpx.ReadTimeout`` is "no response headers" while the request is being sent and "no bytes"
(the byte-idle bound, architecture §2 "Timeouts") while the body is read.

The client's transport is aiohttp's (:mod:`providers.transport`): the httpx exception it raises
was made from an aiohttp one, its ``__cause__``, which says more (a refused connection and a
connect timeout are both an ``httpx.ConnectTimeout`` there). So the walk starts at that cause
when there is one, and the table holds aiohttp's classes beside httpx's.

Raised through the classes the rest of the code sees (architecture §2 "Failures")::

    ProviderTimeout(phase)       connect / headers / idle / total
    ProviderConnectionError      reason: refused / dns / tls / broken / other
    StreamProtocolError          a body that could not be decoded
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import aiohttp
import httpx
from aiohttp.http_exceptions import HttpProcessingError

from providers.errors import (
    ConnectionReason,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.proxy_transport import (
    ProxyConnectError,
    ProxyConnectTimeout,
    ProxyPassBroken,
    ProxyTunnelRefused,
)

__all__ = ["OUTCOMES", "Where", "connection_error", "provider_error", "translated"]

Phase = Literal["send", "read", "post"]
"""``send``: the request until its response headers; ``read``: the body of a 2xx stream;
``post``: a blocking request and its whole answer."""


@dataclass(frozen=True, slots=True)
class Where:
    """Where a transport failure happened.

    Attributes:
        url: the request's URL.
        phase: see :data:`Phase`.
        idle_secs: the byte-idle bound of the request, in seconds.
    """

    url: str
    phase: Phase
    idle_secs: float = 0.0


Outcome = Callable[[BaseException, Where], ProviderError]


def connection_error(
    url: str, exc: BaseException, reason: ConnectionReason | None = None
) -> ProviderConnectionError:
    """Type a transport failure: a failed connect by the OS error beneath it (``refused``,
    ``dns``, ``tls``, else ``other``), any other as ``broken`` (the connection was made, then
    closed or broke); ``reason`` when given wins. ``host`` is the URL's ``host:port``."""
    parts = httpx.URL(url)
    host = f"{parts.host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    if reason is None:
        connect = isinstance(exc, (httpx.ConnectError, aiohttp.ClientConnectorError))
        reason = _connect_reason(exc) if connect else "broken"
    words = {
        "refused": "connection refused by",
        "dns": "the name does not resolve:",
        "tls": "TLS handshake failed with",
        "broken": "connection broke with",
        "tunnel": "no tunnel to",
        "other": "could not connect to",
    }[reason]
    return ProviderConnectionError(f"{words} {host}: {exc!r}", host=host, reason=reason)


def _connect_reason(exc: BaseException) -> ConnectionReason:
    """Why a connect failed, from the exception and those chained beneath it."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, (ssl.SSLError, aiohttp.ClientSSLError)):
            return "tls"
        if isinstance(cause, (socket.gaierror, aiohttp.ClientConnectorDNSError)):
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


# -- the outcomes -------------------------------------------------------------------------


def _no_free_connection(exc: BaseException, where: Where) -> ProviderError:
    return ProviderConnectionError(f"no free connection to {where.url}: {exc!r}")


def _connect_timed_out(exc: BaseException, where: Where) -> ProviderError:
    if where.phase == "read":
        return _broken(exc, where)
    return ProviderTimeout(f"connect timed out: {exc!r}", phase="connect")


def _no_byte(exc: BaseException, where: Where) -> ProviderError:
    """The byte-idle bound ran out: before the headers, or while the body was read."""
    if where.phase == "read":
        return ProviderTimeout(
            f"no bytes for {where.idle_secs:g} s (stream_idle_timeout_secs)", phase="idle"
        )
    if where.phase == "send":
        return ProviderTimeout(
            f"no response headers: no bytes for {where.idle_secs:g} s (stream_idle_timeout_secs)",
            phase="headers",
        )
    return _connect_timed_out(exc, where)


def _connect_failed(exc: BaseException, where: Where) -> ProviderError:
    return connection_error(where.url, exc, _connect_reason(exc))


def _proxy_failed(exc: BaseException, where: Where) -> ProviderError:
    """A connect through a proxy failed (:class:`ProxyConnectError`): the proxy's, but for a
    TLS handshake through an ``http://`` proxy's tunnel, which is the server's."""
    assert isinstance(exc, ProxyConnectError)
    failed = connection_error(where.url, exc)
    if failed.reason == "tls" and exc.via.scheme == "http":
        return failed
    words = {"refused": "refused by", "dns": "name does not resolve:", "tls": "TLS failed with"}
    what = words.get(failed.reason, "could not connect to")
    return ProviderConnectionError(
        f"proxy {what} {exc.via.host} ({exc.via.variable}): {exc.__cause__!r}",
        host=failed.host,
        reason=failed.reason,
        proxy=exc.via,
    )


def _proxy_timed_out(exc: BaseException, where: Where) -> ProviderError:
    assert isinstance(exc, ProxyConnectTimeout)
    return ProviderTimeout(
        f"connect to the proxy {exc.via.host} ({exc.via.variable}) timed out: {exc.__cause__!r}",
        phase="connect",
        proxy=exc.via,
    )


def _tunnel_refused(exc: BaseException, where: Where) -> ProviderError:
    assert isinstance(exc, ProxyTunnelRefused)
    host = connection_error(where.url, exc, "tunnel").host
    status = str(exc).split(" ", 1)[0]  # httpcore's message: the status line, "502 Bad Gateway"
    refused = ProviderConnectionError(
        f"the proxy {exc.via.host} ({exc.via.variable}) answered CONNECT {host} with {exc}",
        host=host,
        reason="tunnel",
        proxy=exc.via,
        status_code=int(status) if status.isdigit() else None,
    )
    refused.retryable = refused.status_code != 407  # credentials do not change by themselves
    return refused


def _proxy_pass_broken(exc: BaseException, where: Where) -> ProviderError:
    assert isinstance(exc, ProxyPassBroken)
    failed = connection_error(where.url, exc, "broken")
    failed.proxy = exc.via
    return failed


def _broken(exc: BaseException, where: Where) -> ProviderError:
    if where.phase == "read":
        return ProviderConnectionError(f"connection broke while reading: {exc!r}", reason="broken")
    return connection_error(where.url, exc, "broken")


def _undecodable(exc: BaseException, where: Where) -> ProviderError:
    what = "the body" if where.phase == "read" else "the answer"
    return StreamProtocolError(f"{what} could not be decoded: {exc}")


OUTCOMES: dict[type[BaseException], Outcome] = {
    # aiohttp's own classes (the cause of the httpx exception its transport raises)
    aiohttp.ConnectionTimeoutError: _connect_timed_out,  # sock_connect
    aiohttp.SocketTimeoutError: _no_byte,  # sock_read: the byte-idle bound
    aiohttp.ServerTimeoutError: _connect_timed_out,
    aiohttp.ClientConnectorError: _connect_failed,  # DNS, TLS, refused, a proxy unreachable
    aiohttp.ClientConnectionError: _broken,  # the server disconnected
    aiohttp.ClientPayloadError: _broken,  # the body ended before its framing did
    aiohttp.ClientError: _broken,  # e.g. a response that is not HTTP
    HttpProcessingError: _broken,  # aiohttp's pure-Python parser raises its framing faults as is
    # httpx's (proxied requests go through httpx's own transport)
    ProxyConnectTimeout: _proxy_timed_out,
    ProxyConnectError: _proxy_failed,
    ProxyTunnelRefused: _tunnel_refused,
    ProxyPassBroken: _proxy_pass_broken,
    httpx.PoolTimeout: _no_free_connection,
    httpx.ReadTimeout: _no_byte,
    httpx.TimeoutException: _connect_timed_out,
    httpx.ConnectError: _connect_failed,
    httpx.TransportError: _broken,
    httpx.DecodingError: _undecodable,  # e.g. a corrupt gzip body
}
"""Exception class → outcome; :func:`provider_error` takes the first of an exception's
classes (most specific first) found here."""


def provider_error(exc: BaseException, where: Where) -> ProviderError | None:
    """The provider error that ``exc`` (raised by the HTTP client at ``where``) is, or ``None``
    when it is none of the transport's (the caller re-raises it as it is)."""
    cause = exc.__cause__
    origin = cause if isinstance(cause, (aiohttp.ClientError, HttpProcessingError)) else exc
    for cls in type(origin).__mro__:
        outcome = OUTCOMES.get(cls)
        if outcome is not None:
            return outcome(origin, where)
    return None


def translated(exc: Exception, url: str, phase: Phase, idle_secs: float = 0.0) -> Exception:
    """``exc`` as the provider error it is (:func:`provider_error` at ``url`` in ``phase``), or
    ``exc`` itself, for the caller to raise ``from exc``."""
    return provider_error(exc, Where(url, phase, idle_secs)) or exc
