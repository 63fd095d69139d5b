"""The Stop button of Discord and Matrix through their peers (architecture §3 "Buttons"): a
press ends the provider stream (the server sees the client close the connection), the answer
ends with ``⏹ Stopped.`` and the button is gone from the final message."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from channels.controls import STOP_LABEL
from orchestrator.turn.runner import STOPPED_MARKER
from tests.discord_harness import running_bot as discord_bot
from tests.peers.provider_server import RecordedRequest
from tests.telegram_harness import reply, text_stream

pytestmark = pytest.mark.anyio

SLOW = reply(text_stream([f"word{n} " for n in range(60)]), delay_secs=0.1)


async def _closed(request: RecordedRequest) -> bool:
    with anyio.fail_after(5):
        while request.ended_at is None:  # noqa: ASYNC110 - the server is polled
            await anyio.sleep(0.02)
    return request.client_closed


async def test_discord_stop_button_ends_the_stream_and_is_gone(tmp_path: Path) -> None:
    async with discord_bot(tmp_path, [SLOW]) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel_id
        before = bot.channel.replies_finished
        peer.inject_message(dm, "tell me a long story")

        def buttoned() -> bool:
            return any(m.payload.get("components") for m in peer.messages(dm))

        await peer.wait_for(buttoned, 10)
        [draft] = [m for m in peer.messages(dm) if m.payload.get("components")]
        [button] = draft.payload["components"][0]["components"]
        assert button["label"] == STOP_LABEL
        peer.inject_button_click(draft.id, button["custom_id"])
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 1)
        [request] = bot.provider.requests
        assert await _closed(request)
        [message] = peer.messages(dm)
        assert message.content.endswith(STOPPED_MARKER) and "word59" not in message.content
        assert not message.payload.get("components")
    [ack] = peer.interaction_responses
    assert ack["type"] == 4 and ack["data"]["content"] == "Stopping…"
    assert ack["data"]["flags"] & 64  # ephemeral: the presser alone reads it
