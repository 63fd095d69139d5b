"""The human's side of a Matrix test: a matrix-nio client and what its timeline shows.

Helpers over a :class:`~tests.peers.synapse.SynapseHomeserver` (architecture §8):
:func:`nio_client` (an ``AsyncClient`` with ``max_limit_exceeded=0``), :func:`sync_timeline`
(one ``/sync`` with :data:`SYNC_FILTER`: a plain sync returns only 10 timeline events),
:func:`resolve_edits` (the content a client shows once ``m.replace`` edits are applied) and
:func:`thread_root`.
"""

from __future__ import annotations

from typing import Any

import nio

from tests.peers.synapse import MatrixUser, SynapseHomeserver

__all__ = ["SYNC_FILTER", "nio_client", "resolve_edits", "sync_timeline", "thread_root"]

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
