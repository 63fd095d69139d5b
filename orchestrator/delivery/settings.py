"""What the delivery engine needs to know about one channel (architecture §3 "Defaults",
"Limits")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from channels.base import Channel, ChannelLimits, Rendering, StreamMode

__all__ = ["DeliverySettings"]


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    """One channel's delivery parameters.

    Attributes:
        mode: ``off`` (one message at the end), ``partial`` (an edited draft) or
            ``multi_message`` (each paragraph or turn its own message).
        draft_update_interval_ms: least time from the end of one write (send, edit, delete) to
            the chat to the start of the next, in milliseconds (so also start to start). Typing
            does not count.
        multi_message_delay_ms: in ``multi_message``, the same between two sends.
        limits: the platform's message length limit and the unit it counts in.
        multi_message_unit: what one message holds in ``multi_message``: a ``paragraph``
            (Matrix, Discord) or a completed model ``turn`` (Telegram).
        max_edits_per_message: edits one message may receive (Matrix: 100); ``None``: no cap.
        show_tool_status: in ``multi_message``, also send each tool status as its own message
            (edited to the finished line when the call ends, where ``can_edit``).
        can_edit: the channel can edit a message it sent (every channel today).
        typing_interval_ms: how often the typing indicator is renewed while nothing new shows.
        final_as_new_message: in ``partial``, the final text goes out as new messages instead
            of the drafts' final edits, and the drafts are deleted once every one of them
            landed; a draft stays when a final message could not be sent (Matrix
            ``notice_previews``: the drafts are notices, the new message is the one that
            notifies; architecture §3 "Matrix specifics").
        render: the channel's pure renderer (``Channel.render``): Markdown in, the formatted
            form and its length in ``limits.unit`` out. The engine decides every message
            boundary with it, and an edit whose form equals what is shown is not sent
            (architecture §3). ``None``: formatting shows like the plain text.

    Raises:
        ValueError: a limit under 16 units (too small to split into), or a cap under 1.
    """

    mode: StreamMode = "partial"
    draft_update_interval_ms: int = 1000
    multi_message_delay_ms: int = 800
    limits: ChannelLimits = field(default_factory=lambda: ChannelLimits(4096, "utf16"))
    multi_message_unit: Literal["paragraph", "turn"] = "paragraph"
    max_edits_per_message: int | None = None
    show_tool_status: bool = False
    can_edit: bool = True
    typing_interval_ms: int = 4000
    final_as_new_message: bool = False
    render: Callable[[str], Rendering] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.limits.max_length < 16:
            raise ValueError(f"max_length {self.limits.max_length} is too small to split into")
        if self.max_edits_per_message is not None and self.max_edits_per_message < 1:
            raise ValueError("max_edits_per_message must be at least 1")
        interval = self.draft_update_interval_ms / 1000
        send_delay = interval
        if self.mode == "multi_message":
            send_delay = max(interval, self.multi_message_delay_ms / 1000)
        object.__setattr__(self, "interval", interval)
        object.__setattr__(self, "send_delay", send_delay)
        object.__setattr__(self, "typing_interval", self.typing_interval_ms / 1000)

    interval: float = field(init=False, repr=False, compare=False)
    """``draft_update_interval_ms`` in seconds."""
    send_delay: float = field(init=False, repr=False, compare=False)
    """Least time between two sends, in seconds (``multi_message_delay_ms`` applies in
    ``multi_message`` only)."""
    typing_interval: float = field(init=False, repr=False, compare=False)
    """``typing_interval_ms`` in seconds."""
    # (Fields, not properties: the engine reads them on every poll.)

    def rendering(self, text: str) -> Rendering:
        """``text`` formatted: its form and length (see ``render``)."""
        if self.render is None:
            return Rendering(text, self.limits.measure(text))
        return self.render(text)

    @classmethod
    def from_channel(cls, channel: Channel) -> DeliverySettings:
        """Build the settings from a channel's config-derived capabilities."""
        return cls(
            mode=channel.stream_mode,
            draft_update_interval_ms=channel.draft_update_interval_ms,
            multi_message_delay_ms=channel.multi_message_delay_ms,
            limits=channel.limits,
            multi_message_unit=channel.multi_message_unit,
            max_edits_per_message=channel.max_edits_per_message,
            show_tool_status=channel.show_tool_status,
            can_edit=channel.can_edit,
            final_as_new_message=channel.final_as_new_message,
            render=channel.render if channel.shows_formatting else None,
        )
