"""Images through the Telegram wire server (architecture §3 "attachments"; issue: photos got no
reply): the real daemon, the Bot API peer (photos, image documents, albums, getFile and
``/file/bot<token>/<path>`` downloads) and a local Chat Completions server.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import anyio

from channels.base import Attachment, InboundMessage
from orchestrator.store import Store
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.telegram import TelegramBotApiServer
from tests.peers.telegram_files import photo_sizes
from tests.telegram_chats import PATH, config_text, daemon_running, observed
from tests.telegram_harness import CHAT, reply, text_stream

GROUP = -500
PNG = b"\x89PNG\r\n\x1a\n a small png"


def _answer(text: str = "A cat.") -> Reply:
    return reply(text_stream([text]))


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _user_content(request_json: dict[str, Any]) -> Any:
    """The content of the request's last user message (the one being answered)."""
    return [m for m in request_json["messages"] if m["role"] == "user"][-1]["content"]


async def _replies(daemon: Any, count: int, within: float = 15.0) -> None:
    with anyio.fail_after(within):
        await observed(daemon).wait_replies(count)


async def test_a_private_photo_with_a_caption_is_answered_with_the_image(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer()])
        async with daemon_running(config_text(peer, provider, tmp_path), tmp_path) as daemon:
            peer.inject_photo(CHAT, photo_sizes(b"cat"), caption="What is this?")
            await _replies(daemon, 1)
        assert peer.texts(CHAT) == ["A cat."]
        # The largest size within 2048 px (of 90…2560) was fetched, and only it.
        assert peer.files.downloads == ["photos/file_4.jpg"]
        assert [c.params["file_id"] for c in peer.calls_to("getFile")] == ["FILE4"]
        (request,) = provider.requests
        assert _user_content(request.json) == [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": _data_url("image/jpeg", b"cat@1280")}},
        ]
        # History keeps a note of the image, not its bytes.
        history = Store(tmp_path / "relaybot.db").history("tg", str(CHAT))
        assert [m.content for m in history] == ["[1 image]\nWhat is this?", "A cat."]


async def test_group_photos_need_a_mention_in_the_caption(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer("A dog.")])
        async with daemon_running(config_text(peer, provider, tmp_path), tmp_path) as daemon:
            peer.inject_photo(GROUP, caption="look at this")  # not for the bot
            peer.inject_photo(GROUP, caption="@relay_test_bot what breed?")
            await _replies(daemon, 2)
        assert peer.texts(GROUP) == ["A dog."]
        (request,) = provider.requests
        assert _user_content(request.json)[0] == {
            "type": "text",
            "text": "@relay_test_bot what breed?",
        }
        # The photo not for the bot was never downloaded.
        assert peer.files.downloads == ["photos/file_9.jpg"]


async def test_a_photo_without_caption_and_an_image_document(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer("A photo."), _answer("A drawing.")])
        async with daemon_running(config_text(peer, provider, tmp_path), tmp_path) as daemon:
            peer.inject_photo(CHAT, photo_sizes(b"p", (320,)))
            await _replies(daemon, 1)
            peer.inject_document(CHAT, PNG, mime_type="image/png", file_name="d.png")
            await _replies(daemon, 2)
            peer.inject_document(CHAT, b"%PDF", mime_type="application/pdf", file_name="x.pdf")
            peer.inject_message(CHAT, "/help")  # the PDF is not taken; this comes next
            await _replies(daemon, 3)
        assert peer.texts(CHAT)[:2] == ["A photo.", "A drawing."]
        first, second = (_user_content(r.json) for r in provider.requests)
        assert first == [
            {"type": "image_url", "image_url": {"url": _data_url("image/jpeg", b"p@320")}}
        ]
        assert second == [{"type": "image_url", "image_url": {"url": _data_url("image/png", PNG)}}]
        assert len(provider.requests) == 2


async def test_an_album_is_one_turn_with_all_images(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer("Three cats.")])
        text = config_text(peer, provider, tmp_path, channel="media_group_wait_ms: 300")
        async with daemon_running(text, tmp_path) as daemon:
            peer.inject_album(CHAT, [b"one", b"two"], caption="Compare them")
            await anyio.sleep(0.15)  # the third photo arrives later, within the window
            peer.inject_photo(CHAT, photo_sizes(b"three", (1280,)), media_group_id=_group(peer))
            await _replies(daemon, 1)
            await anyio.sleep(0.5)  # nothing else is answered
        assert peer.texts(CHAT) == ["Three cats."]
        (request,) = provider.requests
        content = _user_content(request.json)
        assert content[0] == {"type": "text", "text": "Compare them"}
        assert [part["image_url"]["url"] for part in content[1:]] == [
            _data_url("image/jpeg", b"one@1280"),
            _data_url("image/jpeg", b"two@1280"),
            _data_url("image/jpeg", b"three@1280"),
        ]
        # It answers the album's first photo.
        (send,) = peer.calls_to("sendMessage", CHAT)
        assert send.params["reply_parameters"]["message_id"] == 1


