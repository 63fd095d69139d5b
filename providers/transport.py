"""HTTP transport shared by the providers: a stream opened and a blocking call made through the
client (:mod:`providers.provider_client`), their bounds, and the failures typed.

Theory of operation
-------------------
architecture §2 "Timeouts": connecting is bounded by 10 s (the client's); waiting for the
response headers is bounded by ``timeout_secs`` from the moment a pooled connection is the
request's (the pool's trace events call the hook :data:`~providers.provider_client.ACQUIRED`
holds; httpcore's ``trace`` extension for a proxied request), so a request queued for a
connection is never "the model did not answer in time"; reading an error body is bounded by
``timeout_secs``. The body of a stream is bounded by a *byte-idle* timeout
(``stream_idle_timeout_secs``) that every read that brought data resets, so a long answer that
keeps arriving is never cut by a total deadline.

A stream is posted straight through the client's aiohttp session
(:class:`~providers.provider_client.SharedSession`, the one its httpx transport uses) when the
environment names no proxy: the same request httpx would send (the URL as httpx percent-encodes
it, httpx's JSON encoding, the client's default headers under the request's), its answer read as
httpx reads it (a field sent twice joined, a content coding decoded by httpx's decoders),
without httpx's request building, its auth, redirect and cookie layers, and the transport's
response wrapping — a third of opening a stream (bench/README.md). A relative URL, and every
request while a proxy is named, go through httpx's client, which chooses the proxy per URL. A
streaming body is a :class:`providers.body_stream.BodyStream` either way (aiohttp's own reader,
the socket held while a paced read waits, the byte-idle watchdog).

Every exception of the client is translated once, with ``raise ... from exc``, by the table of
:mod:`providers.transport_errors`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import lru_cache
from typing import Any

import aiohttp
import anyio
import httpx
import yarl

from providers.body_stream import BodyStream, IdleWatchdog, decoded_view
from providers.bounded_json import parse_json
from providers.errors import (
    ProviderError,
    ProviderServerError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.pool_queue import watching
from providers.provider_client import (
    ACQUIRED,
    ANSWERED,
    CONNECT_TIMEOUT_SECS,
    DEFAULT_MAX_CONNECTIONS,
    KEEPALIVE_SECS,
    ProviderClient,
    environment_mounts,
    make_client,
)
from providers.proxy_transport import through_proxy
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
    token = ACQUIRED.set(bound.acquired)
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
        ACQUIRED.reset(token)
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
    token = ACQUIRED.set(bound.acquired)
    answered: list[aiohttp.ClientResponse] = []
    answered_token = ANSWERED.set(answered)
    try:
        with bound.scope, watching():
            response = await client.send(request, stream=True)
    except Exception as exc:
        raise translated(exc, url, "send", idle_timeout_secs) from exc
    finally:
        ANSWERED.reset(answered_token)
        ACQUIRED.reset(token)
    bound.check()
    try:
        if response.status_code >= 300:
            refusal = await _refusal(
                response.status_code, response.aread, response.headers, timeout_secs
            )
            raise through_proxy(refusal, response)
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
        refusal = error_from_status(response.status_code, response.content, response.headers)
        raise through_proxy(refusal, response)
    try:
        return parse_json(response.content, what="answer")
    except StreamProtocolError as exc:
        if isinstance(exc.__cause__, ValueError):  # not JSON at all (not a bound crossed)
            raise ProviderServerError(exc.message) from exc
        raise
