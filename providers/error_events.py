"""Errors a provider sends *inside* a 2xx body, typed (pure: no I/O imports).

Streams report failures after HTTP 200 as error objects: OpenAI-compatible ``{"error": {...}}``
chunks, Anthropic ``error`` events, Responses ``error``/``response.failed`` events, Ollama
``{"error": "..."}`` lines. DESIGN §2 types them like HTTP failures: rate limits are retryable
(``ProviderRateLimited``), ``server_error``/``overloaded_error`` are ``ProviderServerError``.
"""

from __future__ import annotations

from typing import Any

from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
)

__all__ = ["error_from_event"]

_RATE_LIMIT_CODES = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "too_many_requests", "insufficient_quota"}
)
_AUTH_CODES = frozenset(
    {"authentication_error", "invalid_api_key", "permission_error", "permission_denied"}
)
_BAD_REQUEST_CODES = frozenset(
    {
        "invalid_request_error",
        "context_length_exceeded",
        "not_found_error",
        "request_too_large",
        "invalid_prompt",
    }
)


def error_from_event(error: Any) -> ProviderError:
    """Map an error the provider sent *inside* a 2xx body to a typed error (DESIGN §2).

    ``error`` is the error object of the event: ``{"type"|"code": ..., "message": ...}``
    (OpenAI-compatible ``{"error": {...}}`` chunks, Anthropic ``error`` events, Responses
    ``error``/``response.failed``), a bare message string (Ollama), or ``None`` (a failure
    without details). A numeric ``code`` (OpenRouter sends the upstream HTTP status) is read as
    an HTTP status. Rate limits become :class:`ProviderRateLimited` (``retry_after`` unknown),
    auth and request errors :class:`ProviderAuthError`/:class:`ProviderBadRequest`; anything
    else, unknown codes included, is a :class:`ProviderServerError` (the provider failed after
    accepting the request). ``status_code`` stays ``None``: the HTTP answer itself was 2xx.
    """
    code: str | None = None
    status: int | None = None
    message: str | None = None
    if isinstance(error, str):
        message = error
    elif isinstance(error, dict):
        raw_message = error.get("message")
        message = str(raw_message) if raw_message else None
        for key in ("type", "code"):
            value = error.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                status = value
            elif isinstance(value, str) and value and code is None:
                code = value
    text = "error event" + (f" {code}" if code else "") + (f": {message}" if message else "")
    if code in _RATE_LIMIT_CODES or status == 429:
        return ProviderRateLimited(text, retry_after=None, status_code=None, code=code)
    if code in _AUTH_CODES or status in (401, 403):
        return ProviderAuthError(text, code=code)
    if code in _BAD_REQUEST_CODES or (status is not None and 400 <= status < 500):
        return ProviderBadRequest(text, code=code)
    return ProviderServerError(text, code=code)
