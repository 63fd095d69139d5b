"""A provider that does not stream, end to end through ``Daemon.run`` and the Telegram peer
(architecture §2 "A server that does not stream"): each answer to a streaming request is one
``application/json`` body. The chat must show the whole answer, with no interrupted marker, and
the tool loop must run on a tool call that came that way.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.peers.provider_server import Reply
from tests.telegram_harness import CHAT, running_bot

ANSWER = (
    "Tokyo is nine hours ahead of UTC, so it is 09:00 there now.\n\n"
    "Enjoy your morning call; it is a good hour for it."
)


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    """A blocking ``chat.completion`` body: what the server sends instead of a stream."""
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1764400000,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 30, "total_tokens": 70},
    }


TOOL_CALL = _completion(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "current_time", "arguments": "{}"},
            }
        ],
    },
    "tool_calls",
)
TEXT = _completion({"role": "assistant", "content": ANSWER}, "stop")


async def test_the_chat_shows_the_whole_answer_of_a_server_that_does_not_stream(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="providers.http_provider")
    replies = [Reply.json(TOOL_CALL), Reply.json(TEXT, cuts=[30], delay_secs=0.05)]
    # No blocking retry: the stream itself must give the answer (with retries, a round whose
    # stream failed before any text is sent again as a blocking call and would hide the fault).
    async with running_bot(tmp_path, replies, max_retries=0) as bot:
        await bot.ask("what time is it in Tokyo?")
    bot.check()
    [message] = bot.peer.messages(CHAT)
    assert message.text == ANSWER
    assert "interrupted" not in "".join(bot.peer.texts(CHAT))
    requests = bot.provider.requests
    assert [r.json["stream"] for r in requests] == [True, True]  # streaming asked, twice
    assert [m["role"] for m in requests[1].json["messages"]][-2:] == ["assistant", "tool"]
    said = [r for r in caplog.records if "did not stream" in r.getMessage()]
    assert len(said) == 1 and "'main'" in said[0].getMessage()
