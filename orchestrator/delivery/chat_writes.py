"""One reply's writes to its chat through a channel, and their outcomes (architecture §3): I/O.

Theory of operation
-------------------
:class:`ChatWriter` carries out one write action (``SendMessage``, ``EditMessage``,
``DeleteMessage``) with exactly one call of the channel's primitives and returns its outcome
as an event for the engine: ``WriteSucceeded`` (with the new message's id for a send) or
``WriteFailed``. Channel errors become write outcomes here, once, by one table
(:data:`WRITE_OUTCOMES`, walked along the error's class hierarchy by :func:`write_outcome`, as
httpx's ``map_httpcore_exceptions`` does): ``ChannelRateLimited`` → ``rate_limited`` (with its
``retry_after``), ``MessageNotModified`` → ``not_modified``, ``MessageTooLong`` → ``too_long``,
``MessageGone`` → ``gone``, ``ChannelTimeout`` → ``timeout``, ``ChannelUnavailable`` →
``refused``, ``ChatMoved`` → ``moved`` (the reply's chat id becomes the new one, ``on_moved`` is
awaited with it; at most :data:`MAX_MOVES` times, then ``failed``), ``DestinationGone`` →
``unreachable`` (``on_unreachable`` is called: the turn stops its model work), any other
``ChannelError`` (or an unexpected exception from an adapter, logged with its traceback) →
``failed``. Typing failures are logged and ignored, but for a chat that is gone.

It keeps what the writes of one reply share: the chat (the new one once it moved), the
message the first send answers, the thread, and the references of the messages it sent (ids are
per chat: after a move, the new chat's are qualified by it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import anyio

from channels.base import Channel, MessageRef
from channels.errors import (
    ChannelError,
    ChannelRateLimited,
    ChannelTimeout,
    ChannelUnavailable,
    ChatMoved,
    DestinationGone,
    MessageGone,
    MessageNotModified,
    MessageTooLong,
)
from orchestrator.delivery.events import (
    DeleteMessage,
    DeliveryEvent,
    EditMessage,
    SendMessage,
    WriteFailed,
    WriteFailure,
    WriteSucceeded,
)

__all__ = ["MAX_MOVES", "WRITE_OUTCOMES", "ChatSpacing", "ChatWriter", "write_outcome"]

log = logging.getLogger(__name__)

MAX_MOVES = 3
"""Chat moves one reply follows; a further ``ChatMoved`` is a failed write."""


WRITE_OUTCOMES: Mapping[type[Exception], WriteFailure] = {
    ChannelRateLimited: "rate_limited",
    MessageNotModified: "not_modified",
    ChatMoved: "moved",
    DestinationGone: "unreachable",
    MessageTooLong: "too_long",
    MessageGone: "gone",
    ChannelTimeout: "timeout",
    ChannelUnavailable: "refused",
    ChannelError: "failed",
    Exception: "failed",
}
"""The outcome of a channel write that raised, by error class (architecture §3 "Network
errors"): the boundary's one table, walked by :func:`write_outcome` along the class hierarchy,
as httpx's ``map_httpcore_exceptions`` does."""


def write_outcome(exc: Exception) -> WriteFailure:
    """The :data:`WRITE_OUTCOMES` entry of ``exc``'s nearest class (its MRO, most derived
    first): a subclass of ``MessageGone`` is ``gone``, an adapter's unexpected ``KeyError``
    is ``failed``. A pure function."""
    for cls in type(exc).__mro__:
        reason = WRITE_OUTCOMES.get(cls)
        if reason is not None:
            return reason
    return "failed"  # unreachable: every Exception has Exception in its MRO


async def _stay(chat_id: str) -> None:
    return None


def _ignore() -> None:
    return None


class ChatSpacing:
    """:class:`~channels.base.WriteSpacing` of one chat: ``interval`` seconds after the last
    write that landed, on ``clock``."""

    def __init__(self, clock: Callable[[], float], interval: float) -> None:
        self._clock = clock
        self._interval = interval
        self._landed: float | None = None

    def landed(self) -> None:
        self._landed = self._clock()

    async def next_write(self) -> None:
        if self._landed is not None:
            await anyio.sleep(max(0.0, self._landed + self._interval - self._clock()))


class ChatWriter:
    """Carries out the writes of one reply to one chat (see the module docstring).

    Args:
        channel: executes the writes.
        chat_id: the chat to write to.
        reply_to: the inbound message id the reply's first message answers.
        thread_id: the thread every message of the reply goes to (``None``: none).
        on_moved: awaited with the new chat id when the chat moved.
        on_unreachable: called when the chat or thread is gone.
        on_written: awaited after each send or edit that landed, with the message, its text
            as sent and whether it was formatted.
    """

    def __init__(
        self,
        channel: Channel,
        chat_id: str,
        *,
        reply_to: str | None = None,
        thread_id: str | None = None,
        on_moved: Callable[[str], Awaitable[None]] = _stay,
        on_unreachable: Callable[[], None] = _ignore,
        on_written: Callable[[MessageRef, str, bool], Awaitable[None]] | None = None,
    ) -> None:
        self._channel = channel
        self.chat_id = chat_id
        """The chat the reply is written to (the new id once the chat moved)."""
        self._origin = chat_id
        self._moves = 0
        self._reply_to = reply_to
        self._thread_id = thread_id
        self._on_moved = on_moved
        self._on_unreachable = on_unreachable
        self._on_written = on_written
        self._refs: dict[str, MessageRef] = {}

    async def typing(self) -> bool:
        """Send the typing indicator; False when the chat or thread is gone (best effort
        otherwise: a failure is logged)."""
        name = self._channel.name
        try:
            await self._channel.send_typing(self.chat_id, thread_id=self._thread_id)
        except DestinationGone as exc:  # the thread is gone: so is the rest of the reply
            self._gone("SendTyping", exc)
            return False
        except ChatMoved as exc:  # the next write is refused too, and follows the move
            log.debug("typing in %s:%s: %s", name, self.chat_id, exc)
        except Exception as exc:  # typing is best effort
            log.debug("typing in %s:%s failed: %s", name, self.chat_id, exc)
        return True

    async def write(self, action: SendMessage | EditMessage | DeleteMessage) -> DeliveryEvent:
        """Carry out ``action`` (one platform write); its outcome for the engine."""
        channel, kind = self._channel, type(action).__name__
        try:
            match action:
                case SendMessage(text=text, formatted=formatted):
                    ref = await channel.send_message(
                        self.chat_id,
                        text,
                        formatted=formatted,
                        reply_to=self._reply_to,
                        thread_id=self._thread_id,
                    )
                    self._reply_to = None  # only the first message answers the user's
                    # Ids are per chat: after a move, the new chat's are qualified by it.
                    key = ref.message_id
                    if ref.chat_id != self._origin:
                        key = f"{ref.chat_id}/{ref.message_id}"
                    self._refs[key] = ref
                    if self._on_written is not None:
                        await self._on_written(ref, text, formatted)
                    return WriteSucceeded(key)
                case EditMessage(message_id=message_id, text=text, formatted=formatted):
                    ref = self._ref(message_id)
                    await channel.edit_message(ref, text, formatted=formatted)
                    if self._on_written is not None:
                        await self._on_written(ref, text, formatted)
                case DeleteMessage(message_id=message_id):
                    await channel.delete_message(self._ref(message_id))
            return WriteSucceeded()
        except Exception as exc:
            return await self._failed(kind, exc)

    async def _failed(self, kind: str, exc: Exception) -> WriteFailed:
        """The outcome of a write that raised ``exc`` (:data:`WRITE_OUTCOMES`), with what the
        outcome asks for done: logged, the chat followed, the turn told the chat is gone."""
        reason = write_outcome(exc)
        channel = self._channel.name
        match reason:
            case "rate_limited":
                assert isinstance(exc, ChannelRateLimited)
                log.info(
                    "%s in %s:%s rate limited for %g s",
                    kind,
                    channel,
                    self.chat_id,
                    exc.retry_after,
                )
                return WriteFailed("rate_limited", exc.retry_after)
            case "not_modified":
                return WriteFailed("not_modified")
            case "moved":
                assert isinstance(exc, ChatMoved)
                if self._moves >= MAX_MOVES:
                    self._log_failure(kind, exc)
                    return WriteFailed("failed")
                await self._moved(exc.new_chat_id)
                return WriteFailed("moved")
            case "unreachable":
                assert isinstance(exc, ChannelError)
                self._gone(kind, exc)
                return WriteFailed("unreachable")
            case _ if isinstance(exc, ChannelError):
                self._log_failure(kind, exc)
                return WriteFailed(reason)
            case _:  # an adapter's bug: its traceback goes to the log
                log.exception("%s in %s:%s raised", kind, channel, self.chat_id, exc_info=exc)
                return WriteFailed(reason)

    def _gone(self, kind: str, exc: ChannelError) -> None:
        log.warning(
            "%s in %s:%s failed: %s; the rest of the reply is not delivered",
            kind,
            self._channel.name,
            self.chat_id,
            exc,
        )
        self._on_unreachable()

    async def _moved(self, new_chat_id: str) -> None:
        if new_chat_id == self.chat_id:
            return
        log.info(
            "%s:%s moved to %s (a supergroup); the reply continues there",
            self._channel.name,
            self.chat_id,
            new_chat_id,
        )
        self._moves += 1
        self.chat_id = new_chat_id
        self._reply_to = None  # a message id of the old chat
        await self._on_moved(new_chat_id)

    def _ref(self, message_id: str) -> MessageRef:
        return self._refs.get(message_id) or MessageRef(self.chat_id, message_id)

    def _log_failure(self, kind: str, exc: ChannelError) -> None:
        log.warning(
            "%s in %s:%s failed: %s: %s",
            kind,
            self._channel.name,
            self.chat_id,
            type(exc).__name__,
            exc,
        )
