"""The config keys every channel kind shares (architecture §3, §6): the base models a kind's own
config model (``channels/<kind>/kind.py``) extends. Pydantic only: the config loader imports this
through :mod:`channels.registry`, before any adapter or network library is loaded. Unknown keys
are errors; error messages never quote the input value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from config.fields import StreamMode, Strict

__all__ = ["ChannelSettings", "StreamModeSettings"]


class ChannelSettings(Strict):
    """The keys every channel kind has; a kind's model subclasses this (or
    :class:`StreamModeSettings`) and adds ``kind: Literal["<kind>"]``."""

    if TYPE_CHECKING:  # each kind's model declares it, as the union's discriminator
        kind: str

    draft_update_interval_ms: int = Field(
        default=1000, ge=50, description="milliseconds between consecutive writes to one chat"
    )
    allowed_users: list[str | int] = Field(
        default_factory=list,
        description='user ids or names allowed to talk to the bot; "*" = everyone; empty = nobody',
    )
    respond_in_groups: Literal["mention", "all"] = Field(
        default="mention", description="in group chats, answer only when mentioned or replied to"
    )
    show_reasoning: bool = Field(
        default=False, description="reserved: show the model's reasoning (no channel shows it yet)"
    )
    show_tool_status: bool = Field(
        default=False,
        description="multi_message: also send each tool status as a message, edited to ✓ or ✗",
    )
    admins: list[str | int] = Field(
        default_factory=list,
        description="user ids or names who may change a group's settings and answer any "
        "button; exempt from limits unless limits.admins_exempt is false",
    )

    def listen_problem(self, listen: str | None) -> str | None:
        """What is wrong with ``server.listen`` for this channel, in one line (a channel served
        by the ops server needs it), else None. Default: nothing."""
        return None

    def served_prefix(self) -> str | None:
        """The path prefix the ops server routes to this channel (``"/"``, ``"/v1/"``), or
        None when it is not served over HTTP; two channels may not share one."""
        return None


class StreamModeSettings(ChannelSettings):
    """:class:`ChannelSettings` and the ``stream_mode`` choice of a chat network."""

    stream_mode: StreamMode = Field(
        default="partial",
        description="off: one message at the end; partial: edit a draft in place; "
        "multi_message: one message per paragraph (Telegram: per model turn)",
    )
    multi_message_delay_ms: int = Field(
        default=800, ge=0, description="milliseconds between consecutive sends in multi_message"
    )
