"""The ``storage`` section (architecture §7, §9): where conversations and round records live,
and what several instances sharing one store agree on.

A relative ``storage.path`` (or ``sqlite:///`` path) names a file in the *state directory*
(:func:`state_directory`), never beside the config file: the config lives where the service may
only read (``/etc/relaybot``, a read-only ``/config`` mount), the state where it may write
(systemd's ``StateDirectory=``, a volume).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from config.store_url import parse_store_url, written_password

__all__ = ["WRITTEN_URL_CONTEXT", "StorageConfig", "state_directory", "unwritable_reason"]

WRITTEN_URL_CONTEXT = "storage.url as written"
"""Validation-context key: ``storage.url`` as written in the file, ``${VAR}`` unexpanded."""


def state_directory(environ: Mapping[str, str]) -> Path:
    """The directory a relative store path is resolved in.

    ``$STATE_DIRECTORY`` when set and absolute (systemd sets it for ``StateDirectory=``; of a
    colon-separated list, the first entry), else ``$XDG_DATA_HOME/relaybot``, else
    ``$HOME/.local/share/relaybot`` (per the XDG Base Directory spec an unset, empty or relative
    ``XDG_DATA_HOME`` is ignored). The directory need not exist.
    """
    state = environ.get("STATE_DIRECTORY", "").split(":")[0]
    if state and Path(state).is_absolute():
        return Path(state)
    base = environ.get("XDG_DATA_HOME", "")
    if not base or not Path(base).is_absolute():
        home = environ.get("HOME") or str(Path.home())
        base = str(Path(home) / ".local" / "share")
    return Path(base) / "relaybot"


def unwritable_reason(path: Path) -> str | None:
    """Why the SQLite store at ``path`` (absolute) could not be opened for writing, or None.

    The store creates missing directories and the file (architecture §7), so what counts is the
    file when it exists (opened for writing, nothing written), else the nearest directory that
    exists: one temporary directory is created in it and removed again, which is what the store
    will do there — ``os.access`` alone misses ``/proc`` (no entry can be made there, even by
    root) and a read-only file system seen by root. A refusal on the way is a reason, never
    raised: ``"cannot create files in /var/lib/relaybot: permission denied"``,
    ``"cannot create files in /data: read-only file system"``.
    """
    try:
        if path.is_dir():
            return f"{path} is a directory"
        exists = path.exists()
        directory, missing = path.parent, path
        while not exists and not directory.exists() and directory != directory.parent:
            directory, missing = directory.parent, directory
    except OSError as exc:  # a directory on the way that the user cannot enter, a long name
        reason = _refused(exc, f"cannot reach {path}")
        if exc.errno in (errno.EACCES, errno.EPERM):
            reason += " (a directory on the way cannot be entered)"
        return reason
    if exists:
        try:
            with open(path, "r+b"):  # opened for writing; nothing is written
                pass
        except OSError as exc:
            return _refused(exc, f"cannot write {path}")
    if not directory.is_dir():
        return f"{directory} is not a directory"
    try:  # SQLite creates the missing directories, the file, and its -wal and -shm beside it
        os.rmdir(tempfile.mkdtemp(prefix=".relaybot-check-", dir=directory))
    except OSError as exc:
        if exists or missing == path:
            return _refused(exc, f"cannot create files in {directory}")
        return _refused(exc, f"cannot create the directory {missing}")
    return None


def _refused(exc: OSError, what: str) -> str:
    """``what`` and why the file system refused, in the words a user searches for."""
    if exc.errno == errno.EROFS:
        return f"{what}: read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{what}: permission denied"
    return f"{what}: {exc.strerror or type(exc).__name__}"


class StorageConfig(BaseModel):
    """The store of conversations and round records: SQLite by default (one instance), or a
    PostgreSQL server that several instances of one bot share."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(
        default="relaybot.db",
        description="SQLite file; a relative path is in the state directory ($STATE_DIRECTORY, "
        "else $XDG_DATA_HOME/relaybot)",
    )
    url: str | None = Field(
        default=None,
        description="sqlite:///PATH or postgresql://USER@HOST:PORT/DB (the password from "
        "PGPASSWORD, or inside a ${VAR} such as ${DATABASE_URL}; never written in the file); "
        "wins over path; null = path",
    )
    pool_size: int = Field(
        default=10, ge=1, le=1000, description="PostgreSQL: connections in the pool (plus one)"
    )
    takeover_secs: float = Field(
        default=30.0,
        gt=0,
        description="seconds within which the messages left waiting by an instance that "
        "died are taken over by another (PostgreSQL)",
    )
    retain_days: float | None = Field(
        default=None,
        gt=0,
        description="days of history and round records kept (older ones are pruned hourly); "
        "null keeps everything",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        parse_store_url(value)  # raises ValueError with a one-line reason
        # A password may come from the environment (``url: ${DATABASE_URL}``, as managed
        # databases hand it out), never from the file's own text. The loader passes the text as
        # written in the context; without one (a model built in code) the value is the text.
        context = info.context if isinstance(info.context, dict) else {}
        written = context.get(WRITTEN_URL_CONTEXT, value)
        if isinstance(written, str) and written_password(written):
            raise ValueError(
                "a password in the URL is not accepted when written in the file: set PGPASSWORD "
                "in the environment, or write the whole URL as ${VAR} (e.g. ${DATABASE_URL})"
            )
        return value

    def resolved_path(self, base_dir: str | Path) -> Path:
        """The store's absolute path: ``~`` expanded, a relative path joined to ``base_dir``.

        :func:`config.loader.load_config` already returns an absolute ``path``.
        """
        path = Path(self.path).expanduser()
        return path if path.is_absolute() else (Path(base_dir) / path).absolute()

    def resolved_url(self, base_dir: str | Path) -> str | None:
        """``url`` with a relative ``sqlite:///`` path joined to ``base_dir`` (``~`` expanded);
        other URLs as they are."""
        if self.url is None:
            return None
        parsed = parse_store_url(self.url)
        if parsed.kind != "sqlite":
            return self.url
        path = Path(parsed.target).expanduser()
        absolute = path if path.is_absolute() else (Path(base_dir) / path).absolute()
        return f"sqlite:///{absolute}"

    def store_url(self) -> str:
        """``url``, else ``sqlite:///`` and ``path``."""
        return self.url if self.url is not None else f"sqlite:///{self.path}"

    @property
    def shared(self) -> bool:
        """True for a PostgreSQL store (several instances may share it)."""
        return parse_store_url(self.store_url()).kind == "postgresql"
