"""Files and voice through Synapse (issue 32; architecture §3 "Inputs"): the real daemon, a real
Synapse homeserver with its media repository, the human a second matrix-nio client uploading
files, the provider a local OpenAI-compatible server (chat and ``/v1/audio/transcriptions``).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import anyio
import nio
import pytest

from tests.matrix_harness import World, matrix_world, running_bot
from tests.pdf_files import pdf_with_pages
from tests.peers.matrix_client import EncryptedClient
from tests.peers.provider_server import Reply
from tests.peers.synapse import SynapseHomeserver
from tests.telegram_harness import reply, text_stream

PDF = pdf_with_pages("Quarterly report")
VOICE = b"OggS\x00\x02 a matrix voice note"
TRANSCRIPTIONS = "/v1/audio/transcriptions"
SPEECH = "speech:\n  provider: main\n  reply: voice_notes_only\n"
SPOKEN = b"OggS\x00\x02 the spoken answer"


def _last_user(request_json: dict[str, Any]) -> Any:
    return [m for m in request_json["messages"] if m["role"] == "user"][-1]["content"]


async def _upload(world: World, data: bytes, mime: str, name: str) -> str:
    response, _ = await world.human.upload(
        io.BytesIO(data), content_type=mime, filename=name, filesize=len(data)
    )
    assert isinstance(response, nio.UploadResponse), response
    return str(response.content_uri)


async def test_a_pdf_with_a_caption_and_a_voice_note_answered_aloud(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    replies = [reply(text_stream(["A report."])), reply(text_stream(["Noon."]))]
    async with matrix_world(synapse, tmp_path, replies) as world:
        world.provider.script(TRANSCRIPTIONS, [Reply.json({"text": "what time is it"})])
        world.provider.script("/v1/audio/speech", [Reply(body=SPOKEN, content_type="audio/ogg")])
        pdf_url = await _upload(world, PDF, "application/pdf", "r.pdf")
        voice_url = await _upload(world, VOICE, "audio/ogg", "voice.ogg")
        async with running_bot(world, mode="off", top_level=SPEECH):
            await world.ask(
                "what is it?",
                msgtype="m.file",
                filename="r.pdf",
                url=pdf_url,
                info={"mimetype": "application/pdf", "size": len(PDF)},
            )
            await world.ask(
                "voice.ogg",
                msgtype="m.audio",
                url=voice_url,
                info={"mimetype": "audio/ogg", "size": len(VOICE), "duration": 2300},
            )
        events = await world.bot_events()
        voice = events[-1]["content"]
        spoken = await world.human.download(mxc=voice["url"])
    bodies = [e["content"]["body"] for e in events]
    # The transcript, the answer, then the answer spoken (only to the voice note).
    assert bodies == ["A report.", "🎤 “what time is it”", "Noon.", "answer.ogg"]
    assert voice["msgtype"] == "m.audio" and "org.matrix.msc3245.voice" in voice
    assert voice["info"] == {"mimetype": "audio/ogg", "size": len(SPOKEN)}
    assert isinstance(spoken, nio.MemoryDownloadResponse) and spoken.body == SPOKEN
    assert [r.json["input"] for r in world.provider.requests_to("/v1/audio/speech")] == ["Noon."]
    chat = world.provider.requests_to("/v1/chat/completions")
    first = _last_user(chat[0].json)
    url = f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"
    assert first[0] == {"type": "text", "text": "what is it?"}
    assert first[2] == {"type": "file", "file": {"filename": "r.pdf", "file_data": url}}
    (heard,) = world.provider.requests_to(TRANSCRIPTIONS)
    assert heard.form()["file"].data == VOICE
    assert _last_user(chat[1].json) == "what time is it"


async def test_an_encrypted_file_in_an_encrypted_room(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    pytest.importorskip("vodozemac", reason="matrix-nio[e2e] is not installed")
    source = b"def secret():\n    return 42\n"
    extra = f'    store_path: "{tmp_path / "bot-keys"}"\n'
    async with (
        matrix_world(synapse, tmp_path, [reply(text_stream(["It returns 42."]))]) as world,
        EncryptedClient(synapse, world.human_user, tmp_path / "human-keys") as human,
    ):
        room_id = await human.create_room(invite=world.bot_user.user_id)
        async with running_bot(world, mode="off", extra=extra):
            with anyio.fail_after(30):
                while not human.joined(room_id, world.bot_user.user_id):
                    await human.sync(timeout_ms=500)
            uploaded, keys = await human.client.upload(
                io.BytesIO(source),
                content_type="text/x-python",
                filename="s.py",
                encrypt=True,
                filesize=len(source),
            )
            assert isinstance(uploaded, nio.UploadResponse) and keys is not None
            before = world.channel.replies_finished
            content = {
                "msgtype": "m.file",
                "body": "s.py",
                "info": {"mimetype": "text/x-python", "size": len(source)},
                "file": {**keys, "url": uploaded.content_uri},
            }
            sent = await human.client.room_send(
                room_id, "m.room.message", content, ignore_unverified_devices=True
            )
            assert isinstance(sent, nio.RoomSendResponse), sent
            with anyio.fail_after(60):
                while world.channel.replies_finished < before + 1:
                    await human.sync(timeout_ms=300)
    (request,) = world.provider.requests
    (part,) = _last_user(request.json)
    assert part["text"].startswith('<document name="s.py" type="text/x-python">')
    assert "return 42" in part["text"]
