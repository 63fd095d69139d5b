"""The OpenAI Responses API provider (``kind: openai_responses``; architecture §2).

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
(``stream: false``) folds the response object with the same reducer
(:meth:`providers.stream_reducer.StreamReducer.answer`), so both fold to the same response.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from config.models import ProviderConfig
from providers.base import (
    ChatMessage,
    ChatRequest,
    CompletionResponse,
    DocumentPart,
    fold,
    own_provider_items,
)
from providers.http_provider import HttpModelProvider
from providers.http_stream import ReducedStream
from providers.responses_decode import ResponsesStreamReducer

__all__ = ["OpenAIResponsesProvider", "build_responses_body", "is_responses_item"]

_ITEM_TYPES = frozenset({"message", "function_call", "reasoning", "function_call_output"})


def is_responses_item(item: dict[str, Any]) -> bool:
    """True for a Responses API item (as opposed to another provider's opaque item)."""
    kind = item.get("type")
    return isinstance(kind, str) and (
        kind in _ITEM_TYPES or kind.endswith("_call") or kind.startswith("mcp_")
    )


def _assistant_items(message: ChatMessage) -> list[dict[str, Any]]:
    """An assistant message rebuilt from its text and tool calls."""
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


def _document_parts(documents: tuple[DocumentPart, ...], *, native: bool) -> list[dict[str, Any]]:
    """A PDF as an ``input_file`` part with a ``data:`` URL after its notice (``native``),
    anything else as an ``input_text`` part
    (https://platform.openai.com/docs/guides/pdf-files?api-mode=responses)."""
    parts: list[dict[str, Any]] = []
    for document in documents:
        if document.is_pdf and native:
            parts.append({"type": "input_text", "text": document.notice()})
            parts.append(
                {
                    "type": "input_file",
                    "filename": document.file_name,
                    "file_data": document.data_url(),
                }
            )
        else:
            parts.append({"type": "input_text", "text": document.as_text()})
    return parts


def build_responses_body(
    config: ProviderConfig, request: ChatRequest, *, stream: bool
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/responses`` for ``request``. A user message's images are
    ``input_image`` parts (data URLs) after its ``input_text`` (none with ``vision: false``), its
    documents before them: a PDF as an ``input_file`` (unless ``documents: false``), others as
    ``input_text`` marked as untrusted input."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            if message.content:
                instructions.append(message.content)
        elif message.role == "assistant":
            items.extend(
                own_provider_items(message, is_responses_item) or _assistant_items(message)
            )
        elif message.role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id or "",
                    "output": message.content,
                }
            )
        elif (message.images and config.vision) or message.documents:
            # https://platform.openai.com/docs/guides/images-vision: input_text + input_image
            content: list[dict[str, Any]] = []
            if message.content:
                content.append({"type": "input_text", "text": message.content})
            content.extend(_document_parts(message.documents, native=config.documents))
            if config.vision:
                content.extend(
                    {"type": "input_image", "image_url": image.data_url()}
                    for image in message.images
                )
            items.append({"role": "user", "content": content})
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


class OpenAIResponsesProvider(HttpModelProvider):
    """``kind: openai_responses``: the Responses API over SSE (streaming) or JSON (blocking).

    Also built by the turn loop from an ``openai_chat`` config (same key and base URL) to retry a
    round that a model rejected for combining tools with a reasoning effort (architecture §2).
    """

    endpoint = "/responses"

    def stream(self, request: ChatRequest) -> ReducedStream:
        """Stream one round; ends with ``Final`` at ``response.completed``/``.incomplete``.

        The returned iterator's ``provider_items`` holds the response's ``output[]`` once done:
        store them with the assistant message so the next request sends them back.
        """
        return self._reduced_stream(
            build_responses_body(self.config, request, stream=True), ResponsesStreamReducer()
        )

    async def complete(self, request: ChatRequest) -> CompletionResponse:
        """One blocking call (``stream: false``), bounded by ``timeout_secs``.

        Raises:
            ProviderError: as the stream; a ``failed`` response raises its typed error.
        """
        response = await self._post(build_responses_body(self.config, request, stream=False))
        reducer = ResponsesStreamReducer()
        events = reducer.answer(response)
        return replace(fold(events), provider_items=reducer.provider_items)
