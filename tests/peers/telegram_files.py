"""Files for the local Bot API peer: photos, documents, voice notes, getFile and downloads.

The Bot API describes a user's file by ``file_id`` (https://core.telegram.org/bots/api#photosize,
#document); ``getFile`` answers a ``File`` with a ``file_path``, and the bytes are served at
``/file/bot<token>/<file_path>`` (https://core.telegram.org/bots/api#file). The cloud server
refuses getFile for files over 20 MB with 400 "Bad Request: file is too big".

:class:`FileStore` holds the files a test put in the peer and records each download.
:func:`photo_sizes` builds a photo's ``PhotoSize`` list as Telegram sends it: several
resolutions of one picture, smallest first.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from tests.peers.telegram_wire import ApiError

__all__ = [
    "DOWNLOAD_LIMIT",
    "FILE_TOO_BIG",
    "FileStore",
    "StoredFile",
    "photo_sizes",
]

DOWNLOAD_LIMIT = 20 * 1024 * 1024
"""Bytes: the cloud Bot API's getFile limit."""
FILE_TOO_BIG = ApiError.bad_request("file is too big")


@dataclass
class StoredFile:
    file_id: str
    unique_id: str
    path: str
    data: bytes
    announced_size: int | None


@dataclass
class FileStore:
    """The peer's files by ``file_id``; :attr:`downloads` lists every ``file_path`` fetched,
    :attr:`download_prefixes` the path before ``/file/bot`` of each download."""

    files: dict[str, StoredFile] = field(default_factory=dict)
    downloads: list[str] = field(default_factory=list)
    download_prefixes: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add(self, data: bytes, *, folder: str, suffix: str, size: int | None = None) -> StoredFile:
        """Store ``data``; ``size`` is the size announced (default ``len(data)``)."""
        n = next(self._ids)
        stored = StoredFile(
            f"FILE{n}", f"U{n}", f"{folder}/file_{n}.{suffix}", data, size or len(data)
        )
        self.files[stored.file_id] = stored
        return stored

    def get_file(self, params: dict[str, Any]) -> dict[str, Any] | ApiError:
        """The ``getFile`` answer (an :class:`ApiError` to refuse)."""
        stored = self.files.get(str(params.get("file_id")))
        if stored is None:
            return ApiError.bad_request("invalid file_id")
        size = stored.announced_size or len(stored.data)
        if size > DOWNLOAD_LIMIT:
            return FILE_TOO_BIG
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.unique_id,
            "file_size": size,
            "file_path": stored.path,
        }

    def download(self, path: str, prefix: str = "") -> bytes | None:
        """The bytes at ``path`` (recorded), or None when no file has it."""
        for stored in self.files.values():
            if stored.path == path:
                self.downloads.append(path)
                self.download_prefixes.append(prefix)
                return stored.data
        return None

    def photo(self, images: list[tuple[int, int, bytes]]) -> list[dict[str, Any]]:
        """A photo's ``PhotoSize`` list from ``(width, height, bytes)`` per resolution."""
        return [
            {
                "file_id": stored.file_id,
                "file_unique_id": stored.unique_id,
                "width": width,
                "height": height,
                "file_size": len(data),
            }
            for width, height, data in images
            for stored in [self.add(data, folder="photos", suffix="jpg")]
        ]

    def document(
        self,
        data: bytes,
        *,
        mime_type: str,
        file_name: str,
        size: int | None = None,
        announce: bool = True,
    ) -> dict[str, Any]:
        """A ``Document`` object for ``data``: ``size`` overrides its size (for getFile too),
        and without ``announce`` the object carries no ``file_size`` (it is optional)."""
        suffix = file_name.rpartition(".")[2] or "bin"
        stored = self.add(data, folder="documents", suffix=suffix, size=size)
        document = {
            "file_id": stored.file_id,
            "file_unique_id": stored.unique_id,
            "file_name": file_name,
            "mime_type": mime_type,
        }
        if announce:
            document["file_size"] = stored.announced_size
        return document

    def voice(self, data: bytes, *, duration: int, size: int | None = None) -> dict[str, Any]:
        """A ``Voice`` object (https://core.telegram.org/bots/api#voice: Ogg/Opus) for
        ``data``, ``duration`` seconds long."""
        stored = self.add(data, folder="voice", suffix="oga", size=size)
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.unique_id,
            "duration": duration,
            "mime_type": "audio/ogg",
            "file_size": stored.announced_size,
        }


def photo_sizes(
    label: bytes, sides: tuple[int, ...] = (90, 320, 800, 1280, 2560)
) -> list[tuple[int, int, bytes]]:
    """``(width, height, bytes)`` per resolution of a 4:3 picture; each size's bytes are
    ``label`` + its width, so a test can tell which one was downloaded."""
    return [(side, side * 3 // 4, label + b"@" + str(side).encode()) for side in sides]
