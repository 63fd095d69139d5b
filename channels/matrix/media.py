"""Reading the files of Matrix media events (pure): ``m.file``, ``m.audio`` and ``m.image``.

A media event's content (https://spec.matrix.org/latest/client-server-api/#mfile) names its
file by ``url`` (an ``mxc://`` URI) or, in an encrypted room, by ``file`` (an
``EncryptedFile``: ``url``, ``key.k``, ``iv``, ``hashes.sha256``), describes it in ``info``
(``mimetype``, ``size`` in bytes, ``duration`` in milliseconds for audio) and gives its name
in ``filename``; ``body`` is then a caption when it differs from the name (spec v1.10 "Media
captions"), else the name itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels.base import Attachment, AttachmentKind

__all__ = ["MediaFile", "media_caption", "media_file"]


@dataclass(frozen=True, slots=True)
class MediaFile:
    """Where a media event's bytes are: the ``mxc://`` URL, and for an encrypted file its key
    (unpadded base64url), ``iv`` and SHA-256 (unpadded base64) of the ciphertext."""

    url: str
    key: str | None = None
    iv: str | None = None
    sha256: str | None = None

    def attachment(self, content: dict[str, Any]) -> Attachment:
        """The event's file as an attachment without its bytes yet."""
        info = content.get("info") if isinstance(content.get("info"), dict) else {}
        assert isinstance(info, dict)
        msgtype = content.get("msgtype")
        mime = str(info.get("mimetype") or "application/octet-stream")
        kind: AttachmentKind = "document"
        if msgtype == "m.image":
            kind = "image"
        elif msgtype == "m.audio" or mime.startswith("audio/"):
            kind = "audio"
        size = info.get("size") if isinstance(info.get("size"), int) else None
        duration = info.get("duration")
        seconds = duration / 1000 if isinstance(duration, int | float) else None
        name = content.get("filename") or content.get("body") or "file"
        return Attachment(mime, b"", size, kind, str(name), seconds)


def media_file(content: dict[str, Any]) -> MediaFile | None:
    """Where the event's file is; None when it names none."""
    url = content.get("url")
    if isinstance(url, str) and url.startswith("mxc://"):
        return MediaFile(url)
    file = content.get("file")
    if not isinstance(file, dict) or not str(file.get("url", "")).startswith("mxc://"):
        return None
    key = file.get("key") if isinstance(file.get("key"), dict) else {}
    hashes = file.get("hashes") if isinstance(file.get("hashes"), dict) else {}
    assert isinstance(key, dict) and isinstance(hashes, dict)
    return MediaFile(str(file["url"]), key.get("k"), file.get("iv"), hashes.get("sha256"))


def media_caption(content: dict[str, Any]) -> str:
    """The caption of a media event: its ``body`` when a ``filename`` differs from it, else
    none."""
    body, name = content.get("body"), content.get("filename")
    if isinstance(body, str) and isinstance(name, str) and body != name:
        return body
    return ""
