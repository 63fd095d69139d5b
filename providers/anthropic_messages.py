"""The Anthropic Messages API provider (``kind: anthropic``; architecture §2).

Theory of operation
-------------------
``POST {base_url}/v1/messages`` (https://docs.anthropic.com/en/api/messages) with the headers
``x-api-key`` and ``anthropic-version: 2023-06-01``. ``base_url`` follows the Anthropic SDK's
convention (architecture §2): ``https://api.anthropic.com``, so a value copied from
``ANTHROPIC_BASE_URL`` or a proxy's docs works; one that already ends in ``/v1`` is accepted and
never doubled (:func:`messages_url`). The request maps our neutral messages to the
API's shape:

* system messages → the top-level ``system`` string (joined by blank lines);
* an assistant message → ``text`` and ``tool_use`` blocks (``input`` is the parsed arguments), or
  its ``provider_items`` verbatim when they are Anthropic content blocks (thinking blocks must
  return unchanged);
* a tool result → a ``tool_result`` block with the call's ``tool_use_id``, inside a *user*
  message; a user message's images are ``image`` blocks with a base64 source, before its text
  (none with ``vision: false``); consecutive messages of one role are merged into one, because
  the API wants user and assistant turns to alternate and all results of one assistant turn
  in the next user turn;
* ``max_tokens`` is required: the configured value, else 4096 (more with extended thinking);
* ``reasoning_effort`` turns on extended thinking with a budget of 1024/4096/16384 tokens.

Streaming decodes with :class:`providers.anthropic_decode.AnthropicStreamReducer`; the blocking
call (``stream: false``) folds the ``Message`` with the same reducer
(:func:`providers.anthropic_decode.message_events`), so both fold to the same response.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx

from config.models import ProviderConfig
from providers.anthropic_decode import AnthropicStreamReducer, message_events
from providers.base import (
    ChatMessage,
    ChatRequest,
    CompletionResponse,
    fold,
    own_provider_items,
)
from providers.http_provider import HttpModelProvider
from providers.http_stream import ReducedStream

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "AnthropicMessagesProvider",
    "build_messages_body",
    "messages_url",
]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header value (https://docs.anthropic.com/en/api/versioning)."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when the config sets none (the API requires one)."""

_THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384}
"""Extended-thinking ``budget_tokens`` per ``reasoning_effort`` (the API's minimum is 1024)."""

_BLOCK_TYPES = frozenset({"text", "thinking", "redacted_thinking", "tool_use", "server_tool_use"})


def _is_anthropic_block(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and (kind in _BLOCK_TYPES or kind.endswith("_tool_result"))


def _assistant_blocks(message: ChatMessage) -> list[dict[str, Any]]:
    """An assistant message rebuilt from its text and tool calls."""
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": arguments if isinstance(arguments, dict) else {},
            }
        )
    return blocks


def _user_blocks(message: ChatMessage, vision: bool, documents: bool) -> list[dict[str, Any]]:
    """A user message's blocks: each image as an ``image`` block with a base64 source, each
    document (a PDF as a ``document`` block with a base64 source after its notice when
    ``documents``, else its text marked as untrusted input), then its text
    (https://docs.anthropic.com/en/docs/build-with-claude/vision and
    https://docs.anthropic.com/en/docs/build-with-claude/pdf-support put them first)."""
    blocks: list[dict[str, Any]] = []
    if vision:
        blocks.extend(
            {
                "type": "image",
                "source": {"type": "base64", "media_type": image.mime_type, "data": image.base64()},
            }
            for image in message.images
        )
    for document in message.documents:
        if document.is_pdf and documents:
            blocks.append({"type": "text", "text": document.notice()})
            source = {"type": "base64", "media_type": document.mime_type, "data": document.base64()}
            blocks.append({"type": "document", "source": source, "title": document.file_name})
        else:
            blocks.append({"type": "text", "text": document.as_text()})
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    return blocks


def _to_turns(
    messages: tuple[ChatMessage, ...], *, vision: bool = True, documents: bool = True
) -> tuple[str, list[dict[str, Any]]]:
    """(system text, alternating user/assistant messages with block lists)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        if message.role == "assistant":
            role = "assistant"
            blocks = own_provider_items(message, _is_anthropic_block) or _assistant_blocks(message)
        elif message.role == "tool":
            role = "user"
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
            }
            if message.content:  # an empty result is sent without content
                result["content"] = message.content
            blocks = [result]
        else:
            role = "user"
            blocks = _user_blocks(message, vision, documents)
        if not blocks:
            continue  # the API rejects empty messages and empty text blocks
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system), turns


def build_messages_body(
    config: ProviderConfig, request: ChatRequest, *, stream: bool
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages`` for ``request``."""
    system, turns = _to_turns(request.messages, vision=config.vision, documents=config.documents)
    budget = _THINKING_BUDGETS.get(config.reasoning_effort or "")
    max_tokens = config.max_tokens or (DEFAULT_MAX_TOKENS + (budget or 0))
    body: dict[str, Any] = {
        "model": config.model,
        "max_tokens": max_tokens,
        "messages": turns,
        "stream": stream,
    }
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    if budget is not None:
        budget = min(budget, max_tokens - 1)  # the API wants budget_tokens < max_tokens
        if budget >= 1024:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return body


def messages_url(base_url: str) -> str:
    """The Messages endpoint of ``base_url``: ``{base_url}/v1/messages``, or
    ``{base_url}/messages`` when ``base_url`` already ends in ``/v1`` (trailing ``/`` ignored).

    >>> messages_url("https://api.anthropic.com")
    'https://api.anthropic.com/v1/messages'
    >>> messages_url("https://proxy.example/anthropic/v1/")
    'https://proxy.example/anthropic/v1/messages'
    """
    base = base_url.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


class AnthropicMessagesProvider(HttpModelProvider):
    """``kind: anthropic``: the Messages API over SSE (streaming) or JSON (blocking).

    Requests go to :func:`messages_url` of ``config.resolved_base_url``.
    """

    endpoint = "/v1/messages"

    def __init__(
        self, name: str, config: ProviderConfig, *, client: httpx.AsyncClient | None = None
    ) -> None:
        super().__init__(name, config, client=client)
        self._url = messages_url(config.resolved_base_url)

    def _auth_headers(self) -> dict[str, str]:
        """``x-api-key`` (empty without a key) and the pinned ``anthropic-version``."""
        key = self.config.api_key.get_secret_value() if self.config.api_key else ""
        return {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}

    def stream(self, request: ChatRequest) -> ReducedStream:
        """Stream one round; ends with ``Final`` at ``message_stop``.

        The returned iterator's ``provider_items`` holds the answer's content blocks when it
        contains thinking blocks (store them with the assistant message).
        """
        return self._reduced_stream(
            build_messages_body(self.config, request, stream=True), AnthropicStreamReducer()
        )

    async def complete(self, request: ChatRequest) -> CompletionResponse:
        """One blocking call (``stream: false``), bounded by ``timeout_secs``."""
        message = await self._post(build_messages_body(self.config, request, stream=False))
        events, items = message_events(message)
        return replace(fold(events), provider_items=items)
