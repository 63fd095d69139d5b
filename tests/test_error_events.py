"""The one table that types errors sent inside a 2xx body (architecture §2 "Failures")."""

from __future__ import annotations

from typing import Any

import pytest

from providers.error_events import error_from_code, error_from_event
from providers.errors import (
    ModelNotFound,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    QuotaExhausted,
)


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("rate_limit_error", None, ProviderRateLimited),
        ("rate_limit_exceeded", None, ProviderRateLimited),
        ("too_many_requests", None, ProviderRateLimited),
        ("insufficient_quota", None, QuotaExhausted),
        ("billing_error", None, QuotaExhausted),
        ("model_not_found", None, ModelNotFound),
        (None, 429, ProviderRateLimited),
        ("authentication_error", None, ProviderAuthError),
        ("permission_denied", None, ProviderAuthError),
        ("invalid_api_key", None, ProviderAuthError),
        (None, 403, ProviderAuthError),
        ("context_length_exceeded", None, ProviderBadRequest),
        ("invalid_value", None, ProviderBadRequest),
        (None, 404, ProviderBadRequest),
        ("overloaded_error", None, ProviderServerError),
        ("something_new", None, ProviderServerError),
        (None, 502, ProviderServerError),
        (None, None, ProviderServerError),
    ],
)
def test_codes_and_statuses_map_to_one_type_per_class(
    code: str | None, status: int | None, kind: type[ProviderError]
) -> None:
    error = error_from_code(code, "details", what="error", status=status)
    assert type(error) is kind
    assert error.code == code
    assert error.status_code is None  # the HTTP answer itself was 2xx


def test_the_message_names_the_event_code_and_text() -> None:
    assert str(error_from_code("server_error", "boom", what="response.failed")) == (
        "response.failed server_error: boom"
    )
    assert str(error_from_code(None, None, what="response.failed")) == "response.failed"


@pytest.mark.parametrize(
    ("error", "kind", "code"),
    [
        (
            {"type": "invalid_request_error", "code": 400, "message": "bad"},
            ProviderBadRequest,
            "invalid_request_error",
        ),
        ({"code": 429}, ProviderRateLimited, None),
        ("plain message", ProviderServerError, None),
        (None, ProviderServerError, None),
    ],
)
def test_an_error_object_is_read_for_its_first_code_and_numeric_status(
    error: Any, kind: type[ProviderError], code: str | None
) -> None:
    typed = error_from_event(error)
    assert type(typed) is kind
    assert typed.code == code
