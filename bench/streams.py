"""The bodies the loopback server sends: one stream of ``n`` text deltas per wire format.

Deltas are 3–6 characters, as models stream them (words and word pieces). Each body is a list of
*events* (one SSE event or one NDJSON line each, as bytes): the server writes one event per
HTTP chunk. The shapes follow the recorded streams in ``tests/fixtures`` and the vendors'
references (Chat Completions chunk, Anthropic Messages events, Responses events, Ollama chat).

With ``stamp`` the text of each delta is the send time instead: ``"q"`` + 9 base-26 letters of
``time.monotonic()`` in microseconds + a space (11 characters), decoded by :func:`read_stamps`;
the scale bench measures edit lag with it (CLOCK_MONOTONIC is shared by the processes of one
machine).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

__all__ = ["FORMATS", "PATHS", "deltas", "events", "last_stamp", "read_stamps", "stamp"]

_WORDS = (
    "the answer is that we can run each step on its own and then compare results "
    "from both regions before we roll out further changes to prod"
).split()

PATHS = {
    "openai_chat": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "openai_responses": "/v1/responses",
    "ollama": "/api/chat",
}
"""The request path of each wire format (the server picks the format by path)."""

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_STAMP = re.compile(r"q([a-z]{9}) ")


def deltas(n: int, seed: int = 5) -> list[str]:
    """``n`` deltas of 3–6 characters: words and word pieces with their spaces."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(_WORDS) for _ in range(n * 2)) + " "
    out: list[str] = []
    pos = 0
    while len(out) < n:
        step = rng.randint(3, 6)
        out.append(text[pos : pos + step])
        pos += step
    return out


def stamp(now: float) -> str:
    """An 11-character delta holding ``now`` (seconds) in microseconds."""
    value = int(now * 1e6)
    letters = []
    for _ in range(9):
        value, digit = divmod(value, 26)
        letters.append(_LETTERS[digit])
    return "q" + "".join(reversed(letters)) + " "


def _decode(letters: str) -> float:
    value = 0
    for ch in letters:
        value = value * 26 + (ord(ch) - 97)
    return value / 1e6


def read_stamps(text: str) -> list[float]:
    """The send times (seconds) of the stamped deltas in ``text``, in order."""
    return [_decode(match.group(1)) for match in _STAMP.finditer(text)]


def last_stamp(text: str) -> float | None:
    """The send time of the last stamped delta in ``text`` (``None``: none), looking at its
    last 24 characters first: a stamp is 11, and one never matches inside another."""
    found = None
    for match in _STAMP.finditer(text, max(0, len(text) - 24)):
        found = match
    if found is None and len(text) > 24:
        for match in _STAMP.finditer(text):
            found = match
    return None if found is None else _decode(found.group(1))


def _sse(data: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _openai_chat(texts: list[str]) -> tuple[list[bytes], Callable[[str], bytes]]:
    base = {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": "gpt-4.1-mini-2025-04-14",
        "service_tier": "default",
        "system_fingerprint": "fp_b376dfbbd5",
    }

    def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice]}

    def delta(text: str) -> bytes:
        return _sse(chunk({"content": text}))

    head = [_sse(chunk({"role": "assistant", "content": "", "refusal": None}))]
    usage = {"prompt_tokens": 19, "completion_tokens": len(texts), "total_tokens": 19}
    tail = [
        _sse(chunk({}, "stop")),
        _sse({**base, "choices": [], "usage": usage}),
        b"data: [DONE]\n\n",
    ]
    return [*head, b"", *tail], delta


def _anthropic(texts: list[str]) -> tuple[list[bytes], Callable[[str], bytes]]:
    message = {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 1},
    }

    def delta(text: str) -> bytes:
        data = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        }
        return _sse(data, "content_block_delta")

    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    head = [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse(block, "content_block_start"),
        _sse({"type": "ping"}, "ping"),
    ]
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": len(texts)},
    }
    tail = [
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _sse(end, "message_delta"),
        _sse({"type": "message_stop"}, "message_stop"),
    ]
    return [*head, b"", *tail], delta


def _responses(texts: list[str]) -> tuple[list[bytes], Callable[[str], bytes]]:
    seq = iter(range(10**9))
    item = {"type": "message", "id": "msg_67c9fdcecf488190bdd9a0409de3a1ec", "role": "assistant"}

    def delta(text: str) -> bytes:
        data = {
            "type": "response.output_text.delta",
            "sequence_number": next(seq),
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": text,
        }
        return _sse(data, "response.output_text.delta")

    response = {"id": "resp_67c9fdcecf", "object": "response", "model": "gpt-4.1", "output": []}
    head = [
        _sse(
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**response, "status": "in_progress"},
            },
            "response.created",
        ),
        _sse(
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
            "response.output_item.added",
        ),
    ]
    full = "".join(texts)
    done_item = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": full, "annotations": []}],
    }
    usage = {"input_tokens": 12, "output_tokens": len(texts), "total_tokens": 12 + len(texts)}
    tail = [
        _sse(
            {
                "type": "response.output_text.done",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "text": full,
            },
            "response.output_text.done",
        ),
        _sse(
            {
                "type": "response.completed",
                "response": {
                    **response,
                    "status": "completed",
                    "output": [done_item],
                    "usage": usage,
                },
            },
            "response.completed",
        ),
    ]
    return [*head, b"", *tail], delta


def _ollama(texts: list[str]) -> tuple[list[bytes], Callable[[str], bytes]]:
    def delta(text: str) -> bytes:
        data = {
            "model": "llama3.2",
            "created_at": "2026-11-29T10:00:00.050000Z",
            "message": {"role": "assistant", "content": text},
            "done": False,
        }
        return json.dumps(data, separators=(",", ":")).encode() + b"\n"

    last = {
        "model": "llama3.2",
        "created_at": "2026-11-29T10:00:01.000000Z",
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 26,
        "eval_count": len(texts),
    }
    return [b"", json.dumps(last).encode() + b"\n"], delta


FORMATS: dict[str, Callable[[list[str]], tuple[list[bytes], Callable[[str], bytes]]]] = {
    "openai_chat": _openai_chat,
    "anthropic": _anthropic,
    "openai_responses": _responses,
    "ollama": _ollama,
}
"""Per format: ``texts -> (frame, delta)``: the events around the deltas (``b""`` marks where
the deltas go) and the encoder of one delta event."""


def events(fmt: str, n: int) -> list[bytes]:
    """The whole body of an ``n``-delta answer in format ``fmt``, one event per item."""
    texts = deltas(n)
    frame, delta = FORMATS[fmt](texts)
    at = frame.index(b"")
    return frame[:at] + [delta(t) for t in texts] + frame[at + 1 :]
