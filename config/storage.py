"""The ``storage`` section (architecture §7, §9): where conversations and round records live,
and what several instances sharing one store agree on."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from config.store_url import parse_store_url

__all__ = ["StorageConfig"]


class StorageConfig(BaseModel):
    """The store of conversations and round records: SQLite by default (one instance), or a
    PostgreSQL server that several instances of one bot share."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(
        default="relaybot.db",
        description="SQLite file; a relative path is relative to the config file's directory",
    )
    url: str | None = Field(
        default=None,
        description="sqlite:///PATH or postgresql://USER@HOST:PORT/DB (the password from "
        "PGPASSWORD in the environment, never in the URL); wins over path; null = path",
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
    def _url(cls, value: str | None) -> str | None:
        if value is not None:
            parse_store_url(value)  # raises ValueError with a one-line reason
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
