"""A proxy's transport that says which proxy a request failed to pass (architecture §2
"Transport"): a dead proxy is reported as the proxy, not as the model server.

Theory of operation
-------------------
A request through a proxy connects to the proxy, never to the server its URL names: for an
``http://`` URL the proxy is sent the request in absolute form (RFC 9112 §3.2.2), for an
``https://`` URL it is asked for a tunnel first (``CONNECT``, RFC 9110 §9.3.6). So a connect
that fails, or times out, on that path failed at the proxy, and a tunnel the proxy answers with
a status other than 2xx is the proxy's refusal. httpx raises those as ``httpx.ConnectError``,
``httpx.ConnectTimeout`` and ``httpx.ProxyError`` from its transport's
``handle_async_request``, which says nothing of the proxy: :class:`ProxiedTransport` wraps the
proxy transport that :func:`~providers.provider_client.environment_mounts` mounts and raises
them again as :class:`ProxyConnectError`, :class:`ProxyConnectTimeout` and
:class:`ProxyTunnelRefused` (subclasses of httpx's, chained ``from`` them), which carry the
proxy's :class:`~providers.errors.ProxyVia`. :mod:`providers.transport_errors` turns them into
provider errors that name it. A TLS handshake that fails through an ``http://`` proxy's tunnel
is the server's (the proxy only copies its bytes): the translation keeps the server's host then.
A response that came through the proxy carries it in its ``extensions``
(:data:`PROXY_EXTENSION`): a gateway error (502, 503, 504) may be the proxy's own answer
(:func:`through_proxy`).
"""

from __future__ import annotations

import os

import httpx

from providers.errors import ProviderConnectionError, ProviderError, ProviderServerError, ProxyVia

__all__ = [
    "PROXY_EXTENSION",
    "ProxiedTransport",
    "ProxyConnectError",
    "ProxyConnectTimeout",
    "ProxyPassBroken",
    "ProxyTunnelRefused",
    "proxy_variable",
    "through_proxy",
]


class ProxyConnectError(httpx.ConnectError):
    """Connecting to the proxy (or through its tunnel, for TLS) failed; ``via``: the proxy."""

    def __init__(self, message: str, *, request: httpx.Request, via: ProxyVia) -> None:
        super().__init__(message, request=request)
        self.via = via


class ProxyConnectTimeout(httpx.ConnectTimeout):
    """No connection to the proxy within the connect bound; ``via``: the proxy."""

    def __init__(self, message: str, *, request: httpx.Request, via: ProxyVia) -> None:
        super().__init__(message, request=request)
        self.via = via


class ProxyTunnelRefused(httpx.ProxyError):
    """The proxy answered ``CONNECT`` with a status other than 2xx (``message``: httpx's, the
    status line, ``"502 Bad Gateway"``); ``via``: the proxy."""

    def __init__(self, message: str, *, request: httpx.Request, via: ProxyVia) -> None:
        super().__init__(message, request=request)
        self.via = via


class ProxyPassBroken(httpx.TransportError):
    """The connection through the proxy closed or broke before the response's headers (the
    proxy's, or the server's behind it: the two cannot be told apart); ``via``: the proxy."""

    def __init__(self, message: str, *, request: httpx.Request, via: ProxyVia) -> None:
        super().__init__(message, request=request)
        self.via = via


class ProxiedTransport(httpx.AsyncBaseTransport):
    """``inner`` (httpx's transport through the proxy at ``url``, named by the environment
    variable ``variable``), raising its failures to reach or pass the proxy as the classes
    above; everything else passes through unchanged."""

    def __init__(self, inner: httpx.AsyncBaseTransport, url: str, variable: str) -> None:
        self._inner = inner
        proxy = httpx.URL(url)
        port = proxy.port or (443 if proxy.scheme == "https" else 80)
        host = f"[{proxy.host}]" if ":" in proxy.host else proxy.host  # IPv6, as in a URL
        self.via = ProxyVia(f"{host}:{port}", variable, proxy.scheme)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.ConnectTimeout as exc:
            raise ProxyConnectTimeout(str(exc), request=request, via=self.via) from exc
        except httpx.ConnectError as exc:
            raise ProxyConnectError(str(exc), request=request, via=self.via) from exc
        except httpx.ProxyError as exc:
            raise ProxyTunnelRefused(str(exc), request=request, via=self.via) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise ProxyPassBroken(str(exc), request=request, via=self.via) from exc
        response.extensions[PROXY_EXTENSION] = self.via
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


PROXY_EXTENSION = "relaybot.proxy"
"""The key of a response's ``extensions`` (httpx's per-response dictionary) under which
:class:`ProxiedTransport` puts the :class:`~providers.errors.ProxyVia` it came through."""


def through_proxy(error: ProviderError, response: httpx.Response) -> ProviderError:
    """``error``, the typed error of ``response``'s status; through a proxy, a gateway error
    (502, 503, 504) names it (:attr:`ProviderServerError.proxy`: a forwarding proxy that cannot
    reach the server answers so itself, squid's ``ERR_CONNECT_FAIL``), and a 407 (Proxy
    Authentication Required, the proxy's own by definition) is the proxy's refusal instead, not
    sent again."""
    via = response.extensions.get(PROXY_EXTENSION)
    if not isinstance(via, ProxyVia):
        return error
    if response.status_code == 407:
        url = response.request.url
        refused = ProviderConnectionError(
            f"the proxy {via.host} ({via.variable}) answered {url.host} with 407",
            host=f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}",
            reason="tunnel",
            proxy=via,
            status_code=407,
        )
        refused.retryable = False  # its credentials will not change by themselves
        return refused
    if isinstance(error, ProviderServerError) and response.status_code in (502, 503, 504):
        error.proxy = via
    return error


def proxy_variable(scheme: str) -> str:
    """The environment variable that names the proxy for ``scheme`` (``http``, ``https``,
    ``all``) as :func:`urllib.request.getproxies` reads it: the lower-case one when it is
    set (it wins), else the upper-case one."""
    lower = f"{scheme}_proxy"
    return lower if os.environ.get(lower) else lower.upper()
