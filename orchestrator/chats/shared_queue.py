"""One turn at a time per conversation across every instance sharing a store (architecture §9).

Theory of operation
-------------------
With a shared store (PostgreSQL) the queue of waiting messages is the store's ``waiting`` table,
not this process's memory. :meth:`SharedDispatcher.submit` is called after the message was
stored; it starts a local worker for the conversation unless one runs. The worker claims the
conversation in the store (:meth:`~orchestrator.store.interface.ConversationStore.try_claim`);
when another instance holds it, the worker ends at once — that holder takes the message next,
in order. Holding the claim, the worker first marks a reply left in flight by a holder that died
(:mod:`orchestrator.turn.cut_answers`, the path a SQLite start takes too: its last message gets the
interrupted marker, :data:`TAKEOVER_CAUSE`), then takes the waiting messages one at a time,
oldest update first, each answered by ``run_turn``. It releases the
claim when none is left, then looks once more: a message stored between its last look and the
release finds no worker able to claim (the release came after its claim attempt), so the worker
claims again and answers it.

An instance that dies (SIGKILL, a crash) loses its claims with its database connection. Its
waiting messages and its cut answer are found by :meth:`SharedDispatcher.sweep`, which every
instance runs: every ``takeover_secs / 3`` seconds it lists the conversations with waiting
messages or a reply in flight and starts a worker for each that has none here — the claim
decides which instance takes it over, within ``takeover_secs``.

The interface matches :class:`orchestrator.chats.dispatch.Dispatcher` (``submit``, ``move``,
``release``, ``close``, ``wait_idle``, ``queued``), so the daemon drives either.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup

from channels.base import Channel, InboundMessage
from orchestrator.store import ConversationStore
from orchestrator.store.records import ConversationRef
from orchestrator.turn.cut_answers import TAKEOVER_CAUSE, mark_cut_answer

__all__ = ["TAKEOVER_CAUSE", "SharedDispatcher"]

log = logging.getLogger(__name__)

TurnFunction = Callable[[Channel, InboundMessage], Awaitable[object]]


@dataclass(slots=True)
class _Worker:
    again: bool = False  # a message was submitted while the worker ran


class SharedDispatcher:
    """Runs turns from the shared store's queue; see the module docstring.

    Args:
        task_group: owns the workers and the sweep.
        store: the shared store.
        channels: the running channels by name (conversations of other channels are left to
            the instances that serve them).
        run_turn: answers one message.
        takeover_secs: the bound on taking over a dead instance's conversations.
        held: start no turn until :meth:`release`.
    """

    def __init__(
        self,
        task_group: TaskGroup,
        store: ConversationStore,
        channels: Mapping[str, Channel],
        run_turn: TurnFunction,
        *,
        takeover_secs: float,
        held: bool = False,
    ) -> None:
        self._tg = task_group
        self._store = store
        self._channels = channels
        self._run_turn = run_turn
        self._takeover_secs = takeover_secs
        self._released = anyio.Event()
        if not held:
            self._released.set()
        self._workers: dict[ConversationRef, _Worker] = {}
        self._closed = False
        self._queued = 0
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def queued(self) -> int:
        """Messages waiting in the store, every instance's, as of the last sweep."""
        return self._queued

    def release(self) -> None:
        self._released.set()

    def submit(self, channel: Channel, message: InboundMessage, ticket: int | None = None) -> bool:
        """``message`` is stored (``ticket`` is its row): answer it here when this instance
        gets the conversation. False when closed."""
        if self._closed:
            return False
        self._kick((channel.name, message.chat_id, message.thread_id))
        return True

    def move(self, channel: str, old_chat_id: str, new_chat_id: str) -> None:
        """The store moved the chat's waiting messages; the worker of the new id takes them."""
        for name, chat_id, thread_id in list(self._workers):
            if name == channel and chat_id == old_chat_id:
                self._kick((name, new_chat_id, thread_id))

    def close(self) -> None:
        """Stop taking messages; those waiting stay in the store for any instance."""
        self._closed = True
        self._released.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def sweep(self) -> None:
        """Every ``takeover_secs / 3`` seconds, take over what no live instance holds (runs
        until cancelled)."""
        await self._released.wait()
        interval = max(0.1, self._takeover_secs / 3)
        while not self._closed:
            try:
                self._queued = len(await self._store.waiting())
                for key in await self._store.pending_conversations():
                    if key[0] in self._channels:
                        self._kick(key)
            except Exception as exc:
                log.warning("store: looking for conversations to take over failed: %s", exc)
            await anyio.sleep(interval)

    def _kick(self, key: ConversationRef) -> None:
        if self._closed:
            return
        worker = self._workers.get(key)
        if worker is not None:
            worker.again = True
            return
        worker = self._workers[key] = _Worker()
        self._idle = anyio.Event()
        self._tg.start_soon(self._work, key, worker)

    async def _work(self, key: ConversationRef, worker: _Worker) -> None:
        try:
            await self._released.wait()
            while not self._closed:
                worker.again = False
                if not await self._store.try_claim(*key):
                    break  # its holder answers what waits, in order
                try:
                    await self._answer_waiting(key)
                finally:
                    await self._store.release(*key)
                if self._closed:
                    break
                waiting = await self._store.next_waiting(*key)
                if not worker.again and waiting is None:
                    break
        except Exception:
            log.exception("conversation %s: the shared queue failed", _where(key))
        finally:
            del self._workers[key]
            if not self._workers:
                self._idle.set()

    async def _answer_waiting(self, key: ConversationRef) -> None:
        channel = self._channels[key[0]]
        await self._mark_cut_answer(channel, key)
        while not self._closed:
            waiting = await self._store.next_waiting(*key)
            if waiting is None:
                return
            if not await self._store.take_waiting(waiting.id):
                continue
            try:
                await self._run_turn(channel, waiting.message)
            except Exception:
                log.exception("turn failed in %s", _where(key))

    async def _mark_cut_answer(self, channel: Channel, key: ConversationRef) -> None:
        """A reply in flight with the conversation unclaimed is the cut answer of an instance
        that died: it is marked (:func:`~orchestrator.turn.cut_answers.mark_cut_answer`)."""
        draft = await self._store.draft(*key)
        if draft is not None:
            await mark_cut_answer(self._store, channel, draft)


def _where(key: ConversationRef) -> str:
    channel, chat_id, thread_id = key
    return f"{channel}:{chat_id}" + (f":{thread_id}" if thread_id is not None else "")
