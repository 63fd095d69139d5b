"""One turn at a time per conversation; later messages queue (architecture §5).

Theory of operation
-------------------
Each conversation, keyed by (channel, chat, thread), has a FIFO of waiting messages and at most
one worker task, owned by the daemon's task group. ``submit`` appends and starts the worker when
none runs; the worker drains the FIFO one turn at a time and exits when it is empty. ``close``
stops taking messages; :meth:`wait_idle` returns when no turn runs. A dispatcher made ``held``
queues but starts no turn until :meth:`release` (the daemon queues the messages a previous run
left waiting before its channels start, so they stay ahead of new ones).

When a chat moves (a Telegram group became a supergroup), :meth:`Dispatcher.move` gives its
conversations — the running worker and the messages waiting in it — the new chat id: a message
from the new chat then queues behind them, in the same conversation.

A message may carry a ``ticket``: the id of its row in the store's waiting messages. The row is
forgotten (``forget``) when the message's turn starts, so a shutdown leaves exactly the messages
that never started in the store, to be answered after a restart.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import anyio
from anyio.abc import TaskGroup

from channels.base import Channel, InboundMessage

__all__ = ["Dispatcher"]

log = logging.getLogger(__name__)

TurnFunction = Callable[[Channel, InboundMessage], Awaitable[object]]
ForgetFunction = Callable[[int], Awaitable[None]]
MAX_QUEUED_PER_CONVERSATION = 20

_Key = tuple[str, str, str | None]


@dataclass(slots=True)
class _Conversation:
    """A worker's conversation: its key (which changes when the chat moves) and FIFO."""

    key: _Key
    queue: deque[_Queued]


@dataclass(frozen=True, slots=True)
class _Queued:
    channel: Channel
    message: InboundMessage
    ticket: int | None


async def _keep(ticket: int) -> None:
    return None


class Dispatcher:
    """Queues and runs turns, one at a time per conversation.

    Args:
        task_group: owns the workers.
        run_turn: answers one message.
        forget: awaited with a message's ticket when its turn starts (default: nothing).
        held: start no turn until :meth:`release`.
    """

    def __init__(
        self,
        task_group: TaskGroup,
        run_turn: TurnFunction,
        forget: ForgetFunction = _keep,
        *,
        held: bool = False,
    ) -> None:
        self._tg = task_group
        self._run_turn = run_turn
        self._forget = forget
        self._released = anyio.Event()
        if not held:
            self._released.set()
        self._queues: dict[_Key, _Conversation] = {}
        self._closed = False
        self._running = 0
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def queued(self) -> int:
        """Messages waiting behind a running answer, over every conversation."""
        return sum(len(conversation.queue) for conversation in self._queues.values())

    def release(self) -> None:
        """Start the turns queued while held."""
        self._released.set()

    def submit(self, channel: Channel, message: InboundMessage, ticket: int | None = None) -> bool:
        """Queue ``message``; False when closed or when the conversation's queue is full."""
        if self._closed:
            return False
        key = (channel.name, message.chat_id, message.thread_id)
        conversation = self._queues.get(key)
        if conversation is None:
            conversation = self._queues[key] = _Conversation(key, deque())
            self._start_worker(conversation)
        queue = conversation.queue
        if len(queue) >= MAX_QUEUED_PER_CONVERSATION:
            log.warning("conversation %s: queue full, dropping a message", _where(key))
            return False
        queue.append(_Queued(channel, message, ticket))
        return True

    def move(self, channel: str, old_chat_id: str, new_chat_id: str) -> None:
        """Chat ``old_chat_id`` of ``channel`` is ``new_chat_id`` from now on: its
        conversations (every thread) and their waiting messages take the new id. A
        conversation already running under the new id keeps its own worker."""
        for key, conversation in list(self._queues.items()):
            name, chat_id, thread_id = key
            if name != channel or chat_id != old_chat_id:
                continue
            new_key = (name, new_chat_id, thread_id)
            for index, item in enumerate(conversation.queue):
                # Its message id is the old chat's: the reply answers nothing in the new one.
                moved = replace(item.message, chat_id=new_chat_id, message_id=None)
                conversation.queue[index] = replace(item, message=moved)
            if new_key in self._queues:
                log.warning("conversation %s: moved, but one runs there already", _where(key))
                continue
            del self._queues[key]
            conversation.key = new_key
            self._queues[new_key] = conversation

    def _start_worker(self, conversation: _Conversation) -> None:
        self._running += 1
        self._idle = anyio.Event()
        self._tg.start_soon(self._worker, conversation)

    async def _worker(self, conversation: _Conversation) -> None:
        queue = conversation.queue
        try:
            await anyio.lowlevel.checkpoint()
            await self._released.wait()
            while queue:
                item = queue.popleft()
                try:
                    if item.ticket is not None:
                        await self._forget(item.ticket)
                    await self._run_turn(item.channel, item.message)
                except Exception:
                    log.exception("turn failed in %s", _where(conversation.key))
        finally:
            if self._queues.get(conversation.key) is conversation:
                del self._queues[conversation.key]
            self._running -= 1
            if self._running == 0:
                self._idle.set()

    def close(self) -> None:
        """Stop taking messages. Queued ones that have not started are not run; those with a
        ticket stay in the store for the next start."""
        self._closed = True
        for key, conversation in self._queues.items():
            queue = conversation.queue
            kept = sum(1 for item in queue if item.ticket is not None)
            if kept:
                log.info(
                    "conversation %s: %d queued message(s) kept, answered after a restart",
                    _where(key),
                    kept,
                )
            if len(queue) > kept:
                log.warning(
                    "conversation %s: %d queued message(s) not answered (shutting down)",
                    _where(key),
                    len(queue) - kept,
                )
            queue.clear()
        self._released.set()  # held workers find their queues empty and end

    async def wait_idle(self) -> None:
        await self._idle.wait()


def _where(key: _Key) -> str:
    channel, chat_id, thread_id = key
    return f"{channel}:{chat_id}" + (f":{thread_id}" if thread_id is not None else "")
