"""Documents and voice messages through the Discord peer (issue 32; architecture §3 "Inputs"): the
real daemon and adapter on discord.py, the REST + Gateway peer serving the attachments' bytes,
and a local OpenAI-compatible server (chat and ``/v1/audio/transcriptions``).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio

from tests.discord_harness import SEND, DiscordBot, running_bot
from tests.pdf_files import pdf_with_pages
from tests.peers.discord import UploadedFile
from tests.peers.provider_server import Reply
from tests.telegram_harness import reply, text_stream

PDF = pdf_with_pages("Quarterly report")
VOICE = b"OggS\x00\x02 a discord voice message"
TRANSCRIPTIONS = "/v1/audio/transcriptions"
SPEECH = "speech:\n  provider: main\n  reply: voice_notes_only\n"
SPOKEN = b"OggS\x00\x02 the spoken answer"


def _last_user(request_json: dict[str, Any]) -> Any:
    return [m for m in request_json["messages"] if m["role"] == "user"][-1]["content"]


async def _post(bot: DiscordBot, text: str, *files: UploadedFile) -> None:
    before = bot.channel.replies_finished
    bot.peer.inject_message(bot.peer.dm_channel_id, text, files=list(files))
    with anyio.fail_after(20):
        await bot.channel.wait_replies(before + 1)


async def test_a_pdf_a_py_file_and_an_unsupported_type(tmp_path: Path) -> None:
    replies = [reply(text_stream(["A report."])), reply(text_stream(["Prints."]))]
    async with running_bot(tmp_path, replies, mode="off") as bot:
        await _post(bot, "what is it?", UploadedFile(PDF, "r.pdf", "application/pdf"))
        await _post(bot, "", UploadedFile(b"print(1)\n", "x.py", "text/x-python"))
        await _post(bot, "", UploadedFile(b"PK\x03\x04", "a.zip", "application/zip"))
    texts = bot.peer.texts(bot.peer.dm_channel_id)
    assert texts[:2] == ["A report.", "Prints."]
    assert texts[2].startswith("This file type (application/zip) is not supported; send a PDF")
    first, second = (_last_user(r.json) for r in bot.provider.requests)
    url = f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"
    assert first[0] == {"type": "text", "text": "what is it?"}
    assert first[2] == {"type": "file", "file": {"filename": "r.pdf", "file_data": url}}
    assert second[0]["text"].startswith('<document name="x.py" type="text/x-python">')
    assert bot.peer.downloads == ["r.pdf", "x.py", "a.zip"]


async def test_a_voice_message_is_transcribed_answered_and_spoken(tmp_path: Path) -> None:
    async with running_bot(
        tmp_path, [reply(text_stream(["Noon."]))], mode="off", top_level=SPEECH
    ) as bot:
        bot.provider.script(TRANSCRIPTIONS, [Reply.json({"text": "what time is it"})])
        bot.provider.script("/v1/audio/speech", [Reply(body=SPOKEN, content_type="audio/ogg")])
        voice = UploadedFile(VOICE, "voice-message.ogg", "audio/ogg", duration_secs=2.5)
        await _post(bot, "", voice)
    (heard,) = bot.provider.requests_to(TRANSCRIPTIONS)
    assert heard.form()["file"].data == VOICE
    (chat,) = bot.provider.requests_to("/v1/chat/completions")
    assert _last_user(chat.json) == "what time is it"
    dm = bot.peer.dm_channel_id
    assert bot.peer.texts(dm) == ["🎤 “what time is it”", "Noon.", ""]
    *texts, voice = bot.peer.requests_to(SEND, dm)
    # The answer spoken, its bytes unchanged, after the text.
    assert voice.files == {"answer.ogg": SPOKEN} and all(t.files == {} for t in texts)
    assert texts[-1].answered_at is not None and texts[-1].answered_at <= voice.at
