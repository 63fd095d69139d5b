"""The local Slack peer speaks what unmodified ``slack_sdk`` sends and expects: the Web API
methods the channel uses, a 429 the SDK reports with its ``Retry-After``, and Socket Mode
envelopes with their acks (architecture §8)."""

from __future__ import annotations

import asyncio

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.peers.slack import BOT_ID, SlackServer


async def test_the_web_api_streams_and_edits_through_the_sdk() -> None:
    async with SlackServer() as peer:
        client = AsyncWebClient(token=peer.token, base_url=peer.api_base)
        assert (await client.auth_test())["user_id"] == BOT_ID
        started = await client.chat_startStream(
            channel=peer.channel,
            thread_ts="1.000001",
            markdown_text="Hel",
            recipient_user_id=peer.user,
            recipient_team_id="T0TEAM001",
        )
        ts = started["ts"]
        await client.chat_appendStream(channel=peer.channel, ts=ts, markdown_text="lo")
        await client.chat_stopStream(channel=peer.channel, ts=ts, markdown_text="!")
        (message,) = peer.bot_messages(peer.channel)
        assert (message.text, message.appends, message.streaming) == (
            "Hello!",
            ["Hel", "lo", "!"],
            False,
        )
        with pytest.raises(SlackApiError) as stopped:
            await client.chat_appendStream(channel=peer.channel, ts=ts, markdown_text="x")
        assert stopped.value.response["error"] == "message_not_in_streaming_state"
        await client.chat_update(channel=peer.channel, ts=ts, text="edited")
        await client.chat_delete(channel=peer.channel, ts=ts)
        assert peer.bot_messages(peer.channel) == []


async def test_a_channel_stream_needs_its_recipient_and_429_carries_retry_after() -> None:
    async with SlackServer() as peer:
        client = AsyncWebClient(token=peer.token, base_url=peer.api_base)
        with pytest.raises(SlackApiError) as missing:
            await client.chat_startStream(channel=peer.channel, thread_ts="1.1", markdown_text="a")
        assert missing.value.response["error"] == "invalid_arguments"
        peer.rate_limit("chat.postMessage", retry_after=3)
        with pytest.raises(SlackApiError) as limited:
            await client.chat_postMessage(channel=peer.dm_channel, text="a")
        assert limited.value.response.status_code == 429
        assert limited.value.response.headers["Retry-After"] == "3"
        assert peer.bot_messages(peer.dm_channel) == []
        with pytest.raises(SlackApiError) as long:
            await client.chat_postMessage(channel=peer.dm_channel, text="x" * 40_001)
        assert long.value.response["error"] == "msg_too_long"
        bad = AsyncWebClient(token="xoxb-wrong", base_url=peer.api_base)
        with pytest.raises(SlackApiError) as refused:
            await bad.auth_test()
        assert refused.value.response["error"] == "invalid_auth"


async def test_socket_mode_delivers_envelopes_takes_acks_and_reconnects() -> None:
    async with SlackServer() as peer:
        web = AsyncWebClient(token=peer.token, base_url=peer.api_base)
        client = SocketModeClient(app_token=peer.app_token, web_client=web, ping_interval=1)
        received: list[SocketModeRequest] = []

        async def listener(socket: SocketModeClient, request: SocketModeRequest) -> None:
            received.append(request)
            await socket.send_socket_mode_response(SocketModeResponse(request.envelope_id))

        client.socket_mode_request_listeners.append(listener)  # type: ignore[arg-type]
        await client.connect()
        try:
            await peer.inject_message(f"<@{BOT_ID}> hi", channel=peer.channel)
            await peer.wait_until(lambda: len(peer.acks) == 2)
            assert [r.payload["event"]["type"] for r in received] == ["message", "app_mention"]
            await peer.drop(redeliver=True)
            await peer.wait_until(lambda: len(received) == 3 and peer.connections == 2)
            assert received[-1].retry_attempt == 1
            envelope = await peer.slash("/reset")
            await peer.wait_until(lambda: peer.acked(envelope) is not None)
            assert received[-1].type == "slash_commands"
        finally:
            await client.close()
            await asyncio.sleep(0)
