"""The transport's failures typed by one class → outcome table (providers/transport_errors.py):
the most specific class decides, aiohttp's cause beneath an httpx exception first, and where the
failure happened shapes the outcome; over real sockets, a refused connect and a TLS refusal are
typed by their reason, not by the ``ConnectTimeout`` httpx-aiohttp names them."""

from __future__ import annotations

import asyncio
import ssl

import aiohttp
import httpx
import pytest
import trustme
from aiohttp.http_exceptions import TransferEncodingError

from providers.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.transport import make_client, open_stream, post_json
from providers.transport_errors import OUTCOMES, Where, provider_error

URL = "https://api.example.test/v1/chat"


def _caused(exc: Exception, cause: BaseException) -> Exception:
    exc.__cause__ = cause
    return exc


def test_every_key_is_an_exception_class_and_every_subclass_comes_before_its_base() -> None:
    keys = list(OUTCOMES)
    assert all(issubclass(key, BaseException) for key in keys)
    for later, key in enumerate(keys):  # the table reads most specific first, as the walk does
        assert not any(issubclass(key, base) and key is not base for base in keys[:later])


@pytest.mark.parametrize(
    ("exc", "where", "expected", "detail"),
    [
        (httpx.PoolTimeout("p"), "send", ProviderConnectionError, "no free connection to"),
        (httpx.ConnectTimeout("c"), "send", ProviderTimeout, "connect"),
        (httpx.ReadTimeout("r"), "read", ProviderTimeout, "idle"),
        (httpx.ReadTimeout("r"), "send", ProviderTimeout, "headers"),
        (httpx.RemoteProtocolError("x"), "read", ProviderConnectionError, "broken"),
        (httpx.RemoteProtocolError("x"), "send", ProviderConnectionError, "broken"),
        (httpx.DecodingError("gzip"), "read", StreamProtocolError, "the body could not"),
        (httpx.DecodingError("gzip"), "post", StreamProtocolError, "the answer could not"),
        # httpx-aiohttp names these ConnectTimeout; the aiohttp cause beneath decides
        (
            _caused(httpx.ConnectTimeout("x"), aiohttp.ServerDisconnectedError()),
            "read", ProviderConnectionError, "broken",
        ),
        (
            _caused(httpx.ReadTimeout("x"), aiohttp.SocketTimeoutError()),
            "read", ProviderTimeout, "idle",
        ),
        (
            _caused(httpx.ConnectTimeout("x"), aiohttp.ConnectionTimeoutError()),
            "send", ProviderTimeout, "connect",
        ),
        (TransferEncodingError("bad"), "read", ProviderConnectionError, "broken"),
    ],
)  # fmt: skip
def test_the_most_specific_class_decides(
    exc: Exception, where: str, expected: type[ProviderError], detail: str
) -> None:
    error = provider_error(exc, Where(URL, where, 7.0))  # type: ignore[arg-type]
    assert type(error) is expected
    assert detail in (getattr(error, "phase", None), getattr(error, "reason", None)) or (
        detail in str(error)
    )


def test_an_exception_that_is_not_the_transports_is_left_alone() -> None:
    assert provider_error(KeyError("x"), Where(URL, "send")) is None


async def test_a_refused_connect_is_refused_not_a_timeout() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    async with make_client() as client:
        with pytest.raises(ProviderConnectionError) as raised:
            await post_json(
                client, f"http://127.0.0.1:{port}/x", json_body={}, headers={}, timeout_secs=5
            )
    assert raised.value.reason == "refused" and raised.value.host == f"127.0.0.1:{port}"
    assert "connection refused by" in str(raised.value)


async def test_an_untrusted_certificate_is_a_tls_failure() -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    trustme.CA().issue_cert("127.0.0.1").configure_cert(context)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server, make_client() as client:
        with pytest.raises(ProviderConnectionError) as raised:
            async with open_stream(
                client, f"https://127.0.0.1:{port}/x", json_body={}, headers={},
                timeout_secs=5, idle_timeout_secs=5,
            ):  # fmt: skip
                pass
    assert raised.value.reason == "tls"
    assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value)
