"""The Synapse peer itself: what a real homeserver does with the events the Matrix channel sends.

Two matrix-nio clients (``max_limit_exceeded=0``): the bot and a human, in a room the human
created. These tests pin the wire facts the adapter relies on (architecture §3 "Matrix specifics",
§8): ``m.replace`` edits as a client resolves them, thread relations, the 10-event default of a
plain ``/sync``, and the shape of a real ``429 M_LIMIT_EXCEEDED``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import nio
import pytest

from tests.peers.matrix_client import (
    SYNC_FILTER,
    nio_client,
    resolve_edits,
    sync_timeline,
    thread_root,
)
from tests.peers.synapse import MatrixUser, SynapseHomeserver


@dataclass
class Room:
    """A room the human created and the bot joined, with both logged-in clients."""

    server: SynapseHomeserver
    room_id: str
    bot_user: MatrixUser
    human_user: MatrixUser
    bot: nio.AsyncClient
    human: nio.AsyncClient


async def _open_room(server: SynapseHomeserver) -> AsyncIterator[Room]:
    bot_user = server.register()
    human_user = server.register()
    bot = nio_client(server, bot_user)
    human = nio_client(server, human_user)
    try:
        created = await human.room_create(name="relaybot test", invite=[bot_user.user_id])
        assert isinstance(created, nio.RoomCreateResponse), created
        joined = await bot.join(created.room_id)
        assert isinstance(joined, nio.JoinResponse), joined
        yield Room(server, created.room_id, bot_user, human_user, bot, human)
    finally:
        await bot.close()
        await human.close()


@pytest.fixture
async def room(synapse: SynapseHomeserver) -> AsyncIterator[Room]:
    async for opened in _open_room(synapse):
        yield opened


@pytest.fixture
async def limited_room(synapse_default_limits: SynapseHomeserver) -> AsyncIterator[Room]:
    async for opened in _open_room(synapse_default_limits):
        yield opened


async def _send(client: nio.AsyncClient, room_id: str, content: dict[str, Any]) -> str:
    response = await client.room_send(room_id, "m.room.message", content)
    assert isinstance(response, nio.RoomSendResponse), response
    event_id: str = response.event_id
    return event_id


def _by_id(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {event["event_id"]: event for event in events}


def test_users_register_through_the_shared_secret(synapse: SynapseHomeserver) -> None:
    user = synapse.register("alice-registered")
    assert user.user_id == "@alice-registered:relaybot.test"
    assert user.access_token and user.device_id
    answer = httpx.get(
        f"{synapse.base_url}/_matrix/client/v3/account/whoami",
        headers={"Authorization": f"Bearer {user.access_token}"},
        trust_env=False,
    )
    assert answer.json() == {
        "user_id": user.user_id,
        "device_id": user.device_id,
        "is_guest": False,
    }


async def test_the_human_sees_the_edit_and_resolves_it_to_the_new_content(room: Room) -> None:
    started = time.monotonic()
    original = await _send(room.bot, room.room_id, {"msgtype": "m.text", "body": "Hello"})
    new_content = {
        "msgtype": "m.text",
        "body": "Hello **world**",
        "format": "org.matrix.custom.html",
        "formatted_body": "Hello <strong>world</strong>",
    }
    edit = await _send(
        room.bot,
        room.room_id,
        {
            "msgtype": "m.text",
            "body": "* Hello **world**",
            "m.new_content": new_content,
            "m.relates_to": {"rel_type": "m.replace", "event_id": original},
        },
    )

    events = _by_id(await sync_timeline(room.human, room.room_id))
    assert events[original]["content"] == {"msgtype": "m.text", "body": "Hello"}
    assert events[original]["sender"] == room.bot_user.user_id
    assert events[edit]["content"]["body"] == "* Hello **world**"
    assert events[edit]["content"]["m.relates_to"] == {
        "rel_type": "m.replace",
        "event_id": original,
    }
    shown = resolve_edits(list(events.values()))
    assert shown[original] == new_content
    assert edit not in shown

    # Synapse bundles the latest edit into the original (MSC3925): clients that fetch the
    # original alone still find it.
    fetched = await room.human.room_get_event(room.room_id, original)
    assert isinstance(fetched, nio.RoomGetEventResponse), fetched
    bundled = fetched.event.source["unsigned"]["m.relations"]["m.replace"]
    assert bundled["event_id"] == edit
    print(f"edit round trip {time.monotonic() - started:.2f} s")


async def test_only_the_latest_edit_by_the_sender_counts(room: Room) -> None:
    original = await _send(room.bot, room.room_id, {"msgtype": "m.text", "body": "v0"})
    for version in ("v1", "v2"):
        await _send(
            room.bot,
            room.room_id,
            {
                "msgtype": "m.text",
                "body": f"* {version}",
                "m.new_content": {"msgtype": "m.text", "body": version},
                "m.relates_to": {"rel_type": "m.replace", "event_id": original},
            },
        )
    await _send(
        room.human,
        room.room_id,
        {
            "msgtype": "m.text",
            "body": "* forged",
            "m.new_content": {"msgtype": "m.text", "body": "forged"},
            "m.relates_to": {"rel_type": "m.replace", "event_id": original},
        },
    )
    shown = resolve_edits(await sync_timeline(room.human, room.room_id))
    assert shown[original] == {"msgtype": "m.text", "body": "v2"}


async def test_a_thread_reply_and_its_edit_stay_in_the_thread(room: Room) -> None:
    root = await _send(room.human, room.room_id, {"msgtype": "m.text", "body": "question"})
    thread_relation = {
        "rel_type": "m.thread",
        "event_id": root,
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": root},
    }
    reply = await _send(
        room.bot,
        room.room_id,
        {"msgtype": "m.text", "body": "answer, part", "m.relates_to": thread_relation},
    )
    await _send(
        room.bot,
        room.room_id,
        {
            "msgtype": "m.text",
            "body": "* answer, whole",
            "m.new_content": {"msgtype": "m.text", "body": "answer, whole"},
            "m.relates_to": {"rel_type": "m.replace", "event_id": reply},
        },
    )
    elsewhere = await _send(room.bot, room.room_id, {"msgtype": "m.text", "body": "main timeline"})

    events = await sync_timeline(room.human, room.room_id)
    by_id = _by_id(events)
    assert thread_root(by_id[reply]) == root
    assert thread_root(by_id[root]) is None
    assert thread_root(by_id[elsewhere]) is None
    shown = resolve_edits(events)
    assert shown[reply]["body"] == "answer, whole"
    assert shown[reply]["m.relates_to"] == thread_relation

    # The server sees the thread too: the root carries its thread summary.
    fetched = await room.human.room_get_event(room.room_id, root)
    assert isinstance(fetched, nio.RoomGetEventResponse), fetched
    summary = fetched.event.source["unsigned"]["m.relations"]["m.thread"]
    assert summary["count"] == 1
    assert summary["latest_event"]["event_id"] == reply


async def test_a_plain_sync_gets_ten_events_the_filter_gets_them_all(room: Room) -> None:
    sent = [
        await _send(room.bot, room.room_id, {"msgtype": "m.text", "body": f"line {n}"})
        for n in range(15)
    ]
    filtered = [event["event_id"] for event in await sync_timeline(room.human, room.room_id)]
    assert filtered[-15:] == sent
    assert SYNC_FILTER["room"]["timeline"]["limit"] > 10

    fresh = nio_client(room.server, room.human_user)
    try:
        plain = await fresh.sync(timeout=0)
        assert isinstance(plain, nio.SyncResponse), plain
        timeline = plain.rooms.join[room.room_id].timeline
        assert timeline.limited
        assert [event.event_id for event in timeline.events] == sent[-10:]
    finally:
        await fresh.close()


async def test_default_rc_message_limits_answer_429_with_retry_after_ms(
    limited_room: Room,
) -> None:
    room = limited_room
    sent = 0
    refused: nio.RoomSendError | None = None
    for n in range(30):
        response = await room.bot.room_send(
            room.room_id, "m.room.message", {"msgtype": "m.text", "body": f"burst {n}"}
        )
        if isinstance(response, nio.RoomSendError):
            refused = response
            break
        assert isinstance(response, nio.RoomSendResponse), response
        sent += 1
    assert refused is not None, "30 sends in a burst were all accepted"
    assert sent >= 1
    assert refused.status_code == "M_LIMIT_EXCEEDED"
    assert isinstance(refused.retry_after_ms, int)
    assert 0 < refused.retry_after_ms <= 5000  # 1 / 0.2 per second

    # The raw answer, as any client gets it (Client-Server API "Rate limiting").
    async with httpx.AsyncClient(trust_env=False, base_url=room.server.base_url) as http:
        answer = await http.put(
            f"/_matrix/client/v3/rooms/{room.room_id}/send/m.room.message/raw-1",
            json={"msgtype": "m.text", "body": "raw"},
            headers={"Authorization": f"Bearer {room.bot_user.access_token}"},
        )
    assert answer.status_code == 429
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["errcode"] == "M_LIMIT_EXCEEDED"
    assert isinstance(body["retry_after_ms"], int)
    assert 0 < body["retry_after_ms"] <= 5000
    assert int(answer.headers["retry-after"]) >= body["retry_after_ms"] / 1000

    # Waiting retry_after_ms is enough: the next send lands.
    await asyncio.sleep(body["retry_after_ms"] / 1000 + 0.05)
    response = await room.bot.room_send(
        room.room_id, "m.room.message", {"msgtype": "m.text", "body": "after the wait"}
    )
    assert isinstance(response, nio.RoomSendResponse), response
    print(f"{sent} sends before the first 429; retry_after_ms {body['retry_after_ms']}")
