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
  Nothing shows a store URL's password: what is printed or logged of a URL is
  :func:`masked_store_url` (``postgresql://bot:***@db/bot``), and of an error about it
  :func:`without_password` (the password replaced wherever the text repeats it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "MASK",
    "StoreUrl",
    "masked_store_url",
    "parse_store_url",
    "without_password",
    "written_password",
]

MASK = "***"
"""What stands for a password in anything shown."""


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


_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&#]*")


def _passwords(url: str) -> list[str]:
    """The password(s) ``url`` carries: in its user info, or as libpq's ``?password=``
    parameter; each as written and percent-decoded."""
    found: list[str] = []
    try:
        parts = urlsplit(url)
        if parts.password:
            found.append(parts.password)
        found.extend(v for k, v in parse_qsl(parts.query) if k.lower() == "password" and v)
    except ValueError:  # a malformed netloc: take what lies between the first ':' and '@'
        userinfo = url.partition("://")[2].rpartition("@")[0]
        if ":" in userinfo:
            found.append(userinfo.partition(":")[2])
    decoded = [unquote(p) for p in found]
    return sorted({p for p in found + decoded if p}, key=len, reverse=True)


def masked_store_url(url: str) -> str:
    """``url`` as it may be shown: its password (user info or ``?password=``) replaced by
    ``***``; a URL without one as it is. ``postgresql://bot:pw@db/bot`` →
    ``postgresql://bot:***@db/bot``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return without_password(url, url)
    authority, slash, tail = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.partition(':')[0]}:{MASK}@{host}"
    tail = _QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, tail)
    return without_password(f"{scheme}://{authority}{slash}{tail}", url)


def without_password(text: str, url: str) -> str:
    """``text`` (an error message about the store ``url``) with every occurrence of ``url``'s
    password replaced by ``***``; ``text`` as it is when ``url`` has none."""
    for password in _passwords(url):
        text = text.replace(password, MASK)
    return text
