"""The store seam (architecture §7, §9): what the daemon and the turn loop ask of a store,
whichever engine keeps it.

Two implementations: :class:`orchestrator.store.sqlite.AsyncStore` (the embedded default, one
instance) and :class:`orchestrator.store.postgres.PostgresStore` (several instances of one bot
share it). :func:`orchestrator.store.open_store` picks one by ``storage.url``.

Conversation claims
-------------------
One turn at a time per conversation holds across every instance sharing a store:
:meth:`ConversationStore.try_claim` takes the conversation (False when another holder has it)
and :meth:`ConversationStore.release` gives it back. The SQLite store's claims are the process's
own; PostgreSQL's are advisory locks of the instance's session, so a process that dies loses
them with its connection.

Replies in flight
-----------------
Each reply is recorded (:meth:`ConversationStore.set_draft`) before its first write and
cleared when it ends, so a reply whose writer died — SIGKILL, a crash, power loss — is found
and marked interrupted (:mod:`orchestrator.turn.cut_answers`): at the next start for a store of one
instance, by the instance that takes the conversation over for a shared one.

Copy tables
-----------
:data:`COPY_TABLES` names the tables ``relaybot migrate-store`` copies and their columns, in the
order :meth:`ConversationStore.dump` returns and :meth:`ConversationStore.load` takes them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from channels.base import InboundMessage
from orchestrator.store.control_rows import ControlRows
from orchestrator.store.records import ConversationRef, Draft, RoundRecord, WaitingMessage
from providers.base import ChatMessage

__all__ = ["COPY_TABLES", "ChannelStateRows", "ConversationStore"]

COPY_TABLES: dict[str, tuple[str, ...]] = {
    "messages": (
        "channel", "chat_id", "thread_id", "role", "content", "tool_calls", "tool_call_id",
        "name", "provider_items", "created_at",
    ),
    "rounds": (
        "channel", "chat_id", "thread_id", "provider", "attempts", "ttft_ms", "input_tokens",
        "output_tokens", "cached_tokens", "writes_sent", "finish_reason", "outcome", "created_at",
    ),
    "waiting": ("channel", "chat_id", "thread_id", "message", "received_at", "sort_key"),
    "channel_state": ("channel", "key", "value"),
    "seen_updates": ("channel", "update_id", "seen_at"),
    "summaries": ("channel", "chat_id", "thread_id", "summary", "updated_at"),
    "chat_settings": ("channel", "chat_id", "thread_id", "key", "value"),
    "usage": (
        "channel", "chat_id", "thread_id", "user_id", "provider", "model", "input_tokens",
        "cached_tokens", "output_tokens", "cost", "estimated", "created_at",
    ),
}  # fmt: skip
"""Copied tables and columns, rows in their id order (``relaybot migrate-store``)."""


class ConversationStore(Protocol):
    """The async store every part of the daemon uses; see the module docstring.

    ``shared`` is True when several instances may use the store at once (PostgreSQL): the
    daemon then queues through the store (architecture §9)."""

    controls: ControlRows
    """The chat controls' rows: per-chat settings, usage, rate counters."""

    @property
    def shared(self) -> bool: ...

    async def history(
        self, channel: str, chat_id: str, thread_id: str | None = None
    ) -> list[ChatMessage]:
        """The last 200 messages of the conversation, oldest first; never starting on a tool
        result."""
        ...

    async def append(
        self,
        channel: str,
        chat_id: str,
        messages: list[ChatMessage],
        thread_id: str | None = None,
    ) -> None: ...

    async def reset(self, channel: str, chat_id: str, thread_id: str | None = None) -> None:
        """Forget the conversation's history and its summary."""
        ...

    async def summary(self, channel: str, chat_id: str, thread_id: str | None = None) -> str | None:
        """The summary that replaced the conversation's compacted turns, or None
        (architecture §5 "Context budget")."""
        ...

    async def compact(
        self, channel: str, chat_id: str, thread_id: str | None, keep: int, summary: str
    ) -> None:
        """Delete every message of the conversation but the newest ``keep`` and keep
        ``summary`` in their place (replacing the summary before it), atomically."""
        ...

    async def record_round(self, record: RoundRecord) -> int:
        """Store ``record``; returns its row id (for :meth:`set_round_outcome`)."""
        ...

    async def set_round_outcome(self, round_id: int, outcome: str) -> None: ...

    async def rounds(self, channel: str | None = None) -> list[RoundRecord]:
        """Every round record (of ``channel``), oldest first."""
        ...

    async def recent_rounds(
        self, limit: int = 20, chat_id: str | None = None
    ) -> list[tuple[float, RoundRecord]]:
        """The latest ``limit`` rounds (of chat ``chat_id`` when given), newest first, each with
        the Unix seconds it was recorded at (``relaybot runs``)."""
        ...

    async def move_conversation(self, channel: str, old_chat_id: str, new_chat_id: str) -> None: ...

    async def add_waiting(self, message: InboundMessage) -> int:
        """Keep ``message`` until its turn starts; returns its row id."""
        ...

    async def remove_waiting(self, waiting_id: int) -> None: ...

    async def take_waiting(self, waiting_id: int) -> bool:
        """Remove a waiting row; True when this call removed it (it was still there)."""
        ...

    async def waiting(self) -> list[WaitingMessage]:
        """Every kept message, oldest first."""
        ...

    async def next_waiting(
        self, channel: str, chat_id: str, thread_id: str | None
    ) -> WaitingMessage | None:
        """The conversation's first waiting message (by update id, then row id), or None."""
        ...

    async def pending_conversations(self) -> list[ConversationRef]:
        """The conversations with waiting messages or a draft left behind."""
        ...

    async def mark_seen(self, channel: str, update_ids: tuple[int, ...]) -> bool:
        """Record ``update_ids`` as seen on ``channel``; False when one of them was seen
        before, by any instance (the message was already taken: drop it)."""
        ...

    async def get_state(self, channel: str, key: str) -> str | None: ...

    async def set_state(self, channel: str, key: str, value: str) -> None: ...

    def channel_state(self, channel: str) -> ChannelStateRows:
        """The state rows of ``channel`` (what the adapter keeps across restarts)."""
        ...

    async def set_draft(self, draft: Draft) -> None:
        """Record the conversation's reply in flight (one per conversation, replaced): before
        its first write, then as its messages are sent and edited."""
        ...

    async def clear_draft(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        """The reply ended (delivered, given up, or marked interrupted): forget it."""
        ...

    async def draft(self, channel: str, chat_id: str, thread_id: str | None) -> Draft | None: ...

    async def drafts(self) -> list[Draft]:
        """Every reply in flight, of every instance (a store of one instance: at start, each
        was cut by a hard kill of the previous run)."""
        ...

    async def try_claim(self, channel: str, chat_id: str, thread_id: str | None) -> bool:
        """Take the conversation for one turn (and the ones waiting behind it); False when
        another holder has it."""
        ...

    async def release(self, channel: str, chat_id: str, thread_id: str | None) -> None: ...

    async def claimed(self, channel: str, chat_id: str, thread_id: str | None) -> bool:
        """Whether any holder (any instance) has the conversation now."""
        ...

    async def request_stop(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        """``/stop`` for a conversation whose turn may run on another instance: every
        instance's :meth:`stop_requests` yields it (nothing for a store of one instance)."""
        ...

    def stop_requests(self) -> AsyncIterator[ConversationRef]:
        """The conversations ``/stop`` was asked for on any instance, as they come (runs until
        cancelled; never yields for a store of one instance)."""
        ...

    async def prune(self, older_than: float) -> int:
        """Delete history and round records created before ``older_than`` (Unix seconds);
        returns the rows deleted (``storage.retain_days``)."""
        ...

    async def dump(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of ``table`` (a :data:`COPY_TABLES` key) in its columns, by id."""
        ...

    async def load(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``rows`` (as :meth:`dump` gives them) into ``table``."""
        ...

    async def open(self) -> None:
        """Connect and bring the schema up to date where the engine needs it (PostgreSQL); a
        no-op for SQLite, which opens its file when built."""
        ...

    async def aclose(self) -> None: ...


class ChannelStateRows:
    """One channel's rows of the store's channel state: :class:`channels.base.ChannelState`."""

    def __init__(self, store: ConversationStore, channel: str) -> None:
        self._store = store
        self._channel = channel

    async def get(self, key: str) -> str | None:
        return await self._store.get_state(self._channel, key)

    async def set(self, key: str, value: str) -> None:
        await self._store.set_state(self._channel, key, value)
