"""Non-2xx answers typed: the error body of any of the four APIs read for its codes, and
``Retry-After`` read as seconds (architecture §2 "Failures").

Shared by every request a provider makes (a stream, a blocking answer, the model list, the
audio endpoints); the transport's own failures (connect, timeouts) are typed by
:mod:`providers.transport_errors`.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from providers.bounded_json import parse_json
from providers.error_events import is_context_overflow, special_error
from providers.errors import (
    ContextLengthExceeded,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    StreamProtocolError,
    snippet,
)

__all__ = ["error_from_status", "is_json_media_type", "parse_retry_after"]


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
    status: int, body: bytes, headers: Mapping[str, str] | None = None
) -> ProviderError:
    """Map a non-2xx answer to a typed error (architecture §2 "Failures").

    The codes of the body are read first (:func:`providers.error_events.special_error`):
    ``model_not_found`` or a 404 whose message names a model → :class:`ModelNotFound` (OpenAI,
    Ollama ``model "x" not found``, Anthropic ``not_found_error`` ``model: x``); quota or billing
    (``insufficient_quota``, ``billing_error``, HTTP 402, Anthropic's "credit balance is too
    low") → :class:`QuotaExhausted`. Then by status: 401/403 auth, 429 rate limited (with
    ``Retry-After``), 5xx or a server error code, any other 4xx a bad request.
    """
    code, message, parsed = _error_fields(body)
    text = f"HTTP {status}" + (f": {message}" if message else "")
    codes = _all_codes(parsed, code)
    special = special_error(codes, message, text, status=status)
    if special is not None:
        return special
    if status in (401, 403):
        return ProviderAuthError(text, status_code=status, code=code)
    if status == 429:
        retry_after = parse_retry_after(headers.get("retry-after") if headers else None)
        return ProviderRateLimited(text, retry_after=retry_after, status_code=status, code=code)
    if status >= 500 or code in ("overloaded_error", "server_error", "api_error"):
        return ProviderServerError(text, status_code=status, code=code)
    if is_context_overflow(codes, message):
        return ContextLengthExceeded(text, status_code=status, code=code)
    return ProviderBadRequest(text, status_code=status, code=code)


def _all_codes(parsed: Any, code: str | None) -> tuple[str, ...]:
    """Every code string of an error body: ``error.type`` and ``error.code`` (OpenAI sends
    ``invalid_request_error`` as the type and ``model_not_found`` as the code)."""
    found = [code] if code else []
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict):
        found += [v for v in (err.get("type"), err.get("code")) if isinstance(v, str) and v]
    return tuple(found)


def is_json_media_type(content_type: str | None) -> bool:
    """True for ``application/json`` and ``application/*+json`` (parameters ignored):
    a body that is one JSON value, not a stream of them (``application/x-ndjson`` is not).

    >>> is_json_media_type("application/json; charset=utf-8")
    True
    >>> is_json_media_type("application/x-ndjson")
    False
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )
