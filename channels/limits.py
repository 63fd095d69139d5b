"""The :class:`~channels.base.ChannelLimits` of each network, built from the platform constants
in :mod:`config.limits` (where each number's unit and source are written down)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from channels.base import ChannelLimits
from config.limits import (
    DISCORD_MAX_CONTENT_LENGTH,
    MATRIX_MAX_EVENT_BYTES,
    MATRIX_MAX_TEXT_LENGTH,
    TELEGRAM_MAX_TEXT_LENGTH,
    UNLIMITED,
)
from config.limits import LIMITS_BY_KIND as _RAW_LIMITS

__all__ = [
    "CONSOLE_LIMITS",
    "DISCORD_LIMITS",
    "DISCORD_MAX_CONTENT_LENGTH",
    "LIMITS_BY_KIND",
    "MATRIX_LIMITS",
    "MATRIX_MAX_EVENT_BYTES",
    "MATRIX_MAX_TEXT_LENGTH",
    "TELEGRAM_LIMITS",
    "TELEGRAM_MAX_TEXT_LENGTH",
    "UNLIMITED",
]

LIMITS_BY_KIND: Mapping[str, ChannelLimits] = MappingProxyType(
    {kind: ChannelLimits(length, unit) for kind, (length, unit) in _RAW_LIMITS.items()}
)
"""The limits of each channel ``kind`` of the config."""

TELEGRAM_LIMITS = LIMITS_BY_KIND["telegram"]
"""Telegram: 4096 UTF-16 code units."""
DISCORD_LIMITS = LIMITS_BY_KIND["discord"]
"""Discord: 2000 characters."""
MATRIX_LIMITS = LIMITS_BY_KIND["matrix"]
"""Matrix: 4000 characters."""
CONSOLE_LIMITS = LIMITS_BY_KIND["console"]
"""The console: a terminal has no message limit."""
