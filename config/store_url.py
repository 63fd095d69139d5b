"""``storage.url`` (architecture §9): which store, where (parsed here, opened by
:func:`orchestrator.store.open_store`).

* ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's form: three
  slashes, then the path) — the embedded store.
* ``postgresql://user@host:5432/db`` (or ``postgres://``), any libpq connection URI
  (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING-URIS). The
  password is not written in the URL: libpq reads ``PGPASSWORD`` (or ``~/.pgpass``) from the
  environment, or the whole URL comes from the environment (``url: ${DATABASE_URL}``, as managed
  databases hand it out, password inside). A password *written* in the file's URL is refused
  (:func:`written_password`, checked by the config model), so it never lands in a config file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

__all__ = ["StoreUrl", "parse_store_url", "written_password"]


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """``kind`` and its ``target``: a file path for SQLite, the connection URI for PostgreSQL."""

    kind: Literal["sqlite", "postgresql"]
    target: str


def parse_store_url(url: str) -> StoreUrl:
    """Parse ``url``; raises ``ValueError`` (one line, never showing the URL) for another
    scheme or an empty SQLite path. A password in a PostgreSQL URL is accepted here: whether
    it was written in a file is :func:`written_password`'s question."""
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise ValueError("expected sqlite:///PATH (three slashes, then the file's path)")
        return StoreUrl("sqlite", rest[1:])
    if scheme in ("postgresql", "postgres"):
        return StoreUrl("postgresql", url)
    raise ValueError("expected a sqlite:/// or postgresql:// URL")


_REFERENCE = re.compile(r"\$\{[^}]*\}")


def written_password(text: str) -> bool:
    """True when ``text``, a URL as written (``${VAR}`` references not yet expanded), holds a
    password of its own: one with any character outside a ``${...}`` reference.

    ``${DATABASE_URL}`` and ``postgresql://bot:${DB_PASSWORD}@db/bot`` hold none;
    ``postgresql://bot:hunter2@db/bot`` does.
    """
    try:
        password = urlsplit(text).password
    except ValueError:  # a malformed netloc: parse_store_url or the store says so
        return False
    return bool(password and _REFERENCE.sub("", password))
