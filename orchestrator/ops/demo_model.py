"""The built-in demo model: a tiny OpenAI Chat Completions server on 127.0.0.1 (architecture §7).

It lets ``relaybot run`` work on a fresh machine with no API key: the real ``openai_chat``
provider talks to it over the real wire format (SSE ``chat.completion.chunk`` events ending with
``[DONE]``, or one ``chat.completion`` JSON body when not streaming). It is not a language model:
it streams canned answers word by word, calls ``current_time`` when asked for the time, and says
plainly that it is a demo — once per conversation: the first answer (the request holds one user
message) explains the demo and the pipeline, later answers only answer. Answers are longer than
the redaction holdback (128 bytes) so the streaming shows.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from anyio.abc import TaskGroup

from orchestrator.ops.http_server import HttpRequest, HttpResponse, HttpServer

__all__ = ["DemoModelServer", "demo_reply"]

log = logging.getLogger(__name__)

MODEL_NAME = "relaybot-demo"
WORD_DELAY_SECS = 0.03

_INTRO = (
    "I am the built-in demo model of relaybot, not a real language model, so my answers are "
    "canned. "
)
_OUTRO = (
    "\n\nWhat you are watching is the real pipeline: this text travels over the OpenAI Chat "
    "Completions wire format from a small local server, through the streaming decoder, the "
    "outbound redaction window and the delivery engine, which edits the draft in place no faster "
    "than the channel's update interval. To talk to a real model, set OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY before starting relaybot, or write a config file (see "
    "config/example.yaml) and run `relaybot run --config FILE`."
)
_TIME_WORDS = re.compile(r"\b(time|clock|date|day is it)\b", re.IGNORECASE)


def demo_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Decide the demo answer: ``{"content": str, "tool_calls": [...]}`` (OpenAI message shape).

    Args:
        messages: the request's ``messages`` (the whole conversation, as the client sends it).
        tools: the request's ``tools``.
    """
    last = messages[-1] if messages else {"role": "user", "content": ""}
    offered = {t.get("function", {}).get("name") for t in tools}
    first_turn = sum(1 for m in messages if m.get("role") == "user") <= 1
    intro, outro = (_INTRO, _OUTRO) if first_turn else ("", "")
    if last.get("role") == "tool":
        result: dict[str, Any] = {}
        try:
            result = json.loads(last.get("content") or "{}")
        except ValueError:
            pass
        if "iso" in result:
            stamp = result["iso"].replace("T", " at ")
            answer = (
                f"The current_time tool says it is {stamp} ({result.get('timezone', 'UTC')}), "
                f"a {result.get('weekday', 'day')}. "
            )
        else:
            answer = f"The current_time tool answered: {last.get('content')}. "
        return {"content": intro + answer + outro, "tool_calls": []}
    text = str(last.get("content") or "")
    if "current_time" in offered and _TIME_WORDS.search(text):
        call = {
            "id": f"call_demo_{int(time.time() * 1000)}",
            "type": "function",
            "function": {"name": "current_time", "arguments": json.dumps({"timezone": "UTC"})},
        }
        return {
            "content": "Let me look at the clock with the current_time tool.",
            "tool_calls": [call],
        }
    quoted = text if len(text) <= 200 else text[:200] + "…"
    answer = (
        f'You wrote: "{quoted}". Ask me "what time is it?" to see a tool call: I will call the '
        "current_time tool, the chat will show its status line while it runs, and then I will "
        "answer with its result in a second model round."
    )
    return {"content": intro + answer + outro, "tool_calls": []}


def _sse_chunks(reply: dict[str, Any], created: int) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": f"chatcmpl-demo-{created}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": MODEL_NAME,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": word}) for word in re.findall(r"\S+\s*|\s+", reply["content"])]
    for index, call in enumerate(reply["tool_calls"]):
        out.append(chunk({"tool_calls": [{"index": index, **call}]}))
    out.append(chunk({}, "tool_calls" if reply["tool_calls"] else "stop"))
    usage = {
        "prompt_tokens": 0,
        "completion_tokens": len(reply["content"].split()),
        "total_tokens": 0,
    }
    usage["total_tokens"] = usage["completion_tokens"]
    tail = {
        "id": f"chatcmpl-demo-{created}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL_NAME,
        "choices": [],
        "usage": usage,
    }
    out.append(b"data: " + json.dumps(tail).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def _completion(reply: dict[str, Any], created: int) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": reply["content"]}
    if reply["tool_calls"]:
        message["tool_calls"] = reply["tool_calls"]
    words = len(reply["content"].split())
    return json.dumps(
        {
            "id": f"chatcmpl-demo-{created}",
            "object": "chat.completion",
            "created": created,
            "model": MODEL_NAME,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply["tool_calls"] else "stop",
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": words, "total_tokens": words},
        }
    ).encode()


class DemoModelServer:
    """Serves the demo model on 127.0.0.1 until the task group ends.

    Usage::

        async with anyio.create_task_group() as tg:
            server = DemoModelServer()
            await server.start(tg)
            server.base_url  # "http://127.0.0.1:PORT/v1"
    """

    def __init__(self, *, word_delay_secs: float = WORD_DELAY_SECS) -> None:
        self._delay = word_delay_secs
        self._http = HttpServer(self._handle)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.port}/v1"

    async def start(self, task_group: TaskGroup) -> None:
        await self._http.start(task_group)
        log.info("demo model listening on %s (not a real model)", self.base_url)

    async def _handle(self, request: HttpRequest) -> HttpResponse:
        if request.method != "POST" or not request.target.endswith("/chat/completions"):
            return HttpResponse(404, b'{"error":{"message":"not found"}}')
        try:
            payload = json.loads(request.body)
            reply = demo_reply(payload.get("messages", []), payload.get("tools") or [])
        except (ValueError, AttributeError):
            return HttpResponse(400, b'{"error":{"message":"bad request"}}')
        created = int(time.time())
        if not payload.get("stream"):
            return HttpResponse(200, _completion(reply, created))
        return HttpResponse(
            200,
            self._paced(_sse_chunks(reply, created)),
            content_type="text/event-stream",
            headers=[("cache-control", "no-cache")],
        )

    async def _paced(self, chunks: list[bytes]) -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
            await anyio.sleep(self._delay)
