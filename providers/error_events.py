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
    ModelNotFound,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    QuotaExhausted,
)

__all__ = ["error_from_code", "error_from_event", "special_error"]

# Anthropic ``error.type`` (https://docs.anthropic.com/en/api/errors), OpenAI and Responses
# ``error.code``/``error.type`` values, and the names OpenAI-compatible servers use.
_RATE_LIMIT_CODES = frozenset({"rate_limit_exceeded", "rate_limit_error", "too_many_requests"})
# OpenAI ``insufficient_quota`` (sent with HTTP 429), Anthropic ``billing_error`` (HTTP 402).
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_error"})
# Anthropic answers a used-up credit with a plain 400 invalid_request_error; OpenAI's quota
# message, for servers that copy it without the code.
_QUOTA_PHRASES = ("credit balance is too low", "exceeded your current quota")
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


def special_error(
    codes: tuple[str, ...], message: str | None, text: str, *, status: int | None
) -> ProviderError | None:
    """The failures a user must act on differently than their status says, from any wire
    format's codes and message; ``None`` for the others.

    * :class:`QuotaExhausted`: a code of ``_QUOTA_CODES``, HTTP 402, or a quota phrase in the
      message (Anthropic: "Your credit balance is too low…", sent as a 400);
    * :class:`ModelNotFound`: the code ``model_not_found`` (OpenAI, Responses), or, with HTTP
      404 or inside a 2xx body, a message that names a model (Anthropic ``not_found_error``
      "model: x"; Ollama ``model "x" not found, try pulling it first``; in a 2xx body it must
      also say "not found" or "does not exist").

    Never for a 5xx answer: the server failed, whatever it says.

    Args:
        codes: the error's code strings (type and code), in the body's order.
        message: its human-readable message, if any.
        text: the message the typed error carries.
        status: the HTTP status, or ``None`` for an error inside a 2xx body.
    """
    if status is not None and status >= 500:
        return None
    code = codes[0] if codes else None
    lowered = (message or "").lower()
    if (
        _QUOTA_CODES.intersection(codes)
        or status == 402
        or any(phrase in lowered for phrase in _QUOTA_PHRASES)
    ):
        quota_code = next((c for c in codes if c in _QUOTA_CODES), code)
        return QuotaExhausted(text, status_code=status, code=quota_code)
    names_model = (
        status in (404, None)
        and "model" in lowered
        and (status == 404 or "not found" in lowered or "does not exist" in lowered)
    )
    if "model_not_found" in codes or names_model:
        return ModelNotFound(text, status_code=status, code=code)
    return None


def error_from_code(
    code: str | None, message: str | None, *, what: str, status: int | None = None
) -> ProviderError:
    """Type an error the provider sent inside a 2xx body by its code (architecture §2 "Failures").

    First the failures of :func:`special_error` (quota, unknown model); then rate limits
    (``code``, or ``status`` 429) → :class:`ProviderRateLimited` (``retry_after``
    unknown); authentication/permission (or 401/403) → :class:`ProviderAuthError`; invalid
    requests (a listed code, any other ``invalid_*`` code, or another 4xx) →
    :class:`ProviderBadRequest`; anything else (``overloaded_error``, ``api_error``,
    ``server_error``, unknown codes, no code at all) → :class:`ProviderServerError`, retryable:
    the provider failed after accepting the request. ``status_code`` of the error stays ``None``:
    the HTTP answer itself was 2xx.

    Args:
        code: the error's code or type, if it sent one.
        message: its human-readable message, if any.
        what: names the event in the error's message (``"error event"``, ``"response.failed"``).
        status: an HTTP status the body carried as its code (OpenRouter sends the upstream's).
    """
    text = what + (f" {code}" if code else "") + (f": {message}" if message else "")
    special = special_error((code,) if code else (), message, text, status=status)
    if special is not None:
        return special
    if code in _RATE_LIMIT_CODES or status == 429:
        return ProviderRateLimited(text, retry_after=None, status_code=None, code=code)
    if code in _AUTH_CODES or status in (401, 403):
        return ProviderAuthError(text, code=code)
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
    codes: list[str] = []
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
            elif isinstance(value, str) and value:
                codes.append(value)
                code = code or value
    text = "error event" + (f" {code}" if code else "") + (f": {message}" if message else "")
    special = special_error(tuple(codes), message, text, status=status)
    if special is not None:
        return special
    return error_from_code(code, message, what="error event", status=status)
