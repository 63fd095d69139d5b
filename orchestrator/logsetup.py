"""Logging: readable lines by default, JSON with ``--log-format json``; every line redacted.

Every record passes through the outbound redactor (architecture §4 "Logs pass through the same
redactor"): the formatted message and any exception text are redacted before they are written.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Literal

__all__ = ["RedactingFormatter", "setup_logging"]

Redact = Callable[[str], str]


class RedactingFormatter(logging.Formatter):
    """Formats a record as text or JSON, then redacts the whole line."""

    def __init__(self, redact: Redact, fmt: Literal["text", "json"] = "text") -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._redact = redact
        self._json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        if not self._json:
            return self._redact(super().format(record))
        payload = {
            "time": self.formatTime(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return self._redact(json.dumps(payload, ensure_ascii=False))


class _CurrentStderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the record, so a live terminal view
    that redirects stderr (rich's ``Live``) prints log lines above its region, not into it."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def setup_logging(
    redact: Redact, *, fmt: Literal["text", "json"] = "text", level: int = logging.INFO
) -> None:
    handler = _CurrentStderrHandler()
    handler.setFormatter(RedactingFormatter(redact, fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "telegram", "apscheduler", "markdown_it"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
