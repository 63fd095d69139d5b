"""The OpenAI Chat Completions wire format, served (pure, sans-I/O): a request body read into
what a turn needs, and the bodies of the answers — ``chat.completion``,
``chat.completion.chunk``, the model list and the error object.

Specs: [Chat Completions](https://platform.openai.com/docs/api-reference/chat/create),
[streaming chunks](https://platform.openai.com/docs/api-reference/chat-streaming),
[models](https://platform.openai.com/docs/api-reference/models/list),
[errors](https://platform.openai.com/docs/guides/error-codes). Unknown request keys
(``temperature``, ``tools``, …) are accepted and ignored: relaybot's own agent answers.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CompletionRequest",
    "RequestRejected",
    "completion",
    "completion_delta",
    "error_body",
    "model_list",
    "parse_request",
]

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
"""Request roles → the turn's roles (``developer`` is the newer name of ``system``); ``tool``
messages answer a client's own tools, which relaybot never offers: they are skipped."""


class RequestRejected(ValueError):
    """The body is not a request we can answer: a 400 ``invalid_request_error`` naming
    ``param``."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What a turn needs of a request: the conversation before the last user message
    (``context``, ``(role, text)`` pairs), that message's ``text`` and ``images``
    (``(mime type, bytes)`` of its ``image_url`` parts given as ``data:`` URLs), and how to
    answer."""

    model: str | None
    context: tuple[tuple[str, str], ...]
    text: str
    stream: bool
    include_usage: bool
    images: tuple[tuple[str, bytes], ...] = ()


def _images_of(content: Any, index: int) -> tuple[tuple[str, bytes], ...]:
    """The ``image_url`` parts of a message given as base64 ``data:`` URLs (RFC 2397); an
    image given by an ``http(s)`` URL is refused: relaybot fetches nothing a client names."""
    if not isinstance(content, list):
        return ()
    images = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "image_url":
            continue
        url = (
            (part.get("image_url") or {}).get("url")
            if isinstance(part.get("image_url"), dict)
            else None
        )
        head, sep, data = str(url or "").partition(",")
        if not sep or not head.startswith("data:") or not head.endswith(";base64"):
            raise RequestRejected("an image must be a base64 data: URL", f"messages[{index}]")
        try:
            images.append(
                (head[5:-7] or "application/octet-stream", base64.b64decode(data, validate=True))
            )
        except binascii.Error:
            raise RequestRejected(
                "an image's data: URL is not base64", f"messages[{index}]"
            ) from None
    return tuple(images)


def _text_of(content: Any, index: int) -> str:
    """A message's ``content``: a string, ``null``, or a list of parts whose ``text`` parts
    are joined (image parts are not read)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = [
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    raise RequestRejected("content must be a string or a list of parts", f"messages[{index}]")


def parse_request(body: Any) -> CompletionRequest:
    """Read a ``POST /chat/completions`` body.

    Raises:
        RequestRejected: no ``messages``, a message of the wrong shape, or a last message that
            is not the user's.
    """
    if not isinstance(body, dict):
        raise RequestRejected("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestRejected("messages must be a non-empty list", "messages")
    pairs: list[tuple[str, str]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestRejected("each message needs a role", f"messages[{index}]")
        role = _ROLES.get(message["role"])
        if message["role"] == "tool":
            continue
        if role is None:
            raise RequestRejected(f"unknown role {message['role']!r}", f"messages[{index}].role")
        pairs.append((role, _text_of(message.get("content"), index)))
    if not pairs or pairs[-1][0] != "user":
        raise RequestRejected("the last message must be the user's", "messages")
    model = body.get("model")
    options = body.get("stream_options")
    last = max(i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user")
    return CompletionRequest(
        images=_images_of(messages[last].get("content"), last),
        model=model if isinstance(model, str) and model else None,
        context=tuple(pairs[:-1]),
        text=pairs[-1][1],
        stream=body.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
    )


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


def completion_delta(
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, str] | None,
    finish_reason: str | None = None,
    *,
    usage: tuple[int, int] | None = None,
    include_usage: bool = False,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``. ``delta=None`` is the usage chunk: no choices, only
    ``usage`` (what ``stream_options.include_usage`` asks for last); with ``include_usage``
    every other chunk carries ``usage: null``, as the spec says."""
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if delta is None:
        body["usage"] = _usage(*(usage or (0, 0)))
    elif include_usage:
        body["usage"] = None
    return body


def completion(
    completion_id: str, created: int, model: str, text: str, usage: tuple[int, int]
) -> dict[str, Any]:
    """The blocking answer: one ``chat.completion`` holding ``text``."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(*usage),
    }


def error_body(
    message: str, kind: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def model_list(names: tuple[str, ...], created: int) -> dict[str, Any]:
    """``GET /models``: a ``list`` of ``model`` objects, owned by ``relaybot``."""
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "relaybot"}
            for name in names
        ],
    }
