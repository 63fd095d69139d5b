"""What happens to the images of an inbound message before its turn (architecture §3 "attachments").

Pure: :func:`screen_images` takes the message, the byte bound and whether the serving model reads
images, and returns the message to answer (or ``None``) and the one line to tell the user (or
``None``). A message is refused whole — no model call — when one of its images is too large, of
a type no provider takes, or could not be fetched: answering its caption without the image would
answer a question about a picture nobody saw. Without vision, the text alone is answered (and
nothing when there is none), after one line saying images are not supported.

:func:`image_parts` turns the attachments into the providers' :class:`ImagePart`.
"""

from __future__ import annotations

from dataclasses import replace

from channels.base import IMAGE_TYPES, Attachment, InboundMessage
from providers.base import ImagePart

__all__ = [
    "NO_VISION",
    "NO_VISION_TEXT_ONLY",
    "image_parts",
    "screen_images",
]

NO_VISION = "Images are not supported by this model."
NO_VISION_TEXT_ONLY = "Images are not supported by this model; I read only your text."


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _too_large(attachment: Attachment, max_bytes: int) -> int | None:
    """The image's size in bytes when it is over ``max_bytes``."""
    size = max(attachment.size or 0, len(attachment.data))
    return size if size > max_bytes else None


def screen_images(
    message: InboundMessage, *, max_bytes: int, vision: bool
) -> tuple[InboundMessage | None, str | None]:
    """(the message to answer or ``None``, the notice for the user or ``None``).

    ``max_bytes``: ``agent.max_image_bytes``; ``vision``: the first provider of the chain reads
    images (a later one without vision leaves them out of its request by itself).
    """
    images = [a for a in message.attachments if a.kind == "image"]
    if not images:
        return message, None
    for attachment in images:
        size = _too_large(attachment, max_bytes)
        if size is not None:
            limit = _megabytes(max_bytes)
            return None, f"This image is too large ({_megabytes(size)}; the limit is {limit})."
        if attachment.mime_type not in IMAGE_TYPES:
            return None, (
                f"This image type ({attachment.mime_type}) is not supported; "
                "send JPEG, PNG, GIF or WebP."
            )
        if not attachment.fetched:
            return None, "This image could not be downloaded; please send it again."
    if not vision:
        others = tuple(a for a in message.attachments if a.kind != "image")
        if not message.text.strip() and not others:
            return None, NO_VISION
        return replace(message, attachments=others), NO_VISION_TEXT_ONLY
    return message, None


def image_parts(message: InboundMessage) -> tuple[ImagePart, ...]:
    """The message's images as provider image parts."""
    return tuple(ImagePart(a.mime_type, a.data) for a in message.attachments if a.kind == "image")
