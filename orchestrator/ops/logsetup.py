"""Logging: readable lines by default, JSON with ``--log-format json``; every line redacted
(architecture §7 "Logs").

Every record passes through the outbound redactor (architecture §4 "Logs pass through the same
redactor"): in JSON each string value is redacted before the object is written, then the whole
line once more; in text the whole formatted line, exception text included.

JSON lines (one object per line, `JSON Lines <https://jsonlines.org/>`_) carry ``time`` (ISO 8601
in UTC with milliseconds, ``2026-12-01T07:26:52.450Z``), ``level``, ``logger``, ``message``, the
structured fields a record was logged with (``extra={"fields": {...}}``; e.g. the one line per
finished reply: ``channel``, ``chat``, ``round``, ``provider``, ``ttft_ms``, ``tokens``,
``outcome``) and ``exception`` when there is one. Text lines end with the fields the message does
not already say, as ``key=value`` pairs.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Literal

__all__ = ["RedactingFormatter", "iso_utc", "setup_logging"]

Redact = Callable[[str], str]

_RESERVED = frozenset({"time", "level", "logger", "message", "exception"})
_NOT_IN_TEXT = frozenset(
    {"channel", "chat", "round", "outcome", "thread", "input_tokens", "output_tokens"}
)
"""Fields a text line leaves out: its message says them, or ``tokens`` sums them."""


def iso_utc(created: float) -> str:
    """Unix seconds → ISO 8601 UTC with milliseconds and ``Z`` (RFC 3339)."""
    stamp = datetime.fromtimestamp(created, tz=UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def _redacted(value: object, redact: Redact) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {str(k): _redacted(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v, redact) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(str(value))


class RedactingFormatter(logging.Formatter):
    """Formats a record as text or JSON (module docstring), redacted."""

    def __init__(self, redact: Redact, fmt: Literal["text", "json"] = "text") -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._redact = redact
        self._json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        fields = fields if isinstance(fields, Mapping) else {}
        if not self._json:
            line = super().format(record)
            extra = [
                f"{k}={v}" for k, v in fields.items() if k not in _NOT_IN_TEXT and v is not None
            ]
            if extra:
                head, sep, tail = line.partition("\n")  # any traceback stays below
                line = f"{head} ({' '.join(extra)}){sep}{tail}"
            return self._redact(line)
        payload: dict[str, object] = {
            "time": iso_utc(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in fields.items():
            if key not in _RESERVED:
                payload[key] = value
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        safe = _redacted(payload, self._redact)
        return self._redact(json.dumps(safe, ensure_ascii=False))


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
    """Send every log record to stderr through :class:`RedactingFormatter`; libraries that talk
    a lot (httpx, PTB, aiohttp's access log) only from ``warning`` on."""
    handler = _CurrentStderrHandler()
    handler.setFormatter(RedactingFormatter(redact, fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    noisy = ("httpx", "httpcore", "telegram", "apscheduler", "markdown_it", "aiohttp.access")
    for name in noisy:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
