"""Provider errors (architecture §2).

Hierarchy::

    ProviderError
    ├── ProviderAuthError          401/403; never retried
    ├── ProviderRateLimited        429 or a rate-limit error event; carries retry_after (seconds)
    ├── ProviderServerError        5xx, overloaded_error, server_error (sent by the provider)
    ├── ProviderBadRequest         any other 4xx; never retried
    │   ├── ModelNotFound          the server does not know the model (404, model_not_found)
    │   └── ContextLengthExceeded  the request is longer than the model's context window
    ├── QuotaExhausted             quota or credit used up (insufficient_quota, billing_error,
    │                              402); never retried
    ├── ProviderTimeout            connect, headers or byte-idle timeout; not re-sent there
    ├── ProviderConnectionError    could not connect (reason: refused | dns | tls | other), or
    │                              the connection broke while reading (reason: broken)
    ├── StreamTruncated            the body ended before the terminal signal ("they broke it")
    └── StreamProtocolError        the body is not the wire format (e.g. event data not JSON)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ConnectionReason",
    "ContextLengthExceeded",
    "ModelNotFound",
    "ProviderAuthError",
    "ProviderBadRequest",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderServerError",
    "ProviderTimeout",
    "ProxyVia",
    "QuotaExhausted",
    "StreamProtocolError",
    "StreamTruncated",
    "snippet",
]


class ProviderError(Exception):
    """Base of every provider failure.

    Attributes:
        message: human-readable cause (already free of secrets: never includes request headers).
        status_code: the HTTP status when the failure was an HTTP answer, else ``None``.
        code: the provider's error code or type (``"overloaded_error"``, ``"server_error"``...).
    """

    retryable: bool = True

    def __init__(
        self, message: str, *, status_code: int | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code


class ProviderAuthError(ProviderError):
    retryable = False


class ProviderRateLimited(ProviderError):
    """Rate limited. ``retry_after`` is in seconds (``None`` when the provider did not say)."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status_code: int | None = 429,
        code: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, code=code)
        self.retry_after = retry_after


class ProviderServerError(ProviderError):
    """A 5xx answer or a server error code.

    Attributes:
        proxy: the proxy a gateway error (502, 503, 504) came through: the proxy may have
            answered it itself, not reaching the server (``None``: no proxy, or another
            status).
    """

    proxy: ProxyVia | None = None


class ProviderBadRequest(ProviderError):
    retryable = False


class ModelNotFound(ProviderBadRequest):
    """The server does not serve the requested model (HTTP 404 naming a model, or the code
    ``model_not_found``).

    Attributes:
        model: the model name that was asked for, when the caller knows it (else ``None``).
        available: the model names the server lists (its models endpoint), filled in by the
            caller that asked for them; ``None`` when not asked or the server has no list.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, code=code)
        self.model = model
        self.available: tuple[str, ...] | None = None


class ContextLengthExceeded(ProviderBadRequest):
    """The request is longer than the model's context window."""


class QuotaExhausted(ProviderError):
    """The account's quota or credit is used up (OpenAI ``insufficient_quota``, Anthropic
    ``billing_error`` or a too-low credit balance, HTTP 402): waiting does not help."""

    retryable = False


@dataclass(frozen=True, slots=True)
class ProxyVia:
    """The proxy a request went through, named when the failure was reaching or passing it.

    Attributes:
        host: ``host:port`` of the proxy.
        variable: the environment variable that named it (``HTTPS_PROXY``, ``http_proxy``...).
        scheme: the proxy URL's scheme (``http``: a TLS handshake through its tunnel is the
            server's, not the proxy's).
    """

    host: str
    variable: str
    scheme: str = "http"


class ProviderTimeout(ProviderError):
    """A timeout; ``phase`` is ``"connect"``, ``"headers"``, ``"idle"`` or ``"total"``;
    ``proxy``: the proxy no connection was made to in time (``None``: the server's)."""

    def __init__(self, message: str, *, phase: str, proxy: ProxyVia | None = None) -> None:
        super().__init__(message)
        self.phase = phase
        self.proxy = proxy


ConnectionReason = Literal["refused", "dns", "tls", "broken", "tunnel", "other"]


class ProviderConnectionError(ProviderError):
    """No answer could be read from the server.

    Attributes:
        host: ``host:port`` of the server (``None`` when not known).
        reason: ``"refused"`` (nothing listens there), ``"dns"`` (the name does not resolve),
            ``"tls"`` (the TLS handshake or certificate check failed), ``"broken"`` (the
            connection closed or broke after it was made), ``"tunnel"`` (the proxy answered
            ``CONNECT`` with a status other than 2xx, ``status_code``) or ``"other"``.
        proxy: the proxy the failure was at (connecting to it, or its tunnel refused);
            ``None`` when it was the server's (``reason`` and ``host`` then say whose).
    """

    def __init__(
        self,
        message: str,
        *,
        host: str | None = None,
        reason: ConnectionReason = "other",
        proxy: ProxyVia | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.host = host
        self.reason: ConnectionReason = reason
        self.proxy = proxy


class StreamTruncated(ProviderError):
    """The stream ended (EOF) before the provider's terminal signal."""


class StreamProtocolError(ProviderError):
    """The body does not follow the wire format."""


def snippet(text: str, limit: int = 80) -> str:
    """The start of ``text`` for an error message, cut at whitespace so that no token is cut
    in two: the log redactor recognises a whole secret, not an arbitrary piece of one.
    Text without whitespace in its first ``limit`` characters is described by its length."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(" ", 0, limit), text.rfind("\n", 0, limit))
    return text[:cut] + " …" if cut > 0 else f"<{len(text)} characters>"
