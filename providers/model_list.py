"""The models a provider's server lists (architecture §2 "Failures", §7 ``doctor``).

Theory of operation
-------------------
Each wire format's server has an endpoint that lists the models it serves:

* OpenAI and every OpenAI-compatible server (``openai_chat``, ``openai_responses``):
  ``GET {base_url}/models`` → ``{"data": [{"id": ...}, ...]}``
  (https://platform.openai.com/docs/api-reference/models/list);
* Anthropic: ``GET {root}/v1/models`` with ``x-api-key`` and ``anthropic-version`` →
  ``{"data": [{"id": ...}, ...]}`` (https://docs.anthropic.com/en/api/models-list);
* Ollama: ``GET {base_url}/api/tags`` → ``{"models": [{"name": ...}, ...]}``.

:func:`list_models` asks it once, bounded as a whole, and returns the names in the server's
order. The three users: the interrupted marker of an unknown model names what the server has,
``relaybot doctor`` checks the configured model against it, and the embedded default with
``OPENAI_BASE_URL`` and no ``OPENAI_MODEL`` takes the first name. Failures are the typed
errors of :mod:`providers.transport` (a 401 is a :class:`~providers.errors.ProviderAuthError`).
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx

from config.models import ProviderConfig
from providers.bounded_json import parse_json
from providers.errors import ProviderError, ProviderServerError, ProviderTimeout
from providers.proxy_transport import through_proxy
from providers.status_errors import error_from_status
from providers.transport import make_client
from providers.transport_errors import Where, provider_error

__all__ = ["LIST_TIMEOUT_SECS", "list_models", "models_url"]

LIST_TIMEOUT_SECS = 10.0
"""Bound of one listing, in seconds."""

ANTHROPIC_VERSION = "2023-06-01"


def models_url(config: ProviderConfig) -> str:
    """The listing endpoint of ``config`` (see the module docstring)."""
    base = config.resolved_base_url
    if config.kind == "ollama":
        return f"{base}/api/tags"
    if config.kind == "anthropic":
        return f"{base}/models" if base.endswith("/v1") else f"{base}/v1/models"
    return f"{base}/models"


def _headers(config: ProviderConfig) -> dict[str, str]:
    headers = {"accept": "application/json"}
    if config.api_key is None:
        return headers
    key = config.api_key.get_secret_value()
    if config.kind == "anthropic":
        headers.update({"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION})
    else:
        headers["authorization"] = f"Bearer {key}"
    return headers


def _names(body: Any) -> list[str]:
    """Model names of a listing body: ``data[].id`` (OpenAI, Anthropic) or
    ``models[].name`` (Ollama). Raises ProviderServerError when it is neither."""
    items = body.get("data") if isinstance(body, dict) else None
    key = "id"
    if items is None and isinstance(body, dict):
        items, key = body.get("models"), "name"
    if not isinstance(items, list):
        raise ProviderServerError("the models list is not the expected JSON")
    return [str(item[key]) for item in items if isinstance(item, dict) and item.get(key)]


async def list_models(
    config: ProviderConfig,
    *,
    client: httpx.AsyncClient | None = None,
    timeout_secs: float = LIST_TIMEOUT_SECS,
) -> list[str]:
    """The model names the server of ``config`` lists, in its order.

    Args:
        config: the provider (kind, base URL and key are used).
        client: an httpx client to use (not closed); by default one is made and closed.
        timeout_secs: bound of the whole request, in seconds.

    Raises:
        ProviderError: typed as any provider failure: :class:`ProviderAuthError` for a refused
            key, :class:`ProviderConnectionError` (with its ``reason``), :class:`ProviderTimeout`
            (phase ``"total"``), :class:`ProviderBadRequest` (e.g. 404: the server has no
            listing), :class:`ProviderServerError` for 5xx or a body that is not a listing.
    """
    url = models_url(config)
    own = client is None
    proxies = config.proxy == "environment"
    http = client if client is not None else make_client(max_connections=1, proxies=proxies)
    try:
        with anyio.fail_after(timeout_secs):
            response = await http.get(url, headers=_headers(config))
    except TimeoutError as exc:
        raise ProviderTimeout(f"no models list within {timeout_secs:g} s", phase="total") from exc
    except Exception as exc:
        raise provider_error(exc, Where(url, "post")) or exc from exc
    finally:
        if own:
            await http.aclose()
    if response.status_code >= 300:
        refusal = error_from_status(response.status_code, response.content, response.headers)
        raise through_proxy(refusal, response)
    try:
        return _names(parse_json(response.content, what="models list"))
    except ProviderError:
        raise
    except (KeyError, TypeError, ValueError) as exc:  # pragma: no cover - guarded by _names
        raise ProviderServerError(f"the models list could not be read: {exc}") from exc
