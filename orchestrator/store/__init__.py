"""The stores (architecture §7, §9): SQLite embedded, PostgreSQL shared by several instances.

:func:`open_store` opens the one a ``storage.url`` names; everything the daemon and the turn
loop use is :class:`~orchestrator.store.interface.ConversationStore`.
"""

from __future__ import annotations

from config.store_url import StoreUrl, parse_store_url
from orchestrator.store.interface import COPY_TABLES, ChannelStateRows, ConversationStore
from orchestrator.store.records import (
    SEEN_UPDATES_KEPT,
    Draft,
    RoundRecord,
    WaitingMessage,
    decode_inbound,
    encode_inbound,
)
from orchestrator.store.sqlite import Store
from orchestrator.store.sqlite_async import AsyncStore

__all__ = [
    "COPY_TABLES",
    "SEEN_UPDATES_KEPT",
    "AsyncStore",
    "ChannelStateRows",
    "ConversationStore",
    "Draft",
    "RoundRecord",
    "Store",
    "StoreUrl",
    "WaitingMessage",
    "decode_inbound",
    "encode_inbound",
    "open_store",
    "parse_store_url",
    "store_for",
]


async def open_store(url: str, *, pool_size: int = 10) -> ConversationStore:
    """Open the store ``url`` names (``sqlite:///path`` or ``postgresql://…``, see
    :func:`~orchestrator.store.url.parse_store_url`); PostgreSQL's schema migrations are
    applied first. Raises ``ValueError`` for another scheme, ``OSError`` or ``sqlite3.Error``
    for a SQLite file that cannot be opened, ``psycopg.Error`` for a server that refuses."""
    parsed = parse_store_url(url)
    if parsed.kind == "sqlite":
        return AsyncStore(Store(parsed.target))
    from orchestrator.store.postgres import PostgresStore

    return await PostgresStore.connect(parsed.target, pool_size=pool_size)


def store_for(url: str, *, pool_size: int = 10) -> ConversationStore:
    """The store ``url`` names, not yet opened: SQLite opens its file now, PostgreSQL connects
    at :meth:`~orchestrator.store.interface.ConversationStore.open`. Raises as
    :func:`open_store` does."""
    parsed = parse_store_url(url)
    if parsed.kind == "sqlite":
        return AsyncStore(Store(parsed.target))
    from orchestrator.store.postgres import PostgresStore

    return PostgresStore(parsed.target, pool_size=pool_size)
