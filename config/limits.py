"""Platform message limits (architecture §3 "Limits"): the one place they are written down.

Each constant names its unit and its source. This module is plain data so that both the channel
adapters (``channels/limits.py`` builds their ``ChannelLimits`` from it) and the documentation's
channel capability table (``config/schema.py``) read the same numbers, while imports keep
pointing one way (architecture §1: channels → config).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

__all__ = [
    "DISCORD_MAX_CONTENT_LENGTH",
    "LIMITS_BY_KIND",
    "MATRIX_MAX_EVENT_BYTES",
    "MATRIX_MAX_TEXT_LENGTH",
    "TELEGRAM_MAX_TEXT_LENGTH",
    "UNLIMITED",
    "LengthUnit",
]

LengthUnit = Literal["utf16", "chars"]
"""What a length counts: UTF-16 code units or code points."""

UNLIMITED = sys.maxsize
"""A ``max_length`` meaning "no limit" (the console)."""

TELEGRAM_MAX_TEXT_LENGTH = 4096
"""Maximum text of one Telegram message, in UTF-16 code units, counted after entity parsing.

Source: Bot API ``sendMessage`` ("1-4096 characters after entities parsing"; Telegram counts
UTF-16 code units, as for entity offsets); python-telegram-bot
``telegram.constants.MessageLimit.MAX_TEXT_LENGTH``.
"""

DISCORD_MAX_CONTENT_LENGTH = 2000
"""Maximum ``content`` of one Discord message sent by a bot, in characters.

Source: Discord API, Create Message ("content: message contents (up to 2000 characters)").
"""

MATRIX_MAX_EVENT_BYTES = 65536
"""Maximum size of one Matrix event, in bytes of canonical JSON in the federation format.

Source: Matrix spec, Client-Server API, "Size limits"; Synapse rejects a larger event with
``M_TOO_LARGE``.
"""

MATRIX_MAX_TEXT_LENGTH = 4000
"""Our limit for the text of one Matrix message, in characters (code points). Matrix itself
limits only the event size (:data:`MATRIX_MAX_EVENT_BYTES`).

Derivation: an edit event carries the text four times (``body`` and ``formatted_body``, in the
event and again in ``m.new_content``) and a code point takes up to 4 bytes of UTF-8, so
65536 / 16 = 4096 code points fit; 4000 leaves 1536 bytes for the event envelope, and HTML
markup fits in the slack of real text (most code points take 1–3 bytes).
"""

LIMITS_BY_KIND: Mapping[str, tuple[int, LengthUnit]] = MappingProxyType(
    {
        "telegram": (TELEGRAM_MAX_TEXT_LENGTH, "utf16"),
        "discord": (DISCORD_MAX_CONTENT_LENGTH, "chars"),
        "matrix": (MATRIX_MAX_TEXT_LENGTH, "chars"),
        "console": (UNLIMITED, "chars"),
    }
)
"""``(max_length, unit)`` of each channel ``kind`` of the config."""
