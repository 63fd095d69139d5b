"""An OpenAI Chat Completions server that echoes the question, for tests with several relaybot
processes (architecture §8, §9).

Theory of operation
-------------------
An aiohttp server on 127.0.0.1 answers ``POST /v1/chat/completions`` with a stream
(https://platform.openai.com/docs/api-reference/chat/streaming: SSE ``chat.completion.chunk``
events, then ``data: [DONE]``) whose text is ``Answer to «QUESTION».``, QUESTION being the last
user message, in word-sized deltas ``delay_secs`` apart. A question containing ``slow`` is
answered at length (:func:`slow_answer_to`, past the redaction holdback so drafts show) in
:data:`SLOW_DELTAS` deltas ``slow_delay_secs`` apart (a long answer to cut); with
``long_answers`` every question is, ``delay_secs`` apart (the benchmark's load). Every
request is recorded in :attr:`EchoModel.asked` as (model, question): each relaybot instance in a
test names its own model, so the test knows which instance answers what. With ``usage``
(prompt, completion tokens) every stream reports it in a last chunk before ``[DONE]``, as
``stream_options.include_usage`` asks.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

__all__ = ["SLOW_DELTAS", "EchoModel", "answer_to", "slow_answer_to"]

SLOW_DELTAS = 40


def answer_to(question: str) -> str:
    """The full answer the model gives to ``question``."""
    return f"Answer to «{question}»."


def slow_answer_to(question: str) -> str:
    """The long answer to a question containing ``slow`` (about 500 characters)."""
    return answer_to(question) + " It goes on" + ", and on" * 60 + "."


class EchoModel:
    """The server; ``url`` is its root (``/v1`` is the API base)."""

    def __init__(
        self,
        *,
        delay_secs: float = 0.05,
        slow_delay_secs: float = 0.3,
        long_answers: bool = False,
        usage: tuple[int, int] | None = None,
    ) -> None:
        self.usage = usage
        self.delay_secs = delay_secs
        self.long_answers = long_answers
        self.slow_delay_secs = slow_delay_secs
        self.asked: list[tuple[str, str]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> EchoModel:
        app = web.Application()
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
        body = await request.json()
        model = str(body.get("model"))
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        question = _text(users[-1].get("content")) if users else ""
        self.asked.append((model, question))
        answer = answer_to(question)
        if "slow" in question or self.long_answers:
            answer = slow_answer_to(question)
            size = max(1, len(answer) // SLOW_DELTAS)
            pieces = [answer[i : i + size] for i in range(0, len(answer), size)]
            delay = self.delay_secs if self.long_answers else self.slow_delay_secs
        else:
            words = answer.split(" ")
            pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
            delay = self.delay_secs
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in pieces:
            await response.write(_event(model, {"content": piece}, None))
            await asyncio.sleep(delay)
        await response.write(_event(model, {}, "stop"))
        if self.usage is not None:
            prompt, completion = self.usage
            usage = {"prompt_tokens": prompt, "completion_tokens": completion}
            chunk = {"id": "chatcmpl-echo", "model": model, "choices": [], "usage": usage}
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if isinstance(part, dict))


def _event(model: str, delta: dict[str, Any], finish: str | None) -> bytes:
    chunk = {
        "id": "chatcmpl-echo",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"
