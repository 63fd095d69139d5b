"""The channel seam (DESIGN §3): what every chat network adapter provides.

A channel adapter executes primitive writes (send, edit, delete, typing) and turns the network's
updates into :class:`InboundMessage`. It never decides *what* to write: the delivery engine does.
Public methods are ``@final`` and map nothing themselves; subclasses implement the ``_``-prefixed
primitive and raise :mod:`channels.errors` types (translating library exceptions once, there).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self, final

__all__ = [
    "Channel",
    "ChannelLimits",
    "InboundHandler",
    "InboundMessage",
    "MessageRef",
    "StreamMode",
    "utf16_len",
]

StreamMode = Literal["off", "partial", "multi_message"]


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (Telegram's unit)."""
    return len(text.encode("utf-16-le")) // 2


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A message we sent: enough to edit or delete it."""

    chat_id: str
    message_id: str


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A message a user sent to the bot.

    ``sender_name`` is what the chat shows of the sender: ``"@handle"`` or a display name the
    user chose (never used for access: a display name may itself start with ``@``).
    ``sender_handle`` is the handle the network verifies (without ``@``), or ``None``; with
    ``sender_id`` it is all that ``allowed_users`` matches.
    ``thread_id`` is the thread the message was written in (the Telegram forum topic, the
    Matrix thread root, the Discord thread; ``None`` elsewhere): a conversation is keyed by
    (channel, chat_id, thread_id) and every write of the reply goes to that thread.
    """

    channel: str
    chat_id: str
    sender_id: str
    sender_name: str
    text: str
    message_id: str | None = None
    is_direct: bool = True
    mentions_bot: bool = False
    thread_id: str | None = None
    sender_handle: str | None = None


@dataclass(frozen=True, slots=True)
class ChannelLimits:
    """A platform's message length limit, in ``unit`` (UTF-16 code units or code points)."""

    max_length: int
    unit: Literal["utf16", "chars"] = "chars"

    def measure(self, text: str) -> int:
        return utf16_len(text) if self.unit == "utf16" else len(text)


InboundHandler = Callable[[InboundMessage], Awaitable[None]]


class Channel(ABC):
    """One configured chat network connection.

    Args:
        name: the key of this channel in the config's ``channels`` mapping.
        config: its pydantic config model.
        on_inbound: awaited for each authorised inbound message (the orchestrator queues it).
    """

    limits: ChannelLimits = ChannelLimits(4000)
    multi_message_unit: Literal["paragraph", "turn"] = "paragraph"
    """What one message holds in ``multi_message`` mode: a paragraph (Matrix, Discord) or a
    completed model turn (Telegram)."""

    def __init__(self, name: str, config: Any, on_inbound: InboundHandler) -> None:
        self.name = name
        self.config = config
        self._on_inbound = on_inbound

    # -- capabilities derived from the config (DESIGN §3 "Contract") -------------------------

    @property
    def stream_mode(self) -> StreamMode:
        mode = getattr(self.config, "stream_mode", None)
        if mode is not None:
            return mode  # type: ignore[no-any-return]
        return "partial" if getattr(self.config, "stream_drafts", False) else "off"

    @final
    def supports_draft_updates(self) -> bool:
        return self.stream_mode == "partial"

    @final
    def supports_multi_message_streaming(self) -> bool:
        return self.stream_mode == "multi_message"

    @property
    def draft_update_interval_ms(self) -> int:
        return int(self.config.draft_update_interval_ms)

    @property
    def multi_message_delay_ms(self) -> int:
        return int(getattr(self.config, "multi_message_delay_ms", 800))

    @property
    def max_edits_per_message(self) -> int | None:
        return getattr(self.config, "max_edits_per_message", None)

    @property
    def show_tool_status(self) -> bool:
        return bool(getattr(self.config, "show_tool_status", False))

    # -- lifecycle ------------------------------------------------------------------------

    @abstractmethod
    async def start(self) -> None:
        """Connect and begin receiving. Raises ``ChannelStartError`` with a one-line cause."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop receiving and release the connection. Idempotent."""

    async def serve(self) -> None:
        """Run the channel's own input loop until its input ends by itself (console: end of
        input, after the running answer is delivered). Run by the daemon in its task group after
        :meth:`start`; cancelled at shutdown.

        Network adapters receive from :meth:`start` on and never end by themselves: the default
        waits forever.
        """
        import anyio  # local: the sans-I/O cores import this module for its data types

        await anyio.sleep_forever()

    async def reply_finished(self, chat_id: str) -> None:
        """Called once per inbound message when its reply is fully delivered (or it got none)."""
        return None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- primitives -----------------------------------------------------------------------

    @final
    async def send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool = False,
        reply_to: str | None = None,
        thread_id: str | None = None,
    ) -> MessageRef:
        """Send a new message, in thread ``thread_id`` when given. ``formatted`` renders the
        model's Markdown for the platform."""
        return await self._send_message(
            chat_id, text, formatted=formatted, reply_to=reply_to, thread_id=thread_id
        )

    @final
    async def edit_message(self, ref: MessageRef, text: str, *, formatted: bool = False) -> None:
        """Replace a message's text. Raises ``MessageNotModified`` when it already shows it."""
        await self._edit_message(ref, text, formatted=formatted)

    @final
    async def delete_message(self, ref: MessageRef) -> None:
        await self._delete_message(ref)

    @final
    async def send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        await self._send_typing(chat_id, thread_id=thread_id)

    @final
    async def request_approval(
        self, chat_id: str, prompt: str, *, thread_id: str | None = None
    ) -> bool | None:
        """Ask the user (in thread ``thread_id`` when given); True/False for their answer, None
        on timeout."""
        return await self._request_approval(chat_id, prompt, thread_id=thread_id)

    @abstractmethod
    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef: ...

    @abstractmethod
    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None: ...

    @abstractmethod
    async def _delete_message(self, ref: MessageRef) -> None: ...

    async def _send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        """Default: the network has no typing indicator."""
        return None

    async def _request_approval(
        self, chat_id: str, prompt: str, *, thread_id: str | None = None
    ) -> bool | None:
        """Default: the network cannot ask; the tool is not approved."""
        return None

    def render_formatted(self, text: str) -> str:
        """The final form of ``text`` on this platform (used for equality checks and logs)."""
        return text