def _group(peer: TelegramBotApiServer) -> str:
    return str(next(u["message"]["media_group_id"] for u in peer.updates))


async def test_a_20_mb_image_is_refused_with_a_message_and_never_sent(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer()])
        async with daemon_running(config_text(peer, provider, tmp_path), tmp_path) as daemon:
            peer.inject_document(
                CHAT,
                PNG,
                mime_type="image/png",
                file_name="huge.png",
                size=20 * 1024 * 1024,
                caption="what is this?",
            )
            await _replies(daemon, 1)
        assert peer.texts(CHAT) == ["This image is too large (20.0 MB; the limit is 10.0 MB)."]
        assert provider.requests == []
        assert peer.files.downloads == [] and peer.calls_to("getFile") == []


async def test_an_unannounced_file_that_getfile_calls_too_big_is_refused(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer()])
        async with daemon_running(config_text(peer, provider, tmp_path), tmp_path) as daemon:
            peer.inject_document(
                CHAT,
                PNG,
                mime_type="image/png",
                file_name="big.png",
                size=25 * 1024 * 1024,
                announce=False,
            )
            await _replies(daemon, 1)
        assert [c.error for c in peer.calls_to("getFile")] == ["Bad Request: file is too big"]
        assert peer.texts(CHAT) == ["This image is too large (20.0 MB; the limit is 10.0 MB)."]
        assert provider.requests == [] and peer.files.downloads == []


async def test_a_group_album_with_a_mention_is_answered_once(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer("Two birds.")])
        text = config_text(peer, provider, tmp_path, channel="media_group_wait_ms: 200")
        async with daemon_running(text, tmp_path) as daemon:
            peer.inject_album(GROUP, [b"x", b"y"], caption="look")  # not for the bot
            await _replies(daemon, 1)
            peer.inject_album(GROUP, [b"a", b"b"], caption="@relay_test_bot which birds?")
            await _replies(daemon, 2)
        assert peer.texts(GROUP) == ["Two birds."]
        (request,) = provider.requests
        assert len(_user_content(request.json)) == 3  # the caption and both images
        assert len(peer.files.downloads) == 2  # the first album was never downloaded


async def test_max_image_bytes_bounds_what_is_fetched(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer()])
        text = config_text(peer, provider, tmp_path, agent="max_image_bytes: 8")
        async with daemon_running(text, tmp_path) as daemon:
            peer.inject_document(CHAT, PNG, mime_type="image/png", file_name="a.png")
            await _replies(daemon, 1)
        assert peer.texts(CHAT) == ["This image is too large (0.0 MB; the limit is 0.0 MB)."]
        assert provider.requests == [] and peer.files.downloads == []


async def test_without_vision_the_user_is_told_and_the_text_answered(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer("About the text.")])
        text = config_text(peer, provider, tmp_path, provider_extra="vision: false")
        async with daemon_running(text, tmp_path) as daemon:
            peer.inject_photo(CHAT, caption="Describe it")
            await _replies(daemon, 1)
            peer.inject_photo(CHAT)
            await _replies(daemon, 2)
        assert peer.texts(CHAT) == [
            "Images are not supported by this model; I read only your text.",
            "About the text.",
            "Images are not supported by this model.",
        ]
        (request,) = provider.requests
        assert _user_content(request.json) == "Describe it"


async def test_base_file_url_is_derived_from_base_url_or_given(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [_answer()])
        own = f'base_file_url: "{peer.url}/self-hosted/file/bot"'
        text = config_text(peer, provider, tmp_path, channel=own)
        async with daemon_running(text, tmp_path) as daemon:
            peer.inject_photo(CHAT, photo_sizes(b"x", (320,)))
            await _replies(daemon, 1)
        assert peer.files.download_prefixes == ["/self-hosted"]
        assert peer.texts(CHAT) == ["A cat."]


async def test_a_queued_photo_survives_a_restart(tmp_path: Path) -> None:
    earlier = Store(tmp_path / "relaybot.db")
    photo = Attachment("image/png", PNG, len(PNG))
    kept = InboundMessage(
        "tg", str(CHAT), "111", "@alice", "and this one?", attachments=(photo,), update_ids=(7,)
    )
    earlier.add_waiting(kept, received_at=time.time() - 5)
    assert earlier.waiting()[0].message == kept
    earlier.close()
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(CHAT)
        provider.script(PATH, [_answer("Still a cat.")])
        async with daemon_running(config_text(peer, provider, tmp_path), tmp_path) as daemon:
            await _replies(daemon, 1)
        assert peer.texts(CHAT) == ["Still a cat."]
        (request,) = provider.requests
        assert _user_content(request.json)[1] == {
            "type": "image_url",
            "image_url": {"url": _data_url("image/png", PNG)},
        }
