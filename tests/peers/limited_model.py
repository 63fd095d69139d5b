"""An OpenAI Chat Completions server with a small, strict context window (architecture §5
"Context budget", §8).

Theory of operation
-------------------
An aiohttp server on 127.0.0.1 answers ``POST /v1/chat/completions``. It counts a request's
tokens the rough way a server would: one token per :data:`CHARS_PER_TOKEN` characters of the
whole request body, plus the ``max_tokens`` the request asks for. A request over
``context_limit`` is refused as OpenAI refuses it: HTTP 400 with
``{"error": {"message": "This model's maximum context length is …", "type":
"invalid_request_error", "code": "context_length_exceeded"}}``. Any other request is answered
with a stream (SSE ``chat.completion.chunk`` events, a usage chunk whose ``prompt_tokens`` is
the body's count, then ``data: [DONE]``) whose text is ``Answer N.``, N counting the answers.
A request whose system prompt starts with ``summary_marker`` is answered
``Summary N.`` instead (the bot's compaction request). Every request is recorded in
:attr:`LimitedModel.requests`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = ["CHARS_PER_TOKEN", "LimitedModel", "SeenRequest"]

CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class SeenRequest:
    """One request: its token count (body and ``max_tokens``), whether it was refused, its
    parsed body."""

    tokens: int
    refused: bool
    body: dict[str, Any]

    @property
    def system(self) -> str:
        messages = self.body.get("messages", [])
        first = messages[0] if messages else {}
        return str(first.get("content", "")) if first.get("role") == "system" else ""


class LimitedModel:
    """The server; ``url`` is its root (``/v1`` is the API base)."""

    def __init__(self, *, context_limit: int = 4000, summary_marker: str = "\x00") -> None:
        self.context_limit = context_limit
        self.summary_marker = summary_marker
        self.requests: list[SeenRequest] = []
        self.url = ""
        self._answers = 0
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> LimitedModel:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        prompt = math.ceil(len(raw.decode()) / CHARS_PER_TOKEN)
        tokens = prompt + int(body.get("max_tokens") or 0)
        refused = tokens > self.context_limit
        seen = SeenRequest(tokens, refused, body)
        self.requests.append(seen)
        if refused:
            error = {
                "message": f"This model's maximum context length is {self.context_limit} "
                f"tokens. However, your messages resulted in {tokens} tokens. Please reduce "
                "the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            return web.json_response({"error": error}, status=400)
        self._answers += 1
        word = "Summary" if seen.system.startswith(self.summary_marker) else "Answer"
        model = str(body.get("model"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_event(model, {"content": f"{word} {self._answers}."}, None))
        await response.write(_event(model, {}, "stop"))
        usage = {"prompt_tokens": prompt, "completion_tokens": 3, "total_tokens": prompt + 3}
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": model}
        chunk |= {"choices": [], "usage": usage}
        await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _event(model: str, delta: dict[str, Any], finish: str | None) -> bytes:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"
