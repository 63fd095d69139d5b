"""The Ollama native chat provider (``kind: ollama``; architecture §2).

Theory of operation
-------------------
``POST {base_url}/api/chat`` (https://github.com/ollama/ollama/blob/main/docs/api.md) answers
with NDJSON (``application/x-ndjson``) when ``stream: true`` and with one JSON object when
``stream: false``. Both are decoded by :class:`providers.ollama_decode.OllamaStreamReducer`
(the blocking object is fed to it whole), so they fold to the same response.

The request maps our neutral messages as Ollama expects them:

* assistant tool calls → ``tool_calls: [{"function": {"name", "arguments": {...}}}]`` with the
  arguments as an *object* (Ollama rejects JSON text there);
* a tool result → ``{"role": "tool", "content": ..., "tool_name": ...}`` (Ollama matches results
  by tool name; our generated call ids never reach it);
* a user message's images → ``images``: a list of base64 texts (none with ``vision: false``);
  its documents (PDFs too: Ollama reads no files) → their text after the message's, marked as
  untrusted input;
* tools → ``{"type": "function", "function": {...}}``; ``max_tokens`` → ``options.num_predict``;
  ``reasoning_effort`` → ``think`` (the level, for models that think).

``api_key`` is optional; when set it is sent as ``Authorization: Bearer`` (Ollama behind a proxy,
or ollama.com).
"""

from __future__ import annotations

import json
from typing import Any

from config.models import ProviderConfig
from providers.base import ChatMessage, ChatRequest, CompletionResponse, fold
from providers.http_provider import HttpModelProvider
from providers.http_stream import ReducedStream
from providers.ollama_decode import OllamaStreamReducer
from providers.openai_chat import tool_to_wire

__all__ = ["OllamaChatProvider", "build_chat_body"]


def _arguments_object(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _to_messages(messages: tuple[ChatMessage, ...], *, vision: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id → tool name, for results that lack the name
    for message in messages:
        if message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {"function": {"name": c.name, "arguments": _arguments_object(c.arguments)}}
                    for c in message.tool_calls
                ]
                names.update((c.id, c.name) for c in message.tool_calls)
            out.append(entry)
        elif message.role == "tool":
            name = message.name or names.get(message.tool_call_id or "", "")
            out.append({"role": "tool", "content": message.content, "tool_name": name})
        else:
            content = "\n\n".join(
                [message.content, *(d.as_text() for d in message.documents)]
                if message.content
                else [d.as_text() for d in message.documents]
            )
            entry = {"role": message.role, "content": content}
            if message.images and vision:
                entry["images"] = [image.base64() for image in message.images]
            out.append(entry)
    return out


def build_chat_body(
    config: ProviderConfig, request: ChatRequest, *, stream: bool
) -> dict[str, Any]:
    """The JSON body of ``POST /api/chat`` for ``request``."""
    body: dict[str, Any] = {
        "model": config.model,
        "messages": _to_messages(request.messages, vision=config.vision),
        "stream": stream,
    }
    if request.tools:
        body["tools"] = [tool_to_wire(tool) for tool in request.tools]  # the OpenAI shape
    if config.max_tokens:
        body["options"] = {"num_predict": config.max_tokens}
    if config.reasoning_effort:
        body["think"] = config.reasoning_effort
    return body


class OllamaChatProvider(HttpModelProvider):
    """``kind: ollama``: native ``/api/chat`` over NDJSON (streaming) or JSON (blocking)."""

    endpoint = "/api/chat"
    stream_media_type = "application/x-ndjson"

    def stream(self, request: ChatRequest) -> ReducedStream:
        """Stream one round; ends with ``Final`` at the ``done: true`` record.

        While tools are offered, content that may be a tool call written as JSON is held back
        (case C11; see :mod:`providers.ollama_decode`).
        """
        return self._reduced_stream(
            build_chat_body(self.config, request, stream=True),
            OllamaStreamReducer(tool.name for tool in request.tools),
        )

    async def complete(self, request: ChatRequest) -> CompletionResponse:
        """One blocking call (``stream: false``), bounded by ``timeout_secs``.

        Raises:
            ProviderError: as the stream (an ``{"error": ...}`` body, or an answer without
            ``done: true``, which is :class:`providers.errors.StreamTruncated`).
        """
        answer = await self._post(build_chat_body(self.config, request, stream=False))
        reducer = OllamaStreamReducer(tool.name for tool in request.tools)
        return fold(reducer.answer(answer))
