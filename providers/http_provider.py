"""What every HTTP model provider shares: the client, the endpoint, the bounds, the key.

Theory of operation
-------------------
:class:`HttpModelProvider` is the small base of the four wire formats (Chat Completions,
Responses, Anthropic Messages, Ollama chat). It owns:

* the httpx client: the one passed in (the caller closes it), else one made by
  :func:`providers.transport.make_client` with a pool of ``config.max_connections`` and closed
  by :meth:`HttpModelProvider.aclose`;
* the endpoint URL, ``{base_url}{endpoint}``;
* the request headers: ``accept`` (:attr:`HttpModelProvider.stream_media_type` when streaming,
  JSON otherwise) plus the key's header, ``Authorization: Bearer`` when a key is configured
  (:meth:`HttpModelProvider._auth_headers`; Anthropic overrides it);
* the config's bounds: :meth:`HttpModelProvider._open_stream` opens a streaming POST with
  ``timeout_secs`` (headers) and ``idle_timeout_secs`` (every read),
  :meth:`HttpModelProvider._reduced_stream` feeds that body to a reducer, and
  :meth:`HttpModelProvider._post` makes a blocking POST bounded as a whole by ``timeout_secs``.

A server that ignores ``stream: true`` and answers with one JSON body is read as the blocking
answer it is (:class:`providers.http_stream.ReducedStream`);
:meth:`HttpModelProvider._note_unstreamed` logs that once per provider, not per request
(architecture §2 "A server that does not stream").

A subclass keeps what is its own wire format: the endpoint, the body builder, the reducer, and
the parsing of a blocking answer. All of them stream, tool calls included.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

import httpx

from config.models import ProviderConfig
from providers.base import ModelProvider
from providers.http_stream import ReducedStream
from providers.open_admission import OpenAdmission
from providers.pool_queue import PoolQueue
from providers.stream_reducer import StreamReducer
from providers.transport import BodyStream, make_client, open_stream, post_json

__all__ = ["HttpModelProvider"]

log = logging.getLogger(__name__)


class HttpModelProvider(ModelProvider):
    """A :class:`ModelProvider` that POSTs JSON to one endpoint of ``config.resolved_base_url``.

    Args:
        name: the provider's key in the config.
        config: its :class:`ProviderConfig`.
        client: an httpx client to use (not closed by :meth:`aclose`); by default one is made
            with :func:`providers.transport.make_client` and owned.
    """

    endpoint: ClassVar[str]
    """The path after ``base_url`` (``"/messages"``)."""

    stream_media_type: ClassVar[str] = "text/event-stream"
    """The ``accept`` header of a streaming request (SSE unless the format says otherwise)."""

    def __init__(
        self, name: str, config: ProviderConfig, *, client: httpx.AsyncClient | None = None
    ) -> None:
        self.name = name
        self.config = config
        self._owns_client = client is None
        self._client = (
            client
            if client is not None
            else make_client(
                max_connections=config.max_connections,
                name=name,
                proxies=config.proxy == "environment",
            )
        )
        self._url = f"{config.resolved_base_url}{self.endpoint}"
        self._unstreamed_noted = False

    @property
    def pool_queue(self) -> PoolQueue | None:
        """The requests waiting for one of its client's connections (``None``: a client that
        :func:`~providers.transport.make_client` did not make)."""
        return getattr(self._client, "pool_queue", None)

    @property
    def open_admission(self) -> OpenAdmission | None:
        """The stream opens waiting for a later pass of the event loop (``None``: a client that
        :func:`~providers.transport.make_client` did not make)."""
        return getattr(self._client, "open_admission", None)

    def supports_streaming(self) -> bool:
        return True

    def supports_streaming_tool_events(self) -> bool:
        return True

    async def aclose(self) -> None:
        """Close the client if this provider made it."""
        if self._owns_client:
            await self._client.aclose()

    def _auth_headers(self) -> dict[str, str]:
        """The key's headers: ``Authorization: Bearer <api_key>``, none without a key."""
        if self.config.api_key is None:
            return {}
        return {"authorization": f"Bearer {self.config.api_key.get_secret_value()}"}

    def _headers(self, *, stream: bool) -> dict[str, str]:
        headers = {"accept": self.stream_media_type if stream else "application/json"}
        headers.update(self._auth_headers())
        return headers

    def _open_stream(self, json_body: dict[str, Any]) -> AbstractAsyncContextManager[BodyStream]:
        """A streaming POST of ``json_body``, not yet sent: enter it to get the 2xx body.

        Bounded by ``timeout_secs`` until the headers and by ``idle_timeout_secs`` (seconds)
        between reads; raises as :func:`providers.transport.open_stream`.
        """
        return open_stream(
            self._client,
            self._url,
            json_body=json_body,
            headers=self._headers(stream=True),
            timeout_secs=self.config.timeout_secs,
            idle_timeout_secs=self.config.idle_timeout_secs,
        )

    def _reduced_stream(self, json_body: dict[str, Any], reducer: StreamReducer) -> ReducedStream:
        """The events of a streaming POST of ``json_body``, decoded by ``reducer``."""
        return ReducedStream(
            self._open_stream(json_body), reducer, on_unstreamed=self._note_unstreamed
        )

    def _note_unstreamed(self) -> None:
        """Log, the first time only, that this provider's server answered a streaming request
        with one JSON body (its answers then arrive whole, not as they are written)."""
        if self._unstreamed_noted:
            return
        self._unstreamed_noted = True
        server = httpx.URL(self._url)
        log.warning(
            "provider %r: the server did not stream (%s://%s answered a streaming request "
            "with one application/json body); its answers are read whole, so chats see each "
            "one only when it is complete. Said once per provider.",
            self.name,
            server.scheme,
            server.netloc.decode("ascii", "replace"),
        )

    async def _post(self, json_body: dict[str, Any]) -> Any:
        """A blocking POST of ``json_body``, bounded as a whole by ``timeout_secs``.

        Returns:
            The parsed JSON answer.

        Raises:
            ProviderError: as :func:`providers.transport.post_json`.
        """
        return await post_json(
            self._client,
            self._url,
            json_body=json_body,
            headers=self._headers(stream=False),
            timeout_secs=self.config.timeout_secs,
        )
