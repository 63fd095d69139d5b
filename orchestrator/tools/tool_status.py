"""The status lines of tool calls (architecture §3 "Tool status"): one per call, ``⏳ name…``
while it runs, then ``✓ name 0.4 s`` or ``✗ name: cause``.

These are composed here and redacted by the reply's policy (``redact_line``) before they reach
delivery, like every status line. A cause is a few words: the first clause of the error, cut
with an ellipsis at :data:`CAUSE_CHARS` characters; it is redacted whole *before* it is cut, since
a cut could leave a secret's prefix the policy no longer recognises (architecture §4).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = [
    "CAUSE_CHARS",
    "DENIED_CAUSE",
    "REPEATED_CAUSE",
    "STOPPED_CAUSE",
    "UNANSWERED_CAUSE",
    "UNKNOWN_CAUSE",
    "done_line",
    "failed_line",
    "running_line",
    "short_cause",
]

CAUSE_CHARS = 48
"""The longest cause shown after ``✗ name:``, in characters (the rest is cut)."""

DENIED_CAUSE = "denied"
UNANSWERED_CAUSE = "not approved in time"
REPEATED_CAUSE = "repeated call, not run"
UNKNOWN_CAUSE = "no such tool"
STOPPED_CAUSE = "stopped"

_CLAUSE_END = re.compile(r"[;\n]|\.\s|\s\(")
_SDK_PREFIX = re.compile(r"^Error executing tool \S+: ")
"""How the MCP SDK's server words a tool that raised (the name is on the line already)."""


def running_line(name: str) -> str:
    return f"⏳ {name}…"


def done_line(name: str, seconds: float) -> str:
    """``✓ name 0.4 s``: the run took ``seconds``, shown to one decimal."""
    return f"✓ {name} {max(seconds, 0.0):.1f} s"


def failed_line(name: str, cause: str, redact: Callable[[str], str]) -> str:
    """``✗ name: cause``, the cause redacted by ``redact`` (the policy's ``redact_line``) before
    it is shortened (:func:`short_cause`)."""
    return f"✗ {name}: {short_cause(redact(cause))}"


def short_cause(cause: str) -> str:
    """The first clause of ``cause`` (up to ``;``, a sentence end, `` (`` or a newline; the MCP
    SDK's ``Error executing tool NAME:`` dropped), at most :data:`CAUSE_CHARS` characters;
    ``failed`` when nothing is left."""
    text = _SDK_PREFIX.sub("", cause.strip())
    end = _CLAUSE_END.search(text)
    if end is not None and end.start() > 0:
        text = text[: end.start()]
    text = text.strip().rstrip(".:") or "failed"
    if len(text) > CAUSE_CHARS:
        text = text[: CAUSE_CHARS - 1]
        marker = text.rfind("[REDACTED")
        if marker >= 0 and "]" not in text[marker:]:  # never half a redaction marker
            text = text[:marker]
        text = text.rstrip() + "…"
    return text
