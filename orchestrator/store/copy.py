"""``relaybot migrate-store`` (architecture §9): copy one store into another, e.g. the embedded
SQLite file into the PostgreSQL server several instances will share.

Copied, in :data:`~orchestrator.store.interface.COPY_TABLES` order and each table's id order:
conversations (``messages``), run records (``rounds``), waiting messages, channel state (e.g.
the Matrix sync token), the seen update ids and the summaries of compacted turns. Not copied:
drafts (they belong to a running answer). The destination must hold no history and no run
records yet, so a copy is never doubled.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.store import COPY_TABLES, open_store

__all__ = ["CopyRefused", "copy_store"]

_BATCH = 5000


class CopyRefused(Exception):
    """The destination already holds history or run records."""


@dataclass(frozen=True, slots=True)
class Copied:
    """Rows copied per table."""

    rows: dict[str, int]

    def summary(self) -> str:
        return ", ".join(f"{count} {table}" for table, count in self.rows.items())


async def copy_store(source_url: str, destination_url: str) -> Copied:
    """Copy ``source_url``'s store into ``destination_url``'s (its schema is created or
    migrated first). Raises :class:`CopyRefused`, ``ValueError`` for a bad URL, and the
    stores' errors (``sqlite3.Error``, ``psycopg.Error``, ``OSError``)."""
    source = await open_store(source_url)
    try:
        destination = await open_store(destination_url)
        try:
            if await destination.dump("rounds") or await destination.dump("messages"):
                raise CopyRefused("the destination store already holds history or run records")
            counts: dict[str, int] = {}
            for table in COPY_TABLES:
                rows = await source.dump(table)
                for start in range(0, len(rows), _BATCH):
                    await destination.load(table, rows[start : start + _BATCH])
                counts[table] = len(rows)
            return Copied(counts)
        finally:
            await destination.aclose()
    finally:
        await source.aclose()
