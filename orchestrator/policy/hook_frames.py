"""The frames the hook's worker processes speak (architecture §4 "The hook").

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON (one object). Both
sides use these: :mod:`orchestrator.policy.hook_worker` (the child, blocking reads) and
:mod:`orchestrator.policy.hook_pool` (the parent, on the event loop). This module is apart so
that the parent never imports the worker's ``__main__`` module.
"""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = ["FRAME_HEADER", "MAX_FRAME_BYTES", "decode_frame_length", "encode_frame"]

FRAME_HEADER = struct.Struct(">I")
"""A frame's length prefix: 4 bytes, big-endian, the length in bytes of the JSON that follows."""
MAX_FRAME_BYTES = 64 * 1024 * 1024
"""A longer length prefix is a broken peer, not a piece (a piece is one message's text)."""


def encode_frame(message: dict[str, Any]) -> bytes:
    """``message`` as one frame (length prefix, then UTF-8 JSON)."""
    body = json.dumps(message, ensure_ascii=False).encode()
    return FRAME_HEADER.pack(len(body)) + body


def decode_frame_length(header: bytes) -> int:
    """The body length announced by a 4-byte ``header``.

    Raises:
        ValueError: it exceeds :data:`MAX_FRAME_BYTES`.
    """
    (length,) = FRAME_HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {length} bytes announced (at most {MAX_FRAME_BYTES})")
    return int(length)
