"""OpenAI Chat Completions provider (``kind: openai_chat``; also OpenAI-compatible servers).

Theory of operation
-------------------
Wire format: ``POST {base_url}/chat/completions``
(https://platform.openai.com/docs/api-reference/chat/create) with ``Authorization: Bearer`` when
a key is configured.

* :meth:`OpenAIChatProvider.stream` sends ``stream: true`` and
  ``stream_options: {"include_usage": true}`` (otherwise no usage is reported while streaming),
  reads the SSE body through :func:`providers.transport.open_stream` (headers bounded by
  ``timeout_secs``, body by the byte-idle bound) and decodes it with the pure
  :class:`providers.openai_chat_decode.ChatCompletionsStreamReducer` in a
  :class:`providers.http_stream.ReducedStream`, as the other formats do. It returns as soon as
  ``[DONE]`` arrives, without waiting for the server to close the socket; after a
  ``finish_reason``, EOF, the idle timeout or a dropped connection also end the stream properly
  (architecture §2).
* :meth:`OpenAIChatProvider.complete` sends ``stream: false`` (no ``stream_options``: OpenAI
  rejects them on a blocking call); the same reducer folds ``choices[0].message``, so both give
  equal :class:`CompletionResponse` objects for the same answer.

Conversation mapping: ``system``/``user`` messages as they are; ``assistant`` messages with
``tool_calls`` (``content: null`` when they hold no text); ``tool`` messages with the
``tool_call_id`` they answer; a user message's images as ``image_url`` content parts with data
URLs (unless ``vision: false``); its documents as ``file`` parts (PDF, unless
``documents: false``) or ``text`` parts marked as untrusted input. Tools use the
``{"type": "function", "function": {...}}`` shape.
"""

from __future__ import annotations

from typing import Any

from config.models import ProviderConfig
from providers.base import (
    ChatMessage,
    ChatRequest,
    CompletionResponse,
    DocumentPart,
    ToolSpec,
    fold,
)
from providers.errors import (
    ProviderBadRequest,
    ProviderError,
)
from providers.http_provider import HttpModelProvider
from providers.http_stream import ReducedStream
from providers.openai_chat_decode import ChatCompletionsStreamReducer

__all__ = [
    "OpenAIChatProvider",
    "build_request_body",
    "message_to_wire",
    "parse_completion",
    "rejects_reasoning_effort",
    "tool_to_wire",
]


def tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    """A tool in the Chat Completions function shape."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def message_to_wire(
    message: ChatMessage, *, vision: bool = True, documents: bool = True
) -> dict[str, Any]:
    """One conversation message in Chat Completions shape. A user message with images (and
    ``vision``) or documents has a content array: its text as a ``text`` part, each document
    (a PDF as a ``file`` part when ``documents``, else its text), then each image as an
    ``image_url`` part holding a ``data:`` URL.

    Raises:
        ValueError: a ``tool`` message without ``tool_call_id``.
    """
    if message.role == "tool":
        if not message.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ],
        }
    if message.role == "user" and ((message.images and vision) or message.documents):
        parts: list[dict[str, Any]] = []
        if message.content:
            parts.append({"type": "text", "text": message.content})
        parts.extend(_document_parts(message.documents, native=documents))
        if vision:
            parts.extend(
                {"type": "image_url", "image_url": {"url": image.data_url()}}
                for image in message.images
            )
        return {"role": "user", "content": parts}
    return {"role": message.role, "content": message.content}


def _document_parts(documents: tuple[DocumentPart, ...], *, native: bool) -> list[dict[str, Any]]:
    """A PDF as a ``file`` content part with a ``data:`` URL after its notice (``native``),
    anything else as a ``text`` part
    (https://platform.openai.com/docs/guides/pdf-files?api-mode=chat)."""
    parts: list[dict[str, Any]] = []
    for document in documents:
        if document.is_pdf and native:
            parts.append({"type": "text", "text": document.notice()})
            file = {"filename": document.file_name, "file_data": document.data_url()}
            parts.append({"type": "file", "file": file})
        else:
            parts.append({"type": "text", "text": document.as_text()})
    return parts


def build_request_body(
    config: ProviderConfig, request: ChatRequest, *, stream: bool
) -> dict[str, Any]:
    """The JSON body of one call. ``max_tokens`` and ``reasoning_effort`` only when configured;
    ``tools`` only when offered (some compatible servers reject an empty list)."""
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [
            message_to_wire(m, vision=config.vision, documents=config.documents)
            for m in request.messages
        ],
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [tool_to_wire(t) for t in request.tools]
    if config.max_tokens is not None:
        body["max_tokens"] = config.max_tokens
    if config.reasoning_effort is not None:
        body["reasoning_effort"] = config.reasoning_effort
    return body


def parse_completion(payload: Any) -> CompletionResponse:
    """A blocking ``chat.completion`` body as a :class:`CompletionResponse`, folded by the
    stream's reducer (:meth:`providers.stream_reducer.StreamReducer.answer`).

    Raises:
        ProviderError: the body is an error object (typed by its code).
        StreamProtocolError: the body has no ``choices[0].message``, or a tool call no name.
    """
    return fold(ChatCompletionsStreamReducer().answer(payload))


def rejects_reasoning_effort(error: ProviderError) -> bool:
    """True for the 400 some OpenAI models send for tools combined with a reasoning effort.

    architecture §2: on that error the round is retried once through the Responses API.
    """
    return isinstance(error, ProviderBadRequest) and "reasoning_effort" in error.message


class OpenAIChatProvider(HttpModelProvider):
    """``kind: openai_chat``: Chat Completions over SSE (streaming) or JSON (blocking)."""

    endpoint = "/chat/completions"

    def stream(self, request: ChatRequest) -> ReducedStream:
        """Stream one round (see :meth:`ModelProvider.stream`).

        Raises (from iteration):
            StreamTruncated: EOF before ``[DONE]`` and before any ``finish_reason``.
            ProviderTimeout: headers (``timeout_secs``) or the byte-idle bound before a
                ``finish_reason``.
            ProviderError: non-2xx answers and error objects in the stream, typed.
        """
        body = build_request_body(self.config, request, stream=True)
        return self._reduced_stream(body, ChatCompletionsStreamReducer())

    async def complete(self, request: ChatRequest) -> CompletionResponse:
        """One blocking call, bounded as a whole by ``timeout_secs``."""
        payload = await self._post(build_request_body(self.config, request, stream=False))
        return parse_completion(payload)
