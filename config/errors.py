"""Errors of the config loader (architecture §6).

Hierarchy::

    Exception
     ├── ConfigError              the file cannot be used; carries every ConfigIssue found
     └── ValueError
          └── LocatedValueError   raised inside a model validator for an error that belongs to a
                                  key below the model (the loader reports it at that key's line)

A :class:`ConfigIssue` renders as ``FILE:LINE: key.path: message``. Messages never contain the
input value of a key (a value may be a secret, or come from the environment): they name the key
and say what was expected instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ConfigError", "ConfigIssue", "Loc", "LocatedValueError", "format_path"]

Loc = tuple[str | int, ...]
"""A key path: mapping keys (str) and sequence indexes (int), from the top of the file."""


def format_path(loc: Loc) -> str:
    """Render a key path as ``agent.providers[0]`` (``channels["my.bot"]`` for odd keys).

    The empty path (the whole document) renders as ``(top level)``.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and all(ch.isalnum() or ch in "_-" for ch in part):
            out += f".{part}" if out else part
        else:
            out += '["' + part.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return out or "(top level)"


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in a config file.

    Attributes:
        source: the file name as given to the loader (or ``<embedded default>``, ``<string>``).
        line: 1-based line number, or ``None`` when the problem concerns the whole file (it
            cannot be read or decoded).
        path: the key path (``channels.tg.token``), ``yaml`` for a syntax error, or ``""`` for
            the whole file.
        message: what is wrong, without the offending value.
        warning: the file is still usable (e.g. a channel kind this version cannot start);
            rendered ``FILE:LINE: key.path: warning: message``.
    """

    source: str
    line: int | None
    path: str
    message: str
    warning: bool = False

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        message = f"warning: {self.message}" if self.warning else self.message
        return f"{where}: {self.path}: {message}" if self.path else f"{where}: {message}"


class ConfigError(Exception):
    """The config cannot be used.

    Args:
        errors: every issue found, sorted by line (file-level issues first); at least one is not
            a warning.
    """

    def __init__(self, errors: Sequence[ConfigIssue]) -> None:
        self.errors: list[ConfigIssue] = list(errors)
        super().__init__("\n".join(str(issue) for issue in self.errors))


class LocatedValueError(ValueError):
    """A validator error that belongs to a key below the model that raised it.

    Pydantic reports a model validator's error at the model's own path; the loader appends
    ``loc`` to that path. Several issues may be raised at once.

    Args:
        issues: ``(loc, message)`` pairs; ``loc`` is relative to the raising model.
    """

    def __init__(self, *issues: tuple[Loc, str]) -> None:
        super().__init__("; ".join(message for _, message in issues))
        self.issues: tuple[tuple[Loc, str], ...] = issues
