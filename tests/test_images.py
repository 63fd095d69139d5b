"""The pure pieces of image handling: what the user is told (``orchestrator.turn.images``), which
photo size is fetched and where files come from (``channels.telegram.inbound``), and how a
waiting message keeps its images (``orchestrator.store``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from telegram import PhotoSize

from channels.base import Attachment, InboundMessage
from channels.telegram.inbound import file_base_url, pick_photo
from orchestrator.store import decode_inbound, encode_inbound
from orchestrator.turn.images import NO_VISION, NO_VISION_TEXT_ONLY, image_parts, screen_images
from providers.base import ImagePart

MB = 1024 * 1024
PNG = Attachment("image/png", b"\x89PNG....", 8)


def _message(text: str, *attachments: Attachment) -> InboundMessage:
    return InboundMessage("tg", "1", "2", "@a", text, attachments=attachments, update_ids=(5, 6))


def test_a_message_with_fitting_images_is_answered_as_it_is() -> None:
    message = _message("look", PNG, PNG)
    assert screen_images(message, max_bytes=10 * MB, vision=True) == (message, None)
    assert image_parts(message) == (ImagePart("image/png", PNG.data),) * 2
    plain = _message("no images")
    assert screen_images(plain, max_bytes=1, vision=False) == (plain, None)


@pytest.mark.parametrize(
    ("attachment", "notice"),
    [
        (
            Attachment("image/png", b"", 20 * MB),
            "This image is too large (20.0 MB; the limit is 10.0 MB).",
        ),
        (
            Attachment("image/png", b"x" * (10 * MB + 1)),
            "This image is too large (10.0 MB; the limit is 10.0 MB).",
        ),
        (
            Attachment("image/heic", b"", 10),
            "This image type (image/heic) is not supported; send JPEG, PNG, GIF or WebP.",
        ),
        (
            Attachment("image/png", b"", 10),
            "This image could not be downloaded; please send it again.",
        ),
    ],
)
def test_a_message_with_a_refused_image_is_not_answered(
    attachment: Attachment, notice: str
) -> None:
    message = _message("what is it?", PNG, attachment)
    assert screen_images(message, max_bytes=10 * MB, vision=True) == (None, notice)


def test_without_vision_only_the_text_is_answered() -> None:
    answered, notice = screen_images(_message("describe", PNG), max_bytes=MB, vision=False)
    assert notice == NO_VISION_TEXT_ONLY
    assert answered == replace(_message("describe"), attachments=())
    assert screen_images(_message("  ", PNG), max_bytes=MB, vision=False) == (None, NO_VISION)


def _size(side: int, ratio: float = 0.75) -> PhotoSize:
    return PhotoSize(f"f{side}", f"u{side}", side, int(side * ratio))


def test_the_largest_photo_size_within_2048_px_is_taken() -> None:
    sizes = [_size(90), _size(320), _size(800), _size(1280), _size(2560)]
    assert pick_photo(sizes).width == 1280
    assert pick_photo([_size(2048, 1.0), _size(2049, 0.5)]).width == 2048
    assert pick_photo([_size(4000), _size(3000)]).width == 3000  # none fits: the smallest
    with pytest.raises(ValueError):
        pick_photo([])


def test_file_downloads_follow_base_url_unless_given() -> None:
    assert (
        file_base_url("https://api.telegram.org/bot", None) == "https://api.telegram.org/file/bot"
    )
    assert file_base_url("http://10.0.0.2:8081/bot/", None) == "http://10.0.0.2:8081/file/bot"
    assert file_base_url("http://proxy/tg", None) == "http://proxy/tg/file/bot"
    assert file_base_url("http://a/bot", "http://b/file/bot") == "http://b/file/bot"


def test_a_waiting_message_keeps_its_images_as_base64() -> None:
    message = _message("caption", PNG, Attachment("image/jpeg", bytes(range(256)), None))
    text = encode_inbound(message)
    assert '"data": "iVBORy4uLi4="' in text  # base64 text, not bytes
    assert decode_inbound(text) == message
    # A row written before attachments and update ids existed still reads.
    old = '{"channel": "tg", "chat_id": "1", "sender_id": "2", "sender_name": "@a", "text": "hi"}'
    assert decode_inbound(old) == InboundMessage("tg", "1", "2", "@a", "hi")
