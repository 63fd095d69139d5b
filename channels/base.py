"""The channel seam (architecture §3): what every chat network adapter provides.

A channel adapter executes primitive writes (send, edit, delete, typing) and turns the network's
updates into :class:`InboundMessage`. It never decides *what* to write: the delivery engine does.
Public methods are ``@final`` and map nothing themselves; subclasses implement the ``_``-prefixed
primitive and raise :mod:`channels.errors` types (translating library exceptions once, there).
The answer buttons, the command menu and the spacing of an adapter's own writes are
:mod:`channels.controls`' (re-exported here).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol, Self, final

from channels.controls import COMMAND_MENU, UNSPACED, AnswerControls, WriteSpacing

__all__ = [
    "COMMAND_MENU",
    "IMAGE_TYPES",
    "UNSPACED",
    "Attachment",
    "AttachmentKind",
    "Channel",
    "ChannelHealth",
    "ChannelLimits",
    "ChannelState",
    "InboundHandler",
    "InboundMessage",
    "MessageRef",
    "Quoted",
    "Rendering",
    "StreamMode",
    "WriteObserver",
    "WriteSpacing",
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


IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image MIME types every built-in provider accepts (Chat Completions, Responses, Anthropic
and Ollama all take JPEG, PNG, GIF and WebP)."""


AttachmentKind = Literal["image", "document", "audio"]
"""What an attachment is to the orchestrator: an image (for vision), a document (PDF or text,
:mod:`orchestrator.turn.documents`) or audio (a voice note, transcribed)."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a user sent: ``data`` (the file's bytes), its ``mime_type`` and ``kind``.

    ``size`` is the file's size in bytes as the network announced it (``None`` when unknown).
    ``data`` is empty when the channel did not fetch the file: it was larger than the
    channel's bound for its kind (``max_image_bytes``, ``max_document_bytes``,
    ``max_audio_bytes``) or its type is not one the orchestrator takes; the orchestrator then
    refuses the message with a one-line notice (architecture §3 "attachments").
    ``file_name`` is the name the user's file had (documents), ``duration`` the length the
    network announced, in seconds (audio), each ``None`` when unknown.
    """

    mime_type: str
    data: bytes = b""
    size: int | None = None
    kind: AttachmentKind = "image"
    file_name: str | None = None
    duration: float | None = None

    @property
    def fetched(self) -> bool:
        return bool(self.data)


@dataclass(frozen=True, slots=True)
class Quoted:
    """The message a user's message replies to: its ``text``, whether the bot wrote it
    (``from_bot``) and who did (``sender_name``); sent to the model with the question, marked
    as quoted and cut to a size cap (:mod:`orchestrator.turn.inputs`)."""

    text: str
    from_bot: bool
    sender_name: str = ""


@dataclass(frozen=True, slots=True)
class ChannelHealth:
    """A channel's state for ``/healthz``: ``ok``, or ``degraded`` with a one-line ``reason``
    (e.g. getUpdates answering 409 Conflict while another instance polls the bot)."""

    state: Literal["ok", "degraded"] = "ok"
    reason: str | None = None


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
    ``attachments`` are the images sent with it (an album's images together; ``text`` is the
    caption). ``update_ids`` are the network's ids of the updates that carried it (Telegram
    ``update_id``; several for an album): the orchestrator answers each update once, even when
    the network delivers it again. ``quoted`` is the message it replies to, when it does.
    ``edited`` marks a new text of the earlier message ``message_id`` (a Telegram
    ``edited_message``, a Discord message edit, a Matrix ``m.replace``): answered again only
    under ``agent.rerun_edited`` (architecture §5 "Chat controls"), else ignored.
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
    attachments: tuple[Attachment, ...] = ()
    update_ids: tuple[int, ...] = ()
    sender_handle: str | None = None
    context: tuple[tuple[str, str], ...] | None = None  # (role, text) of a stateless API
    model: str | None = None  # an alias of agent.models the request names (a stateless API)
    quoted: Quoted | None = None
    edited: bool = False


@dataclass(frozen=True, slots=True)
class ChannelLimits:
    """A platform's message length limit, in ``unit`` (UTF-16 code units or code points)."""

    max_length: int
    unit: Literal["utf16", "chars"] = "chars"

    def measure(self, text: str) -> int:
        return utf16_len(text) if self.unit == "utf16" else len(text)


@dataclass(frozen=True, slots=True)
class Rendering:
    """A Markdown text as the platform shows it when it is sent formatted (architecture §3
    "Formatting and splitting").

    Attributes:
        form: the canonical formatted form: two texts whose forms are equal show alike (an edit
            from one to the other is not sent). Telegram: the HTML of text + entities, or the
            visible text when there is no formatting.
        length: what the platform's length limit counts of it, in the channel's
            ``limits.unit`` (Telegram: UTF-16 code units of the visible text).
    """

    form: str
    length: int


InboundHandler = Callable[[InboundMessage], Awaitable[None]]

WriteObserver = Callable[[str, str, "BaseException | None"], None]
"""Told of every primitive write a channel attempted: (channel name, kind — ``send``, ``edit``,
``delete``, ``typing`` —, the exception it raised or ``None``). The daemon's metrics use it."""


class ChannelState(Protocol):
    """Small values an adapter keeps across restarts (the daemon backs them with its store):
    e.g. the Matrix sync token."""

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str) -> None: ...


