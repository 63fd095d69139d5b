"""HTTP transport shared by the providers: timeouts and the mapping of failures to our errors.

Theory of operation
-------------------
DESIGN §2 "Timeouts": connecting is bounded by 10 s; waiting for the response headers and reading
an error body are bounded by ``timeout_secs``; the body of a stream is bounded by a *byte-idle*
timeout (``stream_idle_timeout_secs``) that every received read resets, so a long answer that keeps
arriving is never cut by a total deadline. httpx's own read timeout would also bound the headers
by the idle value, so we give httpx no read timeout and apply both bounds as anyio scopes.

Every httpx exception is translated once, here, with ``raise ... from exc`` (STYLE §5).
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx

from providers.bounded_json import parse_json
from providers.errors import (
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

__all__ = [
    "CONNECT_TIMEOUT_SECS",
    "BodyStream",
    "error_from_status",
    "make_client",
    "open_stream",
    "parse_retry_after",
    "post_json",
]

CONNECT_TIMEOUT_SECS = 10.0
"""Connect timeout in seconds (DESIGN §2)."""


def make_client(base_url: str | None = None) -> httpx.AsyncClient:
    """An httpx client with the connect bound only; reads are bounded by our scopes.

    The environment is honoured as the openai and anthropic SDKs honour it (their clients are
    ``httpx.AsyncClient`` with httpx's default ``trust_env=True``): ``HTTPS_PROXY``,
    ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` choose the proxy per URL, and
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` the CA certificates (DESIGN §2 "Wire formats").
    """
    timeout = httpx.Timeout(connect=CONNECT_TIMEOUT_SECS, read=None, write=60.0, pool=60.0)
    return httpx.AsyncClient(timeout=timeout, base_url=base_url or "", trust_env=True)


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
    """Map a non-2xx answer to a typed error (DESIGN §2 "Failures")."""
    code, message, _ = _error_fields(body)
    text = f"HTTP {status}" + (f": {message}" if message else "")
    if status in (401, 403):
        return ProviderAuthError(text, status_code=status, code=code)
    if status == 429:
        retry_after = parse_retry_after(headers.get("retry-after") if headers else None)
        return ProviderRateLimited(text, retry_after=retry_after, status_code=status, code=code)
    if status >= 500 or code in ("overloaded_error", "server_error", "api_error"):
        return ProviderServerError(text, status_code=status, code=code)
    return ProviderBadRequest(text, status_code=status, code=code)


class BodyStream:
    """The body of a 2xx streaming response, read with the byte-idle bound."""

    def __init__(self, response: httpx.Response, idle_timeout_secs: float) -> None:
        self._response = response
        self._idle = idle_timeout_secs
        self._iter = response.aiter_bytes()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            try:
                with anyio.fail_after(self._idle):
                    chunk = await self._iter.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise ProviderTimeout(
                    f"no bytes for {self._idle:g} s (stream_idle_timeout_secs)", phase="idle"
                ) from exc
            except httpx.TransportError as exc:
                raise ProviderConnectionError(f"connection broke while reading: {exc!r}") from exc
            except httpx.DecodingError as exc:  # e.g. a corrupt gzip body
                raise StreamProtocolError(f"the body could not be decoded: {exc}") from exc
            if chunk:
                yield chunk


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

    Raises:
        ProviderTimeout: connect (10 s) or headers/error body (``timeout_secs``) took too long.
        ProviderConnectionError: could not connect.
        ProviderError: a typed error for a non-2xx answer (see :func:`error_from_status`).
    """
    request = client.build_request("POST", url, json=json_body, headers=headers)
    try:
        with anyio.fail_after(timeout_secs):
            response = await client.send(request, stream=True)
    except TimeoutError as exc:
        raise ProviderTimeout(
            f"no response headers within {timeout_secs:g} s", phase="headers"
        ) from exc
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(f"connect timed out: {exc!r}", phase="connect") from exc
    except httpx.TransportError as exc:
        raise ProviderConnectionError(f"could not connect to {url}: {exc!r}") from exc
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
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(f"connect timed out: {exc!r}", phase="connect") from exc
    except httpx.TransportError as exc:
        raise ProviderConnectionError(f"could not connect to {url}: {exc!r}") from exc
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
