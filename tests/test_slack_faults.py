"""Slack faults end to end (architecture §3, §7): a 429 on appendStream is
waited out with nothing lost or doubled, a Socket Mode reconnect mid-answer (Slack sending the
event again) is answered once, and Slack's error codes become the channel's errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.errors import (
    ChannelRateLimited,
    ChannelWriteFailed,
    DestinationGone,
    MessageGone,
    MessageTooLong,
)
from channels.slack.errors import translate_error
from tests.peers.slack import SlackServer
from tests.slack_harness import running_bot
from tests.telegram_harness import reply, text_stream
from tests.test_policy_telegram_e2e import pieces


async def test_a_429_on_append_stream_is_waited_out_and_nothing_is_lost_or_doubled(
    tmp_path: Path,
) -> None:
    answer = " ".join(f"token{i}" for i in range(120))
    async with running_bot(
        tmp_path, [reply(text_stream(pieces(answer, 6)), delay_secs=0.01)]
    ) as bot:
        bot.peer.rate_limit("chat.appendStream", retry_after=1, call=2)
        await bot.ask("count for me")
    peer = bot.peer
    limited = [r for r in peer.requests if r.status == 429]
    assert [r.method for r in limited] == ["chat.appendStream"]
    after = [r for r in peer.calls("chat.appendStream") if r.at > limited[0].at]
    assert after and after[0].at - limited[0].at >= 1.0 - 0.05  # Retry-After honoured
    [message] = bot.answers(peer.dm_channel)
    assert "".join(message.appends).rstrip() == answer
    assert not message.streaming


async def test_a_reconnect_mid_answer_is_answered_once(tmp_path: Path) -> None:
    answer = " ".join(f"slow{i}" for i in range(60))
    async with running_bot(
        tmp_path, [reply(text_stream(pieces(answer, 5)), delay_secs=0.03)]
    ) as bot:
        peer = bot.peer
        before = bot.channel.replies_finished
        await peer.inject_message("tell me slowly")
        await peer.wait_until(lambda: bool(peer.calls("chat.startStream")))
        await peer.drop(redeliver=True)  # Slack missed the ack: the event comes again
        await peer.wait_until(lambda: peer.connections >= 2)
        await peer.wait_until(lambda: bot.channel.health().state == "ok")
        await peer.wait_until(lambda: bot.channel.replies_finished >= before + 1, within=20)
        await peer.wait_until(lambda: len(peer.acks) >= 2)
    [message] = bot.answers(peer.dm_channel)
    assert "".join(message.appends).rstrip() == answer
    assert len(peer.calls("chat.startStream")) == 1
    assert len(bot.provider.requests_to("/v1/chat/completions")) == 1
    assert bot.channel.replies_finished == before + 1


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("msg_too_long", MessageTooLong),
        ("message_not_found", MessageGone),
        ("channel_not_found", DestinationGone),
        ("not_in_channel", DestinationGone),
        ("invalid_auth", ChannelWriteFailed),
    ],
)
async def test_slack_error_codes_become_channel_errors(
    error: str, expected: type[Exception]
) -> None:
    async with SlackServer() as peer:
        client = AsyncWebClient(token=peer.token, base_url=peer.api_base)
        peer.fail("chat.postMessage", error)
        with pytest.raises(SlackApiError) as raised:
            await client.chat_postMessage(channel=peer.dm_channel, text="x")
    translated = translate_error(raised.value, limit=40_000, length=1)
    assert type(translated) is expected
    if error == "invalid_auth":
        assert "bot_token" in str(translated)


async def test_ratelimited_carries_retry_after() -> None:
    async with SlackServer() as peer:
        client = AsyncWebClient(token=peer.token, base_url=peer.api_base)
        peer.rate_limit("chat.update", retry_after=7)
        with pytest.raises(SlackApiError) as raised:
            await client.chat_update(channel=peer.dm_channel, ts="1.1", text="x")
    translated = translate_error(raised.value, limit=40_000)
    assert isinstance(translated, ChannelRateLimited) and translated.retry_after == 7
