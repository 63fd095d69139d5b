"""The human's side of a Matrix test: a matrix-nio client and what its timeline shows.

Helpers over a :class:`~tests.peers.synapse.SynapseHomeserver` (architecture §8):
:func:`nio_client` (an ``AsyncClient`` with ``max_limit_exceeded=0``), :func:`sync_timeline`
(one ``/sync`` with :data:`SYNC_FILTER`: a plain sync returns only 10 timeline events),
:func:`resolve_edits` (the content a client shows once ``m.replace`` edits are applied),
:func:`thread_root`, and :class:`EncryptedClient`, an end-to-end encrypting client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nio

from tests.peers.synapse import MatrixUser, SynapseHomeserver

__all__ = [
    "SYNC_FILTER",
    "EncryptedClient",
    "nio_client",
    "resolve_edits",
    "sync_timeline",
    "thread_root",
]

SYNC_FILTER: dict[str, Any] = {
    "room": {"timeline": {"limit": 200}},
    "presence": {"types": []},
    "account_data": {"types": []},
}
"""A ``/sync`` filter whose timeline limit (200 events) exceeds the default of 10."""


def nio_client(homeserver: SynapseHomeserver, user: MatrixUser) -> nio.AsyncClient:
    """A matrix-nio client logged in as ``user``: no end-to-end encryption, no store, and
    ``max_limit_exceeded=0`` / ``max_timeouts=0`` so a 429 or a timeout comes back as an error
    response instead of being retried. The caller closes it (``await client.close()``)."""
    config = nio.AsyncClientConfig(
        max_limit_exceeded=0,
        max_timeouts=0,
        encryption_enabled=False,
        store_sync_tokens=False,
    )
    client = nio.AsyncClient(homeserver.base_url, user.user_id, config=config)
    client.restore_login(user.user_id, user.device_id, user.access_token)
    return client


async def sync_timeline(
    client: nio.AsyncClient, room_id: str, *, timeout_ms: int = 0
) -> list[dict[str, Any]]:
    """One ``/sync`` with :data:`SYNC_FILTER` from the client's last batch: the raw events
    (``event.source`` dicts, oldest first) the room's timeline gained; ``timeout_ms`` is the
    long-poll wait. Raises ``AssertionError`` carrying the error response when the sync fails,
    or when its timeline is ``limited`` (events were skipped)."""
    response = await client.sync(timeout=timeout_ms, sync_filter=SYNC_FILTER)
    assert isinstance(response, nio.SyncResponse), response
    room = response.rooms.join.get(room_id)
    if room is None:
        return []
    assert not room.timeline.limited, f"the sync skipped events of {room_id}"
    return [event.source for event in room.timeline.events]


def resolve_edits(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The content a client shows for each original event of ``events`` (raw dicts, any order),
    keyed by event id, after applying ``m.replace`` edits.

    Per the Client-Server API, "Event replacements" (spec v1.11 §11.37): a replacement counts
    only when it has the original's sender and is not itself replacing a replacement; the one
    with the greatest ``origin_server_ts`` (then the greatest event id) wins, and its
    ``m.new_content`` replaces the content, the original's ``m.relates_to`` kept (e.g. a thread).
    """
    originals: dict[str, dict[str, Any]] = {}
    edits: list[dict[str, Any]] = []
    for event in events:
        relation = event.get("content", {}).get("m.relates_to", {})
        if relation.get("rel_type") == "m.replace":
            edits.append(event)
        else:
            originals[event["event_id"]] = event
    shown = {event_id: dict(event["content"]) for event_id, event in originals.items()}
    winners: dict[str, dict[str, Any]] = {}
    for edit in edits:
        target = edit["content"]["m.relates_to"].get("event_id")
        original = originals.get(target)
        if original is None or original["sender"] != edit["sender"]:
            continue
        if "m.new_content" not in edit["content"]:
            continue
        best = winners.get(target)
        if best is None or (edit["origin_server_ts"], edit["event_id"]) > (
            best["origin_server_ts"],
            best["event_id"],
        ):
            winners[target] = edit
    for target, edit in winners.items():
        content = dict(edit["content"]["m.new_content"])
        relation = originals[target]["content"].get("m.relates_to")
        if relation is not None:
            content["m.relates_to"] = relation
        shown[target] = content
    return shown


def thread_root(event: dict[str, Any]) -> str | None:
    """The thread root event id of a raw event in a thread (``rel_type: m.thread``), else None."""
    relation = event.get("content", {}).get("m.relates_to", {})
    if relation.get("rel_type") == "m.thread":
        root: str = relation["event_id"]
        return root
    return None


class EncryptedClient:
    """The human's end-to-end encrypting matrix-nio client (``matrix-nio[e2e]``), its key store
    in ``store_dir``: an async context manager that logs ``user``'s registered device in and
    uploads its keys.

    :meth:`sync` is one ``/sync`` (the decrypted timeline events of one room kept in
    :attr:`events`, nio's event objects) followed by what nio's ``sync_forever`` does for keys:
    upload, query, claim, to-device messages. :meth:`send_text` encrypts for every device of
    the room's members (trusted on first use)."""

    def __init__(self, homeserver: SynapseHomeserver, user: MatrixUser, store_dir: Path) -> None:
        store_dir.mkdir(parents=True, exist_ok=True)
        config = nio.AsyncClientConfig(
            max_limit_exceeded=0,
            max_timeouts=0,
            encryption_enabled=True,
            store_sync_tokens=False,
        )
        self.client = nio.AsyncClient(
            homeserver.base_url,
            user.user_id,
            device_id=user.device_id,
            store_path=str(store_dir),
            config=config,
        )
        self.user = user
        self.events: dict[str, list[nio.Event]] = {}

    async def __aenter__(self) -> EncryptedClient:
        self.client.restore_login(self.user.user_id, self.user.device_id, self.user.access_token)
        await self._keys()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def _keys(self) -> None:
        client = self.client
        if client.should_upload_keys:
            assert isinstance(await client.keys_upload(), nio.KeysUploadResponse)
        if client.should_query_keys:
            assert isinstance(await client.keys_query(), nio.KeysQueryResponse)
        if client.should_claim_keys:
            await client.keys_claim(client.get_users_for_key_claiming())
        await client.send_to_device_messages()

    async def sync(self, *, timeout_ms: int = 0) -> None:
        response = await self.client.sync(
            timeout=timeout_ms, sync_filter=SYNC_FILTER, full_state=self.client.next_batch is None
        )
        assert isinstance(response, nio.SyncResponse), response
        for room_id, room in response.rooms.join.items():
            self.events.setdefault(room_id, []).extend(room.timeline.events)
        await self._keys()

    async def create_room(self, invite: str) -> str:
        """An encrypted room (``m.megolm.v1.aes-sha2``) with ``invite`` invited; synced."""
        created = await self.client.room_create(
            name="encrypted",
            invite=[invite],
            initial_state=[
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ],
        )
        assert isinstance(created, nio.RoomCreateResponse), created
        await self.sync()
        return str(created.room_id)

    def joined(self, room_id: str, user_id: str) -> bool:
        room = self.client.rooms.get(room_id)
        return room is not None and user_id in room.users

    async def send_text(self, room_id: str, text: str) -> str:
        """An encrypted ``m.text``; returns its event id."""
        sent = await self.client.room_send(
            room_id,
            "m.room.message",
            {"msgtype": "m.text", "body": text},
            ignore_unverified_devices=True,
        )
        assert isinstance(sent, nio.RoomSendResponse), sent
        return str(sent.event_id)
