"""Errors a provider sends *inside* a 2xx body, typed (pure: no I/O imports).

Streams report failures after HTTP 200 as error objects: OpenAI-compatible ``{"error": {...}}``
chunks, Anthropic ``error`` events, Responses ``error``/``response.failed`` events, Ollama
``{"error": "..."}`` lines. architecture §2 types them like HTTP failures: rate limits are retryable
(``ProviderRateLimited``), ``server_error``/``overloaded_error`` are ``ProviderServerError``.

One table serves every wire format: :func:`error_from_code` types a code (and, from
OpenAI-compatible servers, an HTTP status sent in the body); :func:`error_from_event` first reads
the code out of a Chat Completions error object. The decoders that know where their code lives
(Anthropic ``error.type``, Responses ``error.code``) call :func:`error_from_code` directly.
"""

from __future__ import annotations

from typing import Any

from providers.errors import (
    ContextLengthExceeded,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
)

__all__ = ["error_from_code", "error_from_event", "is_context_overflow"]

# Anthropic ``error.type`` (https://docs.anthropic.com/en/api/errors), OpenAI and Responses
# ``error.code``/``error.type`` values, and the names OpenAI-compatible servers use.
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

_CONTEXT_CODES = frozenset({"context_length_exceeded", "context_window_exceeded"})
# Lower-case fragments of the messages servers send for a prompt longer than the context
# window: OpenAI "This model's maximum context length is …", Anthropic "prompt is too long",
# vLLM/llama.cpp/Ollama "… exceeds the context length", "too many tokens".
_CONTEXT_PHRASES = (
    "maximum context length",
    "context length",
    "context_length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "exceeds the context",
)


def is_context_overflow(codes: tuple[str | None, ...], message: str | None) -> bool:
    """Whether an error with these codes (``type``, ``code``…) and message says the request
    is longer than the model's context window."""
    if any(code in _CONTEXT_CODES for code in codes):
        return True
    lowered = str(message or "").lower()
    return any(phrase in lowered for phrase in _CONTEXT_PHRASES)


def error_from_code(
    code: str | None, message: str | None, *, what: str, status: int | None = None
) -> ProviderError:
    """Type an error the provider sent inside a 2xx body by its code (architecture §2 "Failures").

    Rate limits (``code``, or ``status`` 429) → :class:`ProviderRateLimited` (``retry_after``
    unknown); authentication/permission (or 401/403) → :class:`ProviderAuthError`; invalid
    requests (a listed code, any other ``invalid_*`` code, or another 4xx) →
    :class:`ProviderBadRequest`, or :class:`ContextLengthExceeded` when the code or message says
    the prompt is too long (:func:`is_context_overflow`); anything else (``overloaded_error``,
    ``api_error``, ``server_error``, unknown codes, no code at all) →
    :class:`ProviderServerError`, retryable:
    the provider failed after accepting the request. ``status_code`` of the error stays ``None``:
    the HTTP answer itself was 2xx.

    Args:
        code: the error's code or type, if it sent one.
        message: its human-readable message, if any.
        what: names the event in the error's message (``"error event"``, ``"response.failed"``).
        status: an HTTP status the body carried as its code (OpenRouter sends the upstream's).
    """
    text = what + (f" {code}" if code else "") + (f": {message}" if message else "")
    if code in _RATE_LIMIT_CODES or status == 429:
        return ProviderRateLimited(text, retry_after=None, status_code=None, code=code)
    if code in _AUTH_CODES or status in (401, 403):
        return ProviderAuthError(text, code=code)
    if is_context_overflow((code,), message):
        return ContextLengthExceeded(text, code=code)
    if (
        code in _BAD_REQUEST_CODES
        or (code or "").startswith("invalid_")
        or (status is not None and 400 <= status < 500)
    ):
        return ProviderBadRequest(text, code=code)
    return ProviderServerError(text, code=code)


def error_from_event(error: Any) -> ProviderError:
    """Map an error object the provider sent *inside* a 2xx body to a typed error (architecture §2).

    ``error`` is the error object of the event: ``{"type"|"code": ..., "message": ...}``
    (OpenAI-compatible ``{"error": {...}}`` chunks, Anthropic ``error`` events, Responses
    ``error``/``response.failed``), a bare message string (Ollama), or ``None`` (a failure
    without details). The first string of ``type``/``code`` is the code; a numeric one is read
    as an HTTP status. Typed by :func:`error_from_code`.
    """
    code: str | None = None
    status: int | None = None
    message: str | None = None
    if isinstance(error, dict) and error.get("code") in _CONTEXT_CODES:
        code = str(error["code"])  # OpenAI: type invalid_request_error, code the cause
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
    return error_from_code(code, message, what="error event", status=status)
