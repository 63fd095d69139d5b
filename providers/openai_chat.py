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
  :class:`providers.openai_chat_decode.ChatCompletionsStreamDecoder`. It returns as soon as
  ``[DONE]`` arrives, without waiting for the server to close the socket; after a
  ``finish_reason``, EOF, the idle timeout or a dropped connection also end the stream properly
  (DESIGN §2).
* :meth:`OpenAIChatProvider.complete` sends ``stream: false`` (no ``stream_options``: OpenAI
  rejects them on a blocking call) and parses ``choices[0].message``. Both fold to equal
  :class:`CompletionResponse` objects for the same answer.

Conversation mapping: ``system``/``user`` messages as they are; ``assistant`` messages with
``tool_calls`` (``content: null`` when they hold no text); ``tool`` messages with the
``tool_call_id`` they answer. Tools use the ``{"type": "function", "function": {...}}`` shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from config.models import ProviderConfig
from providers.base import ChatMessage, ChatRequest, CompletionResponse, ToolSpec
from providers.error_events import error_from_event
from providers.errors import (
    ProviderBadRequest,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    StreamProtocolError,
)
from providers.events import StreamEvent, ToolCall
from providers.http_provider import HttpModelProvider
from providers.openai_chat_decode import (
    ChatCompletionsStreamDecoder,
    map_finish_reason,
    normalise_arguments,
    parse_reasoning,
    parse_usage,
)

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


def message_to_wire(message: ChatMessage) -> dict[str, Any]:
    """One conversation message in Chat Completions shape.

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
    return {"role": message.role, "content": message.content}


def build_request_body(
    config: ProviderConfig, request: ChatRequest, *, stream: bool
) -> dict[str, Any]:
    """The JSON body of one call. ``max_tokens`` and ``reasoning_effort`` only when configured;
    ``tools`` only when offered (some compatible servers reject an empty list)."""
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [message_to_wire(m) for m in request.messages],
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


def _content_text(content: Any) -> str:
    """``message.content``: a string, ``null``, or (some servers) a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def parse_completion(payload: Any) -> CompletionResponse:
    """A blocking ``chat.completion`` body as a :class:`CompletionResponse`.

    Raises:
        ProviderError: the body is an error object (typed by its code).
        StreamProtocolError: the body has no ``choices[0].message``, or a tool call no name.
    """
    if not isinstance(payload, dict):
        raise StreamProtocolError("answer is not a JSON object")
    if payload.get("error") is not None:
        raise error_from_event(payload["error"])
    choices = payload.get("choices")
    choice = next(
        (
            c
            for c in (choices if isinstance(choices, list) else [])
            if isinstance(c, dict) and c.get("index") in (0, None)
        ),
        None,
    )
    message = choice.get("message") if choice is not None else None
    if choice is None or not isinstance(message, dict):
        raise StreamProtocolError("answer has no choices[0].message")
    calls: list[ToolCall] = []
    raw_calls = message.get("tool_calls")
    for position, raw in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        function = raw.get("function") if isinstance(raw, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(function, dict) or not isinstance(name, str) or not name:
            raise StreamProtocolError(f"tool call {position} has no function name")
        call_id = raw.get("id")
        calls.append(
            ToolCall(
                id=call_id if isinstance(call_id, str) and call_id else f"call_{position}",
                name=name,
                arguments=normalise_arguments(function.get("arguments")),
            )
        )
    raw_finish = choice.get("finish_reason")
    raw_finish = raw_finish if isinstance(raw_finish, str) and raw_finish else None
    return CompletionResponse(
        text=_content_text(message.get("content")) + _content_text(message.get("refusal")),
        reasoning=parse_reasoning(message),
        tool_calls=tuple(calls),
        usage=parse_usage(payload.get("usage")),
        finish_reason=map_finish_reason(raw_finish, has_tool_calls=bool(calls)),
        raw_finish_reason=raw_finish,
    )


def rejects_reasoning_effort(error: ProviderError) -> bool:
    """True for the 400 some OpenAI models send for tools combined with a reasoning effort.

    DESIGN §2: on that error the round is retried once through the Responses API.
    """
    return isinstance(error, ProviderBadRequest) and "reasoning_effort" in error.message


class OpenAIChatProvider(HttpModelProvider):
    """``kind: openai_chat``: Chat Completions over SSE (streaming) or JSON (blocking)."""

    endpoint = "/chat/completions"

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream one round (see :meth:`ModelProvider.stream`).

        Raises:
            StreamTruncated: EOF before ``[DONE]`` and before any ``finish_reason``.
            ProviderTimeout: headers (``timeout_secs``) or the byte-idle bound before a
                ``finish_reason``.
            ProviderError: non-2xx answers and error objects in the stream, typed.
        """
        decoder = ChatCompletionsStreamDecoder()
        async with self._open_stream(build_request_body(self.config, request, stream=True)) as body:
            try:
                async for data in body:
                    for event in decoder.feed(data):
                        yield event
                    if decoder.finished:
                        return  # [DONE]: the server may keep the socket open (case C08 B)
            except (ProviderTimeout, ProviderConnectionError) as exc:
                # DESIGN §2: once a finish_reason was seen, EOF or the idle timeout is a proper
                # end; a connection dropped at that point is read as EOF (the answer is whole).
                idle = isinstance(exc, ProviderConnectionError) or exc.phase == "idle"
                if not (idle and decoder.finish_seen):
                    raise
            for event in decoder.close():
                yield event

    async def complete(self, request: ChatRequest) -> CompletionResponse:
        """One blocking call, bounded as a whole by ``timeout_secs``."""
        payload = await self._post(build_request_body(self.config, request, stream=False))
        return parse_completion(payload)
