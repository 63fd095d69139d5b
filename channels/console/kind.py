"""What the registry knows of the console (architecture §3 "Kinds"): the config model of a
``kind: console`` channel, its (absent) message limit, and the adapter's import path. Pydantic
and numbers only (:mod:`channels.kind`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from channels.base import ChannelLimits
from channels.kind import UNLIMITED, ChannelKind
from channels.settings import ChannelSettings

__all__ = ["KIND", "ConsoleChannelConfig"]


class ConsoleChannelConfig(ChannelSettings):
    """The terminal: reads stdin, writes stdout."""

    kind: Literal["console"]
    stream_drafts: bool = Field(
        default=True, description="true: redraw the answer as it streams; false: print it whole"
    )
    draft_update_interval_ms: int = Field(
        default=100, ge=50, description="milliseconds between redraws"
    )
    allowed_users: list[str | int] = Field(
        default_factory=lambda: list[str | int](["*"]),
        description="the local user is always allowed by default",
    )


KIND = ChannelKind(
    config=ConsoleChannelConfig,
    limits=ChannelLimits(UNLIMITED, "chars"),
    adapter="channels.console.adapter:ConsoleChannel",
)
