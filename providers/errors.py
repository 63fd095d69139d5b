"""Provider errors (architecture §2).

Hierarchy::

    ProviderError
    ├── ProviderAuthError          401/403; never retried
    ├── ProviderRateLimited        429 or a rate-limit error event; carries retry_after (seconds)
    ├── ProviderServerError        5xx, overloaded_error, server_error (sent by the provider)
    ├── ProviderBadRequest         any other 4xx; never retried
    │   └── ContextLengthExceeded  the request is longer than the model's context window
    ├── ProviderTimeout            connect, headers or byte-idle timeout; not re-sent there
    ├── ProviderConnectionError    could not connect, or the connection broke while reading
    ├── StreamTruncated            the body ended before the terminal signal ("they broke it")
    └── StreamProtocolError        the body is not the wire format (e.g. event data not JSON)
"""

from __future__ import annotations

__all__ = [
    "ContextLengthExceeded",
    "ProviderAuthError",
    "ProviderBadRequest",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderServerError",
    "ProviderTimeout",
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
    pass


class ProviderBadRequest(ProviderError):
    retryable = False


class ContextLengthExceeded(ProviderBadRequest):
    """The model rejected the request as longer than its context window (OpenAI
    ``context_length_exceeded``, Anthropic "prompt is too long", a server's "context length")."""


class ProviderTimeout(ProviderError):
    """A timeout; ``phase`` is ``"connect"``, ``"headers"``, ``"idle"`` or ``"total"``."""

    def __init__(self, message: str, *, phase: str) -> None:
        super().__init__(message)
        self.phase = phase


class ProviderConnectionError(ProviderError):
    pass


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
