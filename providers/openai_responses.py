"""The OpenAI Responses API provider (``kind: openai_responses``; DESIGN §2).

Theory of operation
-------------------
``POST {base_url}/responses`` (https://platform.openai.com/docs/api-reference/responses/create)
with ``Authorization: Bearer``. We never send ``previous_response_id``: the whole conversation
goes in ``input`` each round, so every output item of an earlier response must come back:

* system messages → ``instructions`` (joined by blank lines);
* an assistant message with ``provider_items`` (the ``output[]`` of its response, kept by the
  stream's ``provider_items`` or the blocking answer's) → those items verbatim, ``reasoning``
  and ``function_call`` items included (reasoning models reject a call without its reasoning);
  without them → an assistant message plus one ``function_call`` item per tool call;
* a tool result → a ``function_call_output`` item with the call's ``call_id``;
* tools → ``{"type": "function", "name", "description", "parameters", "strict": false}``
  (strict mode would reject ordinary JSON Schemas); ``reasoning_effort`` → ``reasoning.effort``;
  ``max_tokens`` → ``max_output_tokens``.

Streaming decodes with :class:`providers.responses_decode.ResponsesStreamReducer` and returns at
``response.completed``/``response.incomplete`` without waiting for EOF; the blocking call
(``stream: false``) parses the response object with the same closing logic
(:func:`providers.responses_decode.response_events`), so both fold to the same response.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx

from config.models import ProviderConfig
from providers.base import ChatMessage, ChatRequest, CompletionResponse, ModelProvider, fold
from providers.http_stream import ReducedStream
from providers.responses_decode import ResponsesStreamReducer, output_items, response_events
from providers.transport import make_client, post_json

__all__ = ["OpenAIResponsesProvider", "build_responses_body", "is_responses_item"]

_ITEM_TYPES = frozenset({"message", "function_call", "reasoning", "function_call_output"})


def is_responses_item(item: dict[str, Any]) -> bool:
    """True for a Responses API item (as opposed to another provider's opaque item)."""
    kind = item.get("type")
    return isinstance(kind, str) and (
        kind in _ITEM_TYPES or kind.endswith("_call") or kind.startswith("mcp_")
    )


def _assistant_items(message: ChatMessage) -> list[dict[str, Any]]:
    if message.provider_items and all(is_responses_item(i) for i in message.provider_items):
        return [dict(item) for item in message.provider_items]
    items: list[dict[str, Any]] = []
    if message.content:
        items.append({"role": "assistant", "content": message.content})
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments or "{}",
            }
        )
    return items


def build_responses_body(
    config: ProviderConfig, request: ChatRequest, *, stream: bool
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/responses`` for ``request``."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            if message.content:
                instructions.append(message.content)
        elif message.role == "assistant":
            items.extend(_assistant_items(message))
        elif message.role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id or "",
                    "output": message.content,
                }
            )
        else:
            items.append({"role": "user", "content": message.content})
    body: dict[str, Any] = {"model": config.model, "input": items, "stream": stream}
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": False,
            }
            for tool in request.tools
        ]
    if config.reasoning_effort:
        body["reasoning"] = {"effort": config.reasoning_effort}
    if config.max_tokens:
        body["max_output_tokens"] = config.max_tokens
    return body


class OpenAIResponsesProvider(ModelProvider):
    """``kind: openai_responses``: the Responses API over SSE (streaming) or JSON (blocking).

    Also built by the turn loop from an ``openai_chat`` config (same key and base URL) to retry a
    round that a model rejected for combining tools with a reasoning effort (DESIGN §2).
    """

    def __init__(
        self, name: str, config: ProviderConfig, *, client: httpx.AsyncClient | None = None
    ) -> None:
        self.name = name
        self.config = config
        self._client = client or make_client()
        self._owns_client = client is None
        self._url = f"{config.resolved_base_url}/responses"

    def supports_streaming(self) -> bool:
        return True

    def supports_streaming_tool_events(self) -> bool:
        return True

    def _headers(self, *, stream: bool) -> dict[str, str]:
        headers = {"accept": "text/event-stream" if stream else "application/json"}
        if self.config.api_key is not None:
            headers["authorization"] = f"Bearer {self.config.api_key.get_secret_value()}"
        return headers

    def stream(self, request: ChatRequest) -> ReducedStream:
        """Stream one round; ends with ``Final`` at ``response.completed``/``.incomplete``.

        The returned iterator's ``provider_items`` holds the response's ``output[]`` once done:
        store them with the assistant message so the next request sends them back.
        """
        return ReducedStream(
            self._client,
            self._url,
            json_body=build_responses_body(self.config, request, stream=True),
            headers=self._headers(stream=True),
            timeout_secs=self.config.timeout_secs,
            idle_timeout_secs=self.config.idle_timeout_secs,
            reducer=ResponsesStreamReducer(),
        )

    async def complete(self, request: ChatRequest) -> CompletionResponse:
        """One blocking call (``stream: false``), bounded by ``timeout_secs``.

        Raises:
            ProviderError: as the stream; a ``failed`` response raises its typed error.
        """
        response = await post_json(
            self._client,
            self._url,
            json_body=build_responses_body(self.config, request, stream=False),
            headers=self._headers(stream=False),
            timeout_secs=self.config.timeout_secs,
        )
        events = response_events(response)
        return replace(fold(events), provider_items=output_items(response))

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
