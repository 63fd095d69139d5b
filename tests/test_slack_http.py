"""The Events API over HTTP (``signing_secret``): Slack's signature checked on every request,
an answer at once, a retry (``X-Slack-Retry-Num``) answered once, ``url_verification``, and
slash commands and button presses as forms (architecture §3 "Inbound")."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import anyio
from slack_sdk.signature import SignatureVerifier

from tests.instances import free_port
from tests.peers.slack import TEAM_ID
from tests.slack_harness import SIGNING_SECRET, running_bot
from tests.telegram_harness import reply, text_stream


def _signed(body: bytes, *, secret: str = SIGNING_SECRET, **headers: str) -> dict[str, str]:
    stamp = str(int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature, **headers}


def _event(channel: str, user: str, text: str, ts: str) -> bytes:
    event = {"type": "message", "channel": channel, "user": user, "text": text, "ts": ts,
             "event_ts": ts, "channel_type": "im"}  # fmt: skip
    payload: dict[str, Any] = {"type": "event_callback", "team_id": TEAM_ID, "event": event,
                               "event_id": "Ev1", "event_time": int(time.time())}  # fmt: skip
    return json.dumps(payload).encode()


async def test_signed_events_are_answered_once_and_unsigned_ones_refused(tmp_path: Path) -> None:
    listen = f"127.0.0.1:{free_port()}"
    url = f"http://{listen}/slack/events"
    json_type = {"Content-Type": "application/json"}
    async with (
        running_bot(tmp_path, [reply(text_stream(["Over HTTP."]))], events_listen=listen) as bot,
        aiohttp.ClientSession() as http,
    ):
        peer, dm = bot.peer, bot.peer.dm_channel
        challenge = json.dumps({"type": "url_verification", "challenge": "c-1"}).encode()
        async with http.post(url, data=challenge, headers=_signed(challenge, **json_type)) as r:
            assert r.status == 200 and (await r.json()) == {"challenge": "c-1"}
        ts = peer.web.add_user_message(dm, peer.user, "hello over http", None)
        body = _event(dm, peer.user, "hello over http", ts)
        forged = _signed(body, secret="not-the-secret", **json_type)
        async with http.post(url, data=body, headers=forged) as r:
            assert r.status == 401
        before = bot.channel.replies_finished
        for retry in ({}, {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}):
            async with http.post(url, data=body, headers=_signed(body, **json_type, **retry)) as r:
                assert r.status == 200
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 1)
        form = urlencode({"command": "/help", "text": "", "channel_id": dm,
                          "user_id": peer.user, "user_name": "alice"}).encode()  # fmt: skip
        headers = _signed(form, **{"Content-Type": "application/x-www-form-urlencoded"})
        async with http.post(url, data=form, headers=headers) as r:
            assert (await r.json())["text"] == "/help"
        with anyio.fail_after(20):
            await bot.channel.wait_replies(before + 2)
    assert bot.channel.events_server is None  # stopped with the daemon
    [answer] = [m for m in bot.answers(dm) if m.text == "Over HTTP." or m.appends == ["Over HTTP."]]
    assert answer.thread_ts == ts
    assert len(bot.provider.requests_to("/v1/chat/completions")) == 1
