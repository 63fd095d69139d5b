"""Checks made after schema validation, reported like schema errors (architecture §6).

Some problems can only be found by code outside this package: a tool name is checked against the
tool registry, a hook path by importing it, a channel kind by looking for its adapter. The
caller (``relaybot check-config`` and ``relaybot run``) hands such checks to
:func:`config.loader.load_config`; each names the section it looks at, so it runs as soon as that
section is valid on its own — also when other sections have errors, and every problem of the file
is reported in one pass, each at its ``FILE:LINE``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from config.errors import ConfigIssue, Loc, format_path
from config.source import SourceDocument

__all__ = ["CheckResult", "SectionCheck", "run_checks"]

CheckResult = Iterable[tuple[Loc, str]]
"""``(loc, message)`` pairs; ``loc`` is relative to the checked section. A message never quotes
a value of the file (the line and key path say which one is meant)."""

_MISSING = object()


@dataclass(frozen=True, slots=True)
class SectionCheck:
    """One check of one section of the file.

    Attributes:
        loc: the section's key path, e.g. ``("agent", "tools")``.
        shape: the section's type, as pydantic validates it (``list[str]``, ``PolicyConfig``);
            the check runs only when the section is present and valid as this type.
        check: called with the validated section; yields the problems found.
        warning: the problems do not make the file unusable; they are reported as
            ``warning:`` lines and the file still loads.
    """

    loc: Loc
    shape: Any
    check: Callable[[Any], CheckResult]
    warning: bool = False


def run_checks(
    doc: SourceDocument, checks: Sequence[SectionCheck], *, source_name: str
) -> Iterator[ConfigIssue]:
    """Run every check whose section is present and valid on its own.

    Args:
        doc: the document as read (lines, failed paths).
        checks: the checks, in order.
        source_name: the ``FILE`` of each issue.
    """
    for section in checks:
        value = _at(doc.data, section.loc)
        if value is _MISSING or any(section.loc[: len(f)] == f for f in doc.failed):
            continue
        try:
            validated = TypeAdapter(section.shape).validate_python(value)
        except ValidationError:
            continue  # the schema errors already say what is wrong here
        for relative, message in section.check(validated):
            loc = (*section.loc, *relative)
            yield ConfigIssue(
                source_name, doc.line_of(loc), format_path(loc), message, warning=section.warning
            )


def _at(data: Any, loc: Loc) -> Any:
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return _MISSING
    return data
