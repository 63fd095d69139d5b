"""Chat Completions bodies and their right outcomes (fixtures README, cases C01-C10).

Shared by the pure decoder tests and the HTTP replay tests. An :class:`Outcome` is the exact event
list a stream yields and the error type it ends with (``None`` for a proper end).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from providers.errors import ProviderError, StreamTruncated
from providers.events import Final, StreamChunk, StreamEvent, TextDelta, ToolCall, Usage

__all__ = [
    "C01_PAYLOADS",
    "C02_BODY",
    "C03_BODY",
    "C03_THINK_BODY",
    "C07_BODY",
    "C08A_BODY",
    "C08B_BODY",
    "C09_BODY",
    "C10_BODY",
    "C10_CUTS",
    "FIXTURE_OUTCOMES",
    "TOOL_CALL_BLOCKING_ANSWER",
    "Outcome",
    "c01_body",
    "sse",
    "text",
]


@dataclass(frozen=True)
class Outcome:
    events: tuple[StreamEvent, ...]
    error: type[ProviderError] | None = None


def sse(*datas: str | dict[str, Any]) -> bytes:
    """An event-stream body with one ``data:`` event per item (dicts serialised compactly)."""
    out = []
    for data in datas:
        text_data = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out.append(f"data: {text_data}\n\n")
    return "".join(out).encode()


def text(delta: str = "", reasoning: str = "") -> TextDelta:
    return TextDelta(StreamChunk(delta=delta, reasoning=reasoning))


FIXTURE_OUTCOMES: dict[str, Outcome] = {
    "oai_compat_text_done.sse": Outcome((text("hi"), Final("stop", None))),
    "oai_compat_finish_reason_no_done.sse": Outcome((text("hi"), Final("stop", "stop"))),
    "oai_compat_truncated_no_completion.sse": Outcome((text("par"),), StreamTruncated),
    "openai_chat_tool_call_chunked.sse": Outcome(
        (
            text("Let me check the time."),
            ToolCall("call_a1", "current_time", '{"timezone": "UTC"}'),
            ToolCall("call_b2", "current_time", '{"timezone": "Asia/Tokyo"}'),
            Usage(57, 41, 0),
            Final("tool_calls", "tool_calls"),
        )
    ),
}

TOOL_CALL_BLOCKING_ANSWER: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1764400000,
    "model": "gpt-4.1-mini",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Let me check the time.",
                "tool_calls": [
                    {
                        "id": "call_a1",
                        "type": "function",
                        "function": {
                            "name": "current_time",
                            "arguments": '{"timezone": "UTC"}',
                        },
                    },
                    {
                        "id": "call_b2",
                        "type": "function",
                        "function": {
                            "name": "current_time",
                            "arguments": '{"timezone": "Asia/Tokyo"}',
                        },
                    },
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 57,
        "completion_tokens": 41,
        "total_tokens": 98,
        "prompt_tokens_details": {"cached_tokens": 0},
    },
}
"""The blocking (``stream: false``) body of the answer in ``openai_chat_tool_call_chunked.sse``."""

C01_PAYLOADS: tuple[str, ...] = (
    '{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","type":"function",'
    '"function":{"name":"lookup","arguments":""}}]}}]}',
    '{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{\\"q\\":"}}]}}]}',
    '{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\\"x\\"}"}}]}}]}',
    '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
    "[DONE]",
)


def c01_body(index: str) -> bytes:
    """C01 with the tool-call ``index`` ``"missing"`` (as recorded) or ``"null"``."""
    payloads = C01_PAYLOADS
    if index == "null":
        payloads = tuple(p.replace('[{"id"', '[{"index":null,"id"') for p in payloads)
        payloads = tuple(p.replace('[{"function"', '[{"index":null,"function"') for p in payloads)
    return sse(*payloads)


C02_BODY = sse(
    '{"choices":[{"index":0,"delta":{"content":"Hi"}}]}',
    '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    '{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}',
    "[DONE]",
)

C03_BODY = sse(
    {"choices": [{"index": 0, "delta": {"reasoning_content": "Let me think"}}]},
    {"choices": [{"index": 0, "delta": {"reasoning": " more"}}]},
    {"choices": [{"index": 0, "delta": {"content": None}}]},
    {"choices": [{"index": 0, "delta": {"content": "Answer: 4"}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    "[DONE]",
)

C03_THINK_BODY = sse(
    {"choices": [{"index": 0, "delta": {"content": "<thi"}}]},
    {"choices": [{"index": 0, "delta": {"content": "nk>x</think>Hi"}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    "[DONE]",
)

C07_BODY = (
    b": OPENROUTER PROCESSING\n"
    b"\n"
    b"id: 1\n"
    b'data: {"choices":[{"delta":{"content":"A"}}]}\n'
    b"\n"
    b": ping\n"
    b"\n"
    b"retry: 3000\n"
    b"\n"
    b'data: {"choices":[{"delta":{"content":"B"}}]}\n'
    b"\n"
    b"data: [DONE]\n"
    b"\n"
)

C08A_BODY = b'data: {"choices":[{"delta":{"content":"Let me compare the"}}]}\n\n'

C08B_BODY = sse('{"choices":[{"delta":{"content":"Hello"}}]}', "[DONE]")

C09_BODY = b'data: {"choices":[{"index":0,\ndata:  "delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
"""C09 for Chat Completions: one chunk's JSON across two ``data`` lines (joined with LF)."""

C10_BODY = sse('{"choices":[{"delta":{"content":"你好 🌍"}}]}', "[DONE]")
C10_CUTS = (
    C10_BODY.index("你".encode()) + 1,  # after the first byte of 你
    C10_BODY.index("🌍".encode()) + 2,  # after F0 9F of the emoji
)
