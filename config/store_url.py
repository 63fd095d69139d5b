"""``storage.url`` (architecture §9): which store, where (parsed here, opened by
:func:`orchestrator.store.open_store`).

* ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's form: three
  slashes, then the path) — the embedded store.
* ``postgresql://user@host:5432/db`` (or ``postgres://``), any libpq connection URI
  (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING-URIS). The
  password is not written in the URL: libpq reads ``PGPASSWORD`` (or ``~/.pgpass``) from the
  environment; a password in the URL is refused, so it never lands in a config file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

__all__ = ["StoreUrl", "parse_store_url"]


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """``kind`` and its ``target``: a file path for SQLite, the connection URI for PostgreSQL."""

    kind: Literal["sqlite", "postgresql"]
    target: str


def parse_store_url(url: str) -> StoreUrl:
    """Parse ``url``; raises ``ValueError`` (one line, never showing a password) for another
    scheme, an empty SQLite path or a password in a PostgreSQL URL."""
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise ValueError("expected sqlite:///PATH (three slashes, then the file's path)")
        return StoreUrl("sqlite", rest[1:])
    if scheme in ("postgresql", "postgres"):
        if urlsplit(url).password is not None:
            raise ValueError(
                "a password in the URL is not accepted: set PGPASSWORD in the environment"
            )
        return StoreUrl("postgresql", url)
    raise ValueError("expected a sqlite:/// or postgresql:// URL")
