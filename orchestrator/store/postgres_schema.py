"""PostgreSQL schema migrations applied at start (architecture §9).

The files of :mod:`orchestrator.store.migrations` (``NNNN_name.sql``) run in version order, each
in the one transaction that records it in ``schema_migrations`` (version, name, applied_at). The
whole pass holds a transaction-level advisory lock, so instances starting together apply each
migration once; an instance whose schema is newer than its code refuses to start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg

__all__ = ["MIGRATION_LOCK", "Migration", "SchemaTooNew", "migrate", "migrations"]

MIGRATION_LOCK = 0x72656C6179626F74  # "relaybot": the advisory lock held while migrating
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class SchemaTooNew(RuntimeError):
    """The database has migrations this version does not know (a newer relaybot wrote it)."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """The packaged migrations, by version. Raises ``ValueError`` when two files share a
    version (two branches that each added the next number): renumber one of them."""
    found: dict[int, Migration] = {}
    for entry in resources.files("orchestrator.store.migrations").iterdir():
        match = _FILE.match(entry.name)
        if not match:
            continue
        migration = Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8"))
        if migration.version in found:
            raise ValueError(
                f"migrations {found[migration.version].name!r} and {migration.name!r} share"
                f" version {migration.version:04d}"
            )
        found[migration.version] = migration
    return [found[version] for version in sorted(found)]


async def migrate(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> list[int]:
    """Apply the migrations ``conn``'s database lacks; returns their versions. Raises
    :class:`SchemaTooNew` and ``psycopg.Error``."""
    known = migrations()
    applied_now: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        cursor = await conn.execute("SELECT version FROM schema_migrations")
        applied = {int(str(row[0])) for row in await cursor.fetchall()}
        newest = max((m.version for m in known), default=0)
        if any(version > newest for version in applied):
            raise SchemaTooNew(
                f"the database's schema (version {max(applied)}) is newer than this relaybot's"
                f" ({newest})"
            )
        for migration in known:
            if migration.version in applied:
                continue
            await conn.execute(migration.sql.encode())
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            applied_now.append(migration.version)
    return applied_now
