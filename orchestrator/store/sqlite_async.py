""":class:`AsyncStore`: the SQLite store on the event loop (architecture §7)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import anyio

from channels.base import InboundMessage
from orchestrator.store.control_rows import ControlRows
from orchestrator.store.interface import ChannelStateRows
from orchestrator.store.records import ConversationRef, Draft, RoundRecord, WaitingMessage
from orchestrator.store.sqlite import Store
from orchestrator.store.worker import StoreWorker
from providers.base import ChatMessage

__all__ = ["AsyncStore"]

_T = TypeVar("_T")


class AsyncStore:
    """:class:`Store` for the event loop (a
    :class:`~orchestrator.store.interface.ConversationStore`): the same calls as coroutines,
    each run on a worker thread, one at a time, so the loop never waits on
    the disk. Claims are this process's own (one process uses the file). The calls run on one
    :class:`~orchestrator.store.worker.StoreWorker` thread, in order; the calls waiting together
    run as one group in one transaction (:meth:`Store.run_group`), and a call returns once its
    group is committed.

    ``sync`` is the wrapped store (for start-up, shutdown and tests)."""

    def __init__(self, store: Store) -> None:
        self.sync = store
        self._worker = StoreWorker(run_group=store.run_group)
        self._claimed: set[ConversationRef] = set()
        self.controls = ControlRows(self._query, self._execute)
        """The chat controls' rows (settings, usage, rate counters)."""

    @property
    def shared(self) -> bool:
        return False

    async def _run(self, call: Callable[[], _T]) -> _T:
        return await self._worker.run(call)

    async def _query(self, statement: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        return await self._run(partial(self.sync.query, statement, args))

    async def _execute(self, statement: str, args: Sequence[Any]) -> int:
        return await self._run(partial(self.sync.execute, statement, args))

    async def history(
        self, channel: str, chat_id: str, thread_id: str | None = None
    ) -> list[ChatMessage]:
        return await self._run(partial(self.sync.history, channel, chat_id, thread_id))

    async def append(
        self,
        channel: str,
        chat_id: str,
        messages: list[ChatMessage],
        thread_id: str | None = None,
    ) -> None:
        await self._run(partial(self.sync.append, channel, chat_id, messages, thread_id))

    async def reset(self, channel: str, chat_id: str, thread_id: str | None = None) -> None:
        await self._run(partial(self.sync.reset, channel, chat_id, thread_id))

    async def summary(self, channel: str, chat_id: str, thread_id: str | None = None) -> str | None:
        return await self._run(partial(self.sync.summary, channel, chat_id, thread_id))

    async def compact(
        self, channel: str, chat_id: str, thread_id: str | None, keep: int, summary: str
    ) -> None:
        await self._run(partial(self.sync.compact, channel, chat_id, thread_id, keep, summary))

    async def record_round(self, record: RoundRecord) -> int:
        return await self._run(partial(self.sync.record_round, record))

    async def set_round_outcome(self, round_id: int, outcome: str) -> None:
        await self._run(partial(self.sync.set_round_outcome, round_id, outcome))

    async def rounds(self, channel: str | None = None) -> list[RoundRecord]:
        return await self._run(partial(self.sync.rounds, channel))

    async def move_conversation(self, channel: str, old_chat_id: str, new_chat_id: str) -> None:
        await self._run(partial(self.sync.move_conversation, channel, old_chat_id, new_chat_id))

    async def add_waiting(self, message: InboundMessage) -> int:
        return await self._run(partial(self.sync.add_waiting, message))

    async def remove_waiting(self, waiting_id: int) -> None:
        await self._run(partial(self.sync.remove_waiting, waiting_id))

    async def take_waiting(self, waiting_id: int) -> bool:
        return await self._run(partial(self.sync.take_waiting, waiting_id))

    async def waiting(self) -> list[WaitingMessage]:
        return await self._run(self.sync.waiting)

    async def next_waiting(
        self, channel: str, chat_id: str, thread_id: str | None
    ) -> WaitingMessage | None:
        return await self._run(partial(self.sync.next_waiting, channel, chat_id, thread_id))

    async def pending_conversations(self) -> list[ConversationRef]:
        return await self._run(self.sync.pending_conversations)

    async def mark_seen(self, channel: str, update_ids: tuple[int, ...]) -> bool:
        return await self._run(partial(self.sync.mark_seen, channel, update_ids))

    async def get_state(self, channel: str, key: str) -> str | None:
        return await self._run(partial(self.sync.get_state, channel, key))

    async def set_state(self, channel: str, key: str, value: str) -> None:
        await self._run(partial(self.sync.set_state, channel, key, value))

    def channel_state(self, channel: str) -> ChannelStateRows:
        """The state rows of ``channel`` (what the adapter keeps across restarts)."""
        return ChannelStateRows(self, channel)

    async def set_draft(self, draft: Draft) -> None:
        await self._run(partial(self.sync.set_draft, draft))

    async def clear_draft(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        await self._run(partial(self.sync.clear_draft, channel, chat_id, thread_id))

    async def draft(self, channel: str, chat_id: str, thread_id: str | None) -> Draft | None:
        return await self._run(partial(self.sync.draft, channel, chat_id, thread_id))

    async def drafts(self) -> list[Draft]:
        return await self._run(self.sync.drafts)

    async def try_claim(self, channel: str, chat_id: str, thread_id: str | None) -> bool:
        key = (channel, chat_id, thread_id)
        if key in self._claimed:
            return False
        self._claimed.add(key)
        return True

    async def release(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        self._claimed.discard((channel, chat_id, thread_id))

    async def request_stop(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        return None  # one instance: the daemon stops its own turns

    async def stop_requests(self) -> AsyncIterator[ConversationRef]:
        await anyio.sleep_forever()
        yield ("", "", None)  # never reached: makes this an async generator

    async def claimed(self, channel: str, chat_id: str, thread_id: str | None) -> bool:
        return (channel, chat_id, thread_id) in self._claimed

    async def prune(self, older_than: float) -> int:
        return await self._run(partial(self.sync.prune, older_than))

    async def dump(self, table: str) -> list[tuple[Any, ...]]:
        return await self._run(partial(self.sync.dump, table))

    async def load(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        await self._run(partial(self.sync.load, table, rows))

    async def open(self) -> None:
        return None  # the file was opened with the Store

    async def recent_rounds(
        self, limit: int = 20, chat_id: str | None = None
    ) -> list[tuple[float, RoundRecord]]:
        return await self._run(partial(self.sync.recent_rounds, limit, chat_id))

    async def aclose(self) -> None:
        await self._run(self.sync.close)
        self._worker.stop()