class Channel(AnswerControls, ABC):
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

    max_image_bytes: int = 10 * 1024 * 1024
    """Images above this many bytes are not fetched (the daemon sets ``agent.max_image_bytes``)."""
    max_document_bytes: int = 10 * 1024 * 1024
    """Documents above this many bytes are not fetched (``agent.max_document_bytes``)."""
    max_audio_bytes: int = 20 * 1024 * 1024
    """Audio above this many bytes is not fetched (``agent.max_audio_bytes``)."""

    write_observer: WriteObserver | None = None
    """Set by the daemon: told of every write (metrics); ``None``: nobody listens."""
    approval_timeout_secs: float = 120.0
    """How long :meth:`request_approval` waits for the user's answer, in seconds (the daemon sets
    ``agent.approval_timeout_secs``)."""

    def __init__(self, name: str, config: Any, on_inbound: InboundHandler) -> None:
        self.name = name
        self.config = config
        self._on_inbound = on_inbound
        self.state: ChannelState | None = None
        """Set by the daemon before :meth:`start`; ``None``: nothing survives a restart."""

    def _observe(self, kind: str, error: BaseException | None) -> None:
        if self.write_observer is not None:
            self.write_observer(self.name, kind, error)

    def health(self) -> ChannelHealth:
        """The channel's state for ``/healthz`` (default: ``ok``). Never blocks."""
        return ChannelHealth()

    # -- capabilities derived from the config (architecture §3 "Contract") -------------------------

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

    @property
    def command_prefix(self) -> str:
        """What starts a command besides ``/`` (``command_prefix`` of the config: Matrix
        ``!``, since its clients take ``/`` for their own commands); default ``/``."""
        return str(getattr(self.config, "command_prefix", "/"))

    @property
    def can_edit(self) -> bool:
        """The network lets us edit a message we sent (every channel here can; a status message
        of ``multi_message`` is edited to its finished line only where this holds)."""
        return True

    @property
    def shows_formatting(self) -> bool:
        """Whether a formatted write shows differently from the plain text: delivery lays the
        final text out with :meth:`render` only then (default: yes; the console with stdout
        not a terminal prints every text as it is)."""
        return True

    @property
    def final_as_new_message(self) -> bool:
        """In ``partial``: the final text is sent anew and the drafts deleted, instead of the
        drafts' final edits (default: no; Matrix ``notice_previews``)."""
        return False

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

    async def interrupt(self) -> bool:
        """SIGINT (Ctrl-C at the terminal the process runs in), offered to every channel before
        it stops the daemon: True when this channel took it as its own (the console: ``/stop``
        of the running answer, architecture §3 "Stop"), and the daemon goes on. Default: False.
        """
        return False

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
        try:
            ref = await self._send_message(
                chat_id, text, formatted=formatted, reply_to=reply_to, thread_id=thread_id
            )
        except Exception as exc:
            self._observe("send", exc)
            raise
        self._observe("send", None)
        return ref

    @final
    async def edit_message(self, ref: MessageRef, text: str, *, formatted: bool = False) -> None:
        """Replace a message's text. Raises ``MessageNotModified`` when it already shows it."""
        try:
            await self._edit_message(ref, text, formatted=formatted)
        except Exception as exc:
            self._observe("edit", exc)
            raise
        self._observe("edit", None)

    @final
    async def delete_message(self, ref: MessageRef) -> None:
        try:
            await self._delete_message(ref)
        except Exception as exc:
            self._observe("delete", exc)
            raise
        self._observe("delete", None)

    @final
    async def send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        try:
            await self._send_typing(chat_id, thread_id=thread_id)
        except Exception as exc:
            self._observe("typing", exc)
            raise
        self._observe("typing", None)

    @property
    def can_send_voice(self) -> bool:
        """The network shows voice notes (:meth:`send_voice`); default: no."""
        return False

    @final
    async def send_voice(
        self,
        chat_id: str,
        audio: bytes,
        mime_type: str,
        *,
        reply_to: str | None = None,
        thread_id: str | None = None,
    ) -> MessageRef:
        """Send ``audio`` (its bytes unchanged, of ``mime_type``) as a voice note, in thread
        ``thread_id`` when given. Only where :attr:`can_send_voice`."""
        try:
            ref = await self._send_voice(
                chat_id, audio, mime_type, reply_to=reply_to, thread_id=thread_id
            )
        except Exception as exc:
            self._observe("send", exc)
            raise
        self._observe("send", None)
        return ref

    async def _send_voice(
        self,
        chat_id: str,
        audio: bytes,
        mime_type: str,
        *,
        reply_to: str | None,
        thread_id: str | None,
    ) -> MessageRef:
        """Default: the network has no voice notes."""
        raise NotImplementedError("this channel sends no voice notes")

    @final
    async def request_approval(
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        """Ask the user (in thread ``thread_id`` when given); True/False for their answer, None
        on timeout. A write the adapter makes after the prompt (its outcome edit) keeps
        ``spacing``."""
        return await self._request_approval(chat_id, prompt, thread_id=thread_id, spacing=spacing)

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
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        """Default: the network cannot ask; the tool is not approved."""
        return None

    def render(self, text: str) -> Rendering:
        """The model's Markdown ``text`` as this platform shows it formatted, and its length in
        ``limits.unit``. Pure and deterministic: the delivery engine decides every message
        boundary with it, so a formatted write of a text it measured fits in one message.
        Default: formatting shows like the plain text."""
        return Rendering(text, self.limits.measure(text))

    def visible_text(self, text: str) -> str:
        """What a reader sees of the model's Markdown ``text`` sent formatted: the outbound
        policy checks it besides the raw text (architecture §4 "What the reader sees is what is
        checked"). Pure. Default: ``text`` as a CommonMark client renders it (Matrix, Discord).
        """
        # local: the config loader imports this module (through the registry's kinds) and
        # needs no Markdown parser
        from channels.visible_text import markdown_visible_text

        return markdown_visible_text(text)

    @final
    def render_formatted(self, text: str) -> str:
        """``render(text).form``: the final form of ``text`` (equality checks and logs)."""
        return self.render(text).form
