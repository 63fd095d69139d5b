"""What the user reads when a round failed: one table from error class to text (architecture §2).

Theory of operation
-------------------
A failed round ends with the interrupted marker and a cause in a few words that says what to do
(architecture §3 "Interrupted answers"). :data:`CAUSES` maps each class of
:mod:`providers.errors` to a function that writes that text from the error and a
:class:`FailureContext` (which provider, its config, how many attempts). :func:`user_cause`
walks the error's class hierarchy (its MRO), most specific class first, and uses the first
class the table has — as httpx's ``map_httpcore_exceptions`` picks the most specific mapping —
so a subclass without an entry reads as its parent, and :class:`ProviderError` is the last
word. Pure: no I/O; the names an unknown model's server lists are fetched before
(:func:`providers.model_list.list_models`) and carried on the error.

The provider's own message never reaches the chat: it goes to the log line of the failure
(redacted like every log line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from config.models import ProviderConfig
from providers.errors import (
    ContextLengthExceeded,
    ModelNotFound,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    ProxyVia,
    QuotaExhausted,
    StreamProtocolError,
    StreamTruncated,
)

__all__ = [
    "CAUSES",
    "MAX_LISTED_MODELS",
    "FailureContext",
    "unreachable_cause",
    "user_cause",
    "wait_words",
]

MAX_LISTED_MODELS = 10
"""At most this many of the names a server lists are shown."""


@dataclass(frozen=True, slots=True)
class FailureContext:
    """Where a failure happened.

    Attributes:
        provider: the provider's key in ``providers`` (``None`` when not known).
        config: its config (``None`` when not known).
        attempts: attempts made for the round (0 when not counted).
    """

    provider: str | None = None
    config: ProviderConfig | None = None
    attempts: int = 0
    alone: bool = False
    """The request that failed carried the user's message and nothing of the history: a
    context overflow is then the message's own size, which ``/reset`` cannot mend."""

    def setting(self, field: str) -> str:
        """Where ``field`` of the provider is set: ``providers.openai.api_key``, preceded by
        the environment variable its value was read from, when it was
        (``OPENAI_API_KEY / providers.openai.api_key``: a ``${NAME}`` of the file, or the
        variable the embedded default reads). A value written in the file names no variable."""
        key = f"providers.{self.provider or 'NAME'}.{field}"
        variable = self.config.variable_of(field) if self.config is not None else None
        return f"{variable} / {key}" if variable else key

    @property
    def host(self) -> str | None:
        """``host:port`` of the provider's API root."""
        if self.config is None:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(self.config.resolved_base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return f"{parts.hostname}:{port}"


def wait_words(seconds: float) -> str:
    """``"in 30 s"``, ``"in 5 min"``, ``"in 2 h"`` (rounded up)."""
    if seconds < 90:
        return f"in {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"in {-(-seconds // 60):.0f} min"
    return f"in {-(-seconds // 3600):.0f} h"


def _tries(context: FailureContext) -> str:
    n = context.attempts
    return f" after {n} tr{'y' if n == 1 else 'ies'}" if n else ""


def _status(error: ProviderError) -> str:
    return f" (HTTP {error.status_code})" if error.status_code else ""


def _unreachable(error: ProviderConnectionError, context: FailureContext) -> str:
    host = error.host or context.host or "the model server"
    return unreachable_cause(error, host, context.setting("base_url"), tries=_tries(context))


def unreachable_cause(
    error: ProviderConnectionError,
    host: str,
    where: str,
    *,
    service: str = "the model service",
    tries: str = "",
) -> str:
    """The cause of a connection to ``host`` (``host:port``) that failed, naming ``service``
    and the one setting to check, ``where`` (``providers.main.base_url``; a channel's check
    passes its own, ``channels.tg.base_url``); when the failure was at a proxy
    (``error.proxy``), the proxy and the environment variable that named it instead."""
    if error.proxy is not None:
        return _proxy_cause(error, error.proxy, host, service, tries)
    if error.reason == "refused":
        return (
            f"cannot reach {service}: {host} refused the connection (is it running? check {where})"
        )
    if error.reason == "dns":
        return f"cannot reach {service}: the name of {host} does not resolve (check {where})"
    if error.reason == "tls":
        return (
            f"cannot reach {service}: the TLS handshake with {host} failed (an http:// "
            f"server given as https://, or a certificate not trusted: check {where}, SSL_CERT_FILE)"
        )
    if error.reason == "broken":
        return f"the connection to {service} at {host} broke{tries}: try again"
    return f"cannot reach {service} at {host} (check {where})"


def _proxy_cause(
    error: ProviderConnectionError, proxy: ProxyVia, host: str, service: str, tries: str
) -> str:
    named = f"the proxy {proxy.host} ({proxy.variable})"
    direct = f"or add {host.rsplit(':', 1)[0]} to NO_PROXY to reach it directly"
    if error.reason == "refused":
        return (
            f"cannot reach {service}: {named} refused the connection (is it running? "
            f"check {proxy.variable}, {direct})"
        )
    if error.reason == "dns":
        return (
            f"cannot reach {service}: the name of {named} does not resolve (check {proxy.variable})"
        )
    if error.reason == "tls":
        return (
            f"cannot reach {service}: the TLS handshake with {named} failed (check "
            f"{proxy.variable}, SSL_CERT_FILE)"
        )
    if error.reason == "tunnel" and error.status_code == 407:
        return (
            f"cannot reach {service}: {named} asks for a user and password (HTTP 407): give "
            f"them in {proxy.variable}, in its URL before the host"
        )
    if error.reason == "broken":
        return (
            f"the connection to {service} at {host} through {named} broke{tries}: check the "
            "proxy, or try again"
        )
    if error.reason == "tunnel":
        answer = f"it answered HTTP {error.status_code}: " if error.status_code else ""
        return (
            f"cannot reach {service}: {named} would not open a connection to {host} "
            f"({answer}check the proxy, {direct})"
        )
    return f"cannot reach {service}: {named} could not be reached (check {proxy.variable})"


def _timeout(error: ProviderTimeout, context: FailureContext) -> str:
    if error.phase == "connect" and error.proxy is not None:
        proxy = error.proxy
        return (
            f"cannot reach the model service: no connection to the proxy {proxy.host} "
            f"({proxy.variable}) within 10 s (check {proxy.variable} and the network)"
        )
    if error.phase == "connect":
        host = context.host or "the model server"
        return (
            f"cannot reach the model service: no connection to {host} within 10 s "
            "(check the network)"
        )
    return "the model did not answer in time"


def _unknown_model(error: ModelNotFound, context: FailureContext) -> str:
    model = error.model or (context.config.model if context.config else None)
    named = f' "{model}"' if model else ""
    where = context.setting("model")
    text = f"the model service does not know the model{named}"
    if error.available:
        shown = error.available[:MAX_LISTED_MODELS]
        left = len(error.available) - len(shown)
        more = f" and {left} more" if left else ""
        return f"{text}; it lists: {', '.join(shown)}{more} (set {where})"
    if error.available is not None:
        return f"{text}, and it lists no models (set {where})"
    return f"{text} (check {where})"


def _auth(error: ProviderAuthError, context: FailureContext) -> str:
    where = context.setting("api_key")
    if error.status_code == 403:
        return f"the model service denied access with this API key (check {where})"
    return f"the model service refused the API key (check {where})"


def _rate_limited(error: ProviderRateLimited, context: FailureContext) -> str:
    when = wait_words(error.retry_after) if error.retry_after is not None else "in a minute"
    return f"the model service is rate limiting requests: try again {when}"


def _quota(error: QuotaExhausted, context: FailureContext) -> str:
    return (
        "the model service's quota or credit is used up: add credit or raise the limit in the "
        "provider account's billing settings"
    )


def _context_length(error: ContextLengthExceeded, context: FailureContext) -> str:
    if context.alone:
        return (
            "the message itself is too long for the model: shorten it, or use a model with a "
            "larger context window"
        )
    return "the conversation is too long for the model: send /reset to start afresh"


def _bad_request(error: ProviderBadRequest, context: FailureContext) -> str:
    if error.status_code == 404:  # a 404 that names no model: the path is not an API's
        where = context.setting("base_url")
        return f"the model service has no such endpoint (HTTP 404): check {where}"
    return f"the model service rejected the request{_status(error)} (the log has its message)"


def _server(error: ProviderServerError, context: FailureContext) -> str:
    proxy = error.proxy
    if proxy is not None:  # a gateway error through a proxy: the proxy's own, often
        host = (context.host or "the model server").rsplit(":", 1)[0]
        return (
            f"the proxy {proxy.host} ({proxy.variable}), or the model service behind it, "
            f"answered HTTP {error.status_code}{_tries(context)} (a proxy answers so when it "
            f"cannot reach the server: check the proxy, or add {host} to NO_PROXY to reach "
            "it directly)"
        )
    return f"the model service failed{_status(error)}{_tries(context)}: try again later"


def _stopped(error: ProviderError, context: FailureContext) -> str:
    return "the model stopped before finishing"


def _failed(error: ProviderError, context: FailureContext) -> str:
    return f"the model service failed{_tries(context)}"


CAUSES: dict[type[ProviderError], Callable[[Any, FailureContext], str]] = {
    ProviderError: _failed,
    ProviderServerError: _server,
    ProviderBadRequest: _bad_request,
    ModelNotFound: _unknown_model,
    ContextLengthExceeded: _context_length,
    ProviderAuthError: _auth,
    ProviderRateLimited: _rate_limited,
    QuotaExhausted: _quota,
    ProviderTimeout: _timeout,
    ProviderConnectionError: _unreachable,
    StreamTruncated: _stopped,
    StreamProtocolError: _stopped,
}
"""Error class → the user's text. Looked up along the error's MRO: the most specific wins."""


def user_cause(error: BaseException | None, context: FailureContext | None = None) -> str:
    """The few words of the interrupted marker for ``error`` (architecture §2 "Failures"):
    what failed and what to do. ``None`` or a non-provider error: "the model service failed"."""
    context = context or FailureContext()
    for cls in type(error).__mro__:
        cause = CAUSES.get(cls)
        if cause is not None:
            return cause(error, context)
    return "the model service failed"
