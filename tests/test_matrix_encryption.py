"""Encrypted Matrix rooms through Synapse (issue 12; architecture §3 "Matrix specifics"): with
matrix-nio's e2e extra and a ``store_path`` the bot joins an encrypted room, reads the human's
encrypted question and answers in encrypted events that the human's own e2e client decrypts,
streamed ``m.replace`` edits and final text included; the key store outlives a restart. Without
the extra (its import made to fail at the seam, ``sys.modules``) or without a ``store_path`` the
room is refused with one log line.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import nio
import pytest

from channels.errors import ChannelStartError
from channels.matrix.adapter import MatrixChannel
from channels.matrix.crypto import E2E_MODULES
from channels.matrix.format import HTML_FORMAT, markdown_to_html
from channels.matrix.kind import MatrixChannelConfig
from tests.matrix_harness import World, matrix_world, running_bot
from tests.peers.matrix_client import EncryptedClient, resolve_edits
from tests.peers.synapse import SynapseHomeserver
from tests.telegram_harness import pieces_of, reply, text_stream, words

pytest.importorskip("vodozemac", reason="matrix-nio[e2e] is not installed")

ANSWER = "It is **noon** in the encrypted room. " + words("w", 600)
SECOND = "Still _readable_ after a restart."


async def _wait_joined(human: EncryptedClient, room_id: str, user_id: str) -> None:
    with anyio.fail_after(30):
        while not human.joined(room_id, user_id):
            await human.sync(timeout_ms=500)


async def _ask(world: World, human: EncryptedClient, room_id: str, text: str) -> str:
    before = world.channel.replies_finished
    event_id = await human.send_text(room_id, text)
    with anyio.fail_after(60):
        while world.channel.replies_finished < before + 1:
            await human.sync(timeout_ms=300)
    await human.sync()
    return event_id


def _raw_events(world: World, room_id: str) -> list[dict[str, Any]]:
    """The room's events as the homeserver stores them (``/messages``, not decrypted)."""
    url = f"{world.server.base_url}/_matrix/client/v3/rooms/{room_id}/messages"
    headers = {"Authorization": f"Bearer {world.human_user.access_token}"}
    with httpx.Client(trust_env=False, timeout=10) as http:
        answer = http.get(url, params={"dir": "f", "limit": 1000}, headers=headers)
    answer.raise_for_status()
    chunk: list[dict[str, Any]] = answer.json()["chunk"]
    return chunk


async def test_an_encrypted_room_is_answered_in_edits_the_human_decrypts(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    replies = [
        reply(text_stream(pieces_of(ANSWER, 20)), delay_secs=0.1),
        reply(text_stream([SECOND])),
    ]
    extra = f'    store_path: "{tmp_path / "bot-keys"}"\n'
    async with (
        matrix_world(synapse, tmp_path, replies) as world,
        EncryptedClient(synapse, world.human_user, tmp_path / "human-keys") as human,
    ):
        room_id = await human.create_room(invite=world.bot_user.user_id)
        async with running_bot(world, mode="partial", extra=extra):
            assert world.channel.encrypted
            await _wait_joined(human, room_id, world.bot_user.user_id)
            await _ask(world, human, room_id, "what time is it?")
        async with running_bot(world, mode="partial", extra=extra):  # the same key store
            await _ask(world, human, room_id, "and now?")
        bot = world.bot_user.user_id
        decrypted = [e for e in human.events[room_id] if e.sender == bot]
        raw = [e for e in _raw_events(world, room_id) if e["sender"] == bot]

    # Nothing the bot wrote went out in plaintext; edits relate in the cleartext.
    messages = [e for e in raw if e["type"] in ("m.room.message", "m.room.encrypted")]
    assert messages and all(e["type"] == "m.room.encrypted" for e in messages)
    relations = [e["content"].get("m.relates_to", {}).get("rel_type") for e in messages]
    assert relations.count("m.replace") >= 2, "the answer did not stream as edits"

    # The human's client decrypted every one of them.
    undecrypted = [e for e in decrypted if isinstance(e, nio.MegolmEvent)]
    assert undecrypted == []
    sources = [e.source for e in decrypted if e.source.get("type") == "m.room.message"]
    assert len(sources) == len(messages)
    assert all(e.decrypted for e in decrypted if isinstance(e, nio.RoomMessage))
    edits = [s for s in sources if s["content"].get("m.relates_to", {}).get("rel_type")]
    originals = [s for s in sources if s not in edits]
    assert len(originals) == 2
    first, second = (resolve_edits(sources)[s["event_id"]] for s in originals)
    assert first["body"] == ANSWER
    assert first["format"] == HTML_FORMAT
    assert first["formatted_body"] == markdown_to_html(ANSWER)
    assert second["body"] == SECOND
    for edit in edits:
        new = edit["content"]["m.new_content"]
        assert edit["content"]["body"] == "* " + new["body"]


@pytest.mark.parametrize("cause", ["no e2e extra", "no store_path"])
async def test_an_encrypted_room_is_refused_with_one_log_line(
    synapse: SynapseHomeserver,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    cause: str,
) -> None:
    caplog.set_level(logging.INFO, logger="channels.matrix")
    extra = ""
    if cause == "no e2e extra":  # as without matrix-nio[e2e]: vodozemac cannot be imported
        monkeypatch.setitem(sys.modules, E2E_MODULES[0], None)
        extra = f'    store_path: "{tmp_path / "bot-keys"}"\n'
    async with matrix_world(synapse, tmp_path, [reply(text_stream(["x"]))]) as world:
        created = await world.human.room_create(
            name="secret",
            invite=[world.bot_user.user_id],
            initial_state=[
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ],
        )
        assert isinstance(created, nio.RoomCreateResponse), created
        async with running_bot(world, extra=extra):
            assert not world.channel.encrypted
            await anyio.sleep(1.5)  # a sync or two more: still one line
            members = await world.human.joined_members(created.room_id)
    assert isinstance(members, nio.JoinedMembersResponse), members
    assert world.bot_user.user_id not in {m.user_id for m in members.members}
    refusals = [r for r in caplog.records if "not joining the encrypted room" in r.getMessage()]
    assert len(refusals) == 1
    expected = "install matrix-nio[e2e]" if cause == "no e2e extra" else "set store_path"
    assert expected in refusals[0].getMessage()


async def test_a_lost_key_store_is_a_start_error_naming_it(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    """The homeserver keeps the device's keys; a new store for the same device cannot upload
    its own (Synapse refuses one-time keys whose ids it already holds)."""
    bot = synapse.register()
    store = tmp_path / "keys"
    config = MatrixChannelConfig(
        kind="matrix",
        homeserver=synapse.base_url,
        user_id=bot.user_id,
        access_token=bot.access_token,
        device_id=bot.device_id,
        store_path=str(store),
        allowed_users=["*"],
    )

    async def ignore(message: object) -> None:
        return None

    async with MatrixChannel("mx", config, ignore) as channel:
        assert channel.encrypted
    shutil.rmtree(store)
    with pytest.raises(ChannelStartError, match="refused the keys of device") as raised:
        async with MatrixChannel("mx", config, ignore):
            pass
    assert str(store) in str(raised.value)
    assert bot.access_token not in str(raised.value)
