"""The OpenAI-compatible API (``kind: openai_api``): Chat Completions for any OpenAI client,
served by the ops server (architecture §3, §7 "Metrics").

Theory of operation: a request is one conversation of its own (``chat_id`` is the completion's
id), its ``messages`` the history (:attr:`~channels.base.InboundMessage.context`): it is handed
to the orchestrator like any chat message, so access, queueing, tools, the outbound policy and the
delivery engine's spacing are the same as in a chat. The engine's writes to that chat become the
answer: :class:`~channels.openai_api.deltas.ContentStream` turns each state into what it adds,
streamed as ``chat.completion.chunk`` events (``text/event-stream``, ending in ``data: [DONE]``)
or, for a blocking request, joined into one ``chat.completion`` when the reply is over
(:meth:`reply_finished`). A client that goes away mid-stream stops the answer as ``/stop``
would, so the provider stream is closed too.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import time
import uuid
from typing import Any

import anyio
from aiohttp import web

from channels.base import (
    Attachment,
    Channel,
    InboundHandler,
    InboundMessage,
    MessageRef,
    StreamMode,
)
from channels.errors import DestinationGone
from channels.openai_api.deltas import ContentStream
from channels.openai_api.kind import KIND, OpenAIApiChannelConfig
from channels.openai_api.wire import (
    CompletionRequest,
    RequestRejected,
    completion,
    completion_delta,
    error_body,
    model_list,
    parse_request,
)
from channels.web.access import bearer_token, token_identity, token_index

__all__ = ["OpenAIApiChannel"]

log = logging.getLogger(__name__)


class _Exchange:
    """One request's answer as the engine writes it: the deltas not yet sent, and whether the
    reply is over (every message handed on for this chat got its :meth:`reply_finished`)."""

    def __init__(self, show_tool_status: bool) -> None:
        self.content = ContentStream(show_tool_status=show_tool_status)
        self.pending: list[str] = []
        self.changed = asyncio.Event()
        self.open_messages = 1  # the request's own; a /stop adds one
        self.usage = (0, 0)
        self.refused: tuple[str, float] | None = None  # a limit's line, when its cap resets

    @property
    def finished(self) -> bool:
        return self.open_messages <= 0

    def show(self, message_id: str, text: str, final: bool) -> None:
        delta = self.content.update(message_id, text, final=final)
        if delta:
            self.pending.append(delta)
            self.changed.set()

    def take(self) -> str:
        taken, self.pending = "".join(self.pending), []
        self.changed.clear()
        return taken


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status)


class OpenAIApiChannel(Channel):
    """``POST {path}/chat/completions`` and ``GET {path}/models`` on the ops server."""

    limits = KIND.limits
    config: OpenAIApiChannelConfig
    served_models: tuple[str, ...] = ()
    """Set by the daemon: the models offered (``GET /v1/models``): the aliases of
    ``agent.models`` when configured, else the chain's models. A request naming another is a
    404 ``model_not_found``; one naming an alias is answered by that model."""

    def __init__(self, name: str, config: OpenAIApiChannelConfig, on_inbound: InboundHandler):
        super().__init__(name, config, on_inbound)
        self._exchanges: dict[str, _Exchange] = {}
        self._ids = itertools.count(1)

    @property
    def stream_mode(self) -> StreamMode:
        return "partial"

    @property
    def http_prefix(self) -> str:
        return self.config.served_prefix()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        for exchange in self._exchanges.values():  # the answers in flight end as they are
            exchange.open_messages = 0
            exchange.changed.set()

    # -- HTTP ------------------------------------------------------------------------------

    async def serve_http(self, request: web.Request) -> web.StreamResponse:
        route = request.path[len(self.config.path) :]
        token = bearer_token(request.headers.get("Authorization"))
        index = token_index(token, self.config.tokens)
        if index is None:
            return _json(
                401,
                error_body(
                    "Incorrect API key provided: send Authorization: Bearer <one of the "
                    "channel's tokens>",
                    "invalid_request_error",
                    "invalid_api_key",
                ),
            )
        if route == "/models" and request.method == "GET":
            return _json(200, model_list(self._models(), int(time.time())))
        if route == "/chat/completions" and request.method == "POST":
            return await self._completions(request, token_identity(self.config.tokens[index]))
        return _json(
            404,
            error_body(f"no route {request.method} {request.path}", "invalid_request_error"),
        )

    def _models(self) -> tuple[str, ...]:
        return self.served_models or ("relaybot",)

    async def _completions(self, request: web.Request, sender: str) -> web.StreamResponse:
        try:
            asked = parse_request(await request.json())
        except RequestRejected as exc:
            return _json(400, error_body(exc.message, "invalid_request_error", None, exc.param))
        except ValueError:  # not JSON, or not UTF-8
            return _json(400, error_body("the body is not JSON", "invalid_request_error"))
        offered = self._models()
        if asked.model is not None and asked.model not in offered:
            return _json(
                404,
                error_body(
                    f"The model {asked.model!r} does not exist here: use one of "
                    f"{', '.join(offered)} (GET {self.config.path}/models)",
                    "invalid_request_error",
                    "model_not_found",
                    "model",
                ),
            )
        chat_id = f"chatcmpl-{uuid.uuid4().hex}"
        exchange = _Exchange(self.config.show_tool_status)
        self._exchanges[chat_id] = exchange
        try:
            await self._on_inbound(
                InboundMessage(
                    channel=self.name,
                    chat_id=chat_id,
                    sender_id=sender,
                    sender_name=sender,
                    text=asked.text,
                    context=asked.context,
                    model=asked.model,
                    attachments=tuple(
                        Attachment(mime, data, len(data)) for mime, data in asked.images
                    ),
                )
            )
            model = asked.model or offered[0]
            if asked.stream:
                return await self._stream(request, chat_id, exchange, asked, model)
            while not exchange.finished:
                await exchange.changed.wait()
                exchange.take()
            if not exchange.content.text:
                return self._unanswered(exchange)
            body = completion(
                chat_id, int(time.time()), model, exchange.content.text, exchange.usage
            )
            return _json(200, body)
        finally:
            # Also when the client went away (a write raised, or aiohttp cancelled us).
            if not exchange.finished:
                with anyio.CancelScope(shield=True):
                    await self._stop_answer(chat_id, sender)
            self._exchanges.pop(chat_id, None)

    @staticmethod
    def _unanswered(exchange: _Exchange) -> web.Response:
        """No text came: a limit refused the request (429 ``rate_limit_exceeded`` with
        ``Retry-After``, seconds until its cap resets), or the bot could not answer (503)."""
        if exchange.refused is not None:
            line, resets_at = exchange.refused
            response = _json(429, error_body(line, "requests", "rate_limit_exceeded"))
            response.headers["Retry-After"] = str(max(1, math.ceil(resets_at - time.time())))
            return response
        return _json(
            503,
            error_body(
                "the bot could not answer now (busy or stopping): try again",
                "server_error",
                "unavailable",
            ),
        )

    async def _stream(
        self,
        request: web.Request,
        chat_id: str,
        exchange: _Exchange,
        asked: CompletionRequest,
        model: str,
    ) -> web.StreamResponse:
        """Chunks as the engine writes; ``finish_reason: stop``, the usage chunk when asked,
        then ``[DONE]``. Nothing is sent before the first text: a reply that never came is a
        503 like the blocking one."""
        created = int(time.time())
        response: web.StreamResponse | None = None

        async def send(body: dict[str, Any] | str) -> None:
            data = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            assert response is not None
            await response.write(f"data: {data}\n\n".encode())

        def piece(delta: dict[str, str] | None, finish: str | None = None) -> dict[str, Any]:
            return completion_delta(
                chat_id,
                created,
                model,
                delta,
                finish,
                usage=exchange.usage,
                include_usage=asked.include_usage,
            )

        while True:
            if not exchange.pending and not exchange.finished:
                await exchange.changed.wait()
            text = exchange.take()
            if text:
                if response is None:
                    response = web.StreamResponse(
                        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
                    )
                    await response.prepare(request)
                    await send(piece({"role": "assistant", "content": ""}))
                await send(piece({"content": text}))
            elif exchange.finished:
                break
        if response is None:
            return self._unanswered(exchange)
        await send(piece({}, "stop"))
        if asked.include_usage:
            await send(piece(None))
        await send("[DONE]")
        await response.write_eof()
        return response

    async def _stop_answer(self, chat_id: str, sender: str) -> None:
        """The client went away: ``/stop`` that request's answer (its provider stream closes)."""
        exchange = self._exchanges.get(chat_id)
        if exchange is not None:
            exchange.open_messages += 1
        log.info("%s: %s: the client went away; stopping its answer", self.name, chat_id)
        await self._on_inbound(
            InboundMessage(
                channel=self.name,
                chat_id=chat_id,
                sender_id=sender,
                sender_name=sender,
                text="/stop",
                context=(),
            )
        )

    # -- the engine's writes ----------------------------------------------------------------

    def _show(self, chat_id: str, message_id: str, text: str, final: bool) -> None:
        """Raises ``DestinationGone`` when the request is over (its client went away, or the
        daemon restarted since): the turn stops, nobody would read the rest."""
        exchange = self._exchanges.get(chat_id)
        if exchange is None:
            raise DestinationGone(f"the request {chat_id} is over")
        exchange.show(message_id, text, final)

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        message_id = str(next(self._ids))
        self._show(chat_id, message_id, text, formatted)
        return MessageRef(chat_id, message_id)

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        self._show(ref.chat_id, ref.message_id, text, formatted)

    async def _delete_message(self, ref: MessageRef) -> None:
        return None  # what was streamed stays streamed

    async def reply_usage(self, chat_id: str, input_tokens: int, output_tokens: int) -> None:
        exchange = self._exchanges.get(chat_id)
        if exchange is not None:
            exchange.usage = (input_tokens, output_tokens)

    async def reply_refused(self, chat_id: str, line: str, resets_at: float) -> None:
        exchange = self._exchanges.get(chat_id)
        if exchange is not None:
            exchange.refused = (line, resets_at)

    async def reply_finished(self, chat_id: str) -> None:
        exchange = self._exchanges.get(chat_id)
        if exchange is not None:
            exchange.open_messages -= 1
            exchange.changed.set()
