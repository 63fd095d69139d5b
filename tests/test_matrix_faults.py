"""Matrix faults through Synapse (issue 12; architecture §3 "Network errors", "Matrix specifics",
§7; case C17): a final send the homeserver refuses keeps the last preview, and ``/healthz`` is
degraded while ``/sync`` fails.

The refusals are Synapse's own: the human, the room's creator, raises the power level needed to
send ``m.room.message`` (and, for the edit-based mode, ``m.room.redaction``) above the bot's once
previews are showing, so every later write of the bot is a real ``403 M_FORBIDDEN``. The sync
failure is the bot's access token revoked (``/logout``): ``401 M_UNKNOWN_TOKEN``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import nio
import pytest

from tests.matrix_harness import World, matrix_world, running_bot
from tests.peers.matrix_client import resolve_edits
from tests.peers.synapse import SynapseHomeserver, free_port
from tests.telegram_harness import pieces_of, reply, text_stream, words

TEXT = "Slowly, " + words("slow", 500)


def _is_edit(event: dict[str, Any]) -> bool:
    return event["content"].get("m.relates_to", {}).get("rel_type") == "m.replace"


async def _mute_the_bot(world: World, *, redactions: bool) -> None:
    """Power levels: ``m.room.message`` (and ``m.room.redaction``) need 100; the bot has 0."""
    got = await world.human.room_get_state_event(world.room_id, "m.room.power_levels")
    assert isinstance(got, nio.RoomGetStateEventResponse), got
    content = dict(got.content)
    events = dict(content.get("events", {}))
    events["m.room.message"] = 100
    if redactions:
        events["m.room.redaction"] = 100
    content["events"] = events
    put = await world.human.room_put_state(world.room_id, "m.room.power_levels", content)
    assert isinstance(put, nio.RoomPutStateResponse), put


async def _previews_showing(world: World, count: int) -> None:
    with anyio.fail_after(20):
        while True:
            if len(await world.bot_events()) >= count:
                return
            await anyio.sleep(0.1)


@pytest.mark.parametrize("notices", [False, True], ids=["final-edit", "notice-previews"])
async def test_c17_a_refused_final_send_keeps_the_last_preview(
    synapse: SynapseHomeserver, tmp_path: Path, notices: bool
) -> None:
    """With ``notice_previews`` the final text is a new ``m.text`` the server refuses: the
    notice draft is not redacted (redactions stay allowed, so only the engine keeps it). In the
    edit-based mode the final edit, the delete that would retire the draft and the new message
    are all refused: the draft shows its last preview."""
    stream = reply(text_stream(pieces_of(TEXT, 12)), delay_secs=0.05)
    extra = "    notice_previews: true\n" if notices else ""
    async with matrix_world(synapse, tmp_path, [stream]) as world:
        async with running_bot(world, mode="partial", interval_ms=200, extra=extra):
            before = world.channel.replies_finished
            await world.send({"msgtype": "m.text", "body": "go slowly"})
            await _previews_showing(world, 3)  # the draft and two edits
            await _mute_the_bot(world, redactions=not notices)
            with anyio.fail_after(60):
                await world.channel.wait_replies(before + 1)
            await anyio.sleep(0.5)
        events = await world.bot_events()
        everything = await world.timeline()
    bot = world.bot_user.user_id
    redacted = {
        e.get("redacts") or e["content"].get("redacts")
        for e in everything
        if e["sender"] == bot and e["type"] == "m.room.redaction"
    }
    assert not redacted & {e["event_id"] for e in events}  # its own ⏹ reaction may go
    originals = [e for e in events if not _is_edit(e)]
    assert len(originals) == 1, "the refused final text went out anyway"
    draft = originals[0]
    shown = resolve_edits(events)[draft["event_id"]]
    assert shown["body"].strip(), "the draft lost its text"
    assert TEXT.startswith(shown["body"].removesuffix("…").strip())
    assert len(shown["body"]) < len(TEXT), "the answer was complete before the mute"
    expected = "m.notice" if notices else "m.text"
    assert draft["content"]["msgtype"] == shown["msgtype"] == expected


async def test_healthz_is_degraded_while_sync_fails(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/healthz"
    async with matrix_world(synapse, tmp_path, [reply(text_stream(["x"]))]) as world:
        async with (
            running_bot(world, listen=f"127.0.0.1:{port}"),
            httpx.AsyncClient(trust_env=False, timeout=10) as http,
        ):
            with anyio.fail_after(20):
                while True:
                    with anyio.move_on_after(2):
                        try:
                            healthy = await http.get(url)
                            break
                        except httpx.TransportError:
                            pass
                    await anyio.sleep(0.1)
            assert healthy.status_code == 200
            assert healthy.json()["status"] == "ok"
            assert healthy.json()["channels"] == {"mx": {"state": "ok"}}
            logout = await http.post(
                f"{synapse.base_url}/_matrix/client/v3/logout",
                headers={"Authorization": f"Bearer {world.bot_user.access_token}"},
            )
            assert logout.status_code == 200, logout.text
            with anyio.fail_after(20):
                while True:
                    answer = await http.get(url)
                    if answer.status_code != 200:
                        break
                    await anyio.sleep(0.2)
            assert answer.status_code == 503
            body = answer.json()
            assert body["status"] == "degraded"
            assert body["channels"]["mx"]["state"] == "degraded"
            assert "M_UNKNOWN_TOKEN" in body["channels"]["mx"]["reason"]
