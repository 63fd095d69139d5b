"""The config's JSON Schema and the channel capability table of the docs (architecture §6).

Both are generated from the models, so the docs cannot drift from the code: ``README.md`` holds
the table between ``<!-- capabilities:start -->`` and ``<!-- capabilities:end -->`` and a test
compares it with :func:`channel_capability_table`.

Usage::

    python -m config.schema                           # the JSON Schema
    python -m config.schema --table                   # the Markdown capability table
    python -m config.schema --update-readme README.md # rewrite the table between the markers
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from channels.registry import KINDS
from config.models import RelaybotConfig

__all__ = [
    "CAPABILITIES_END",
    "CAPABILITIES_START",
    "channel_capability_table",
    "channel_models",
    "json_schema",
    "main",
    "readme_capability_table",
    "replace_capability_table",
]

CAPABILITIES_START = "<!-- capabilities:start -->"
CAPABILITIES_END = "<!-- capabilities:end -->"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the config file, as ``relaybot schema`` prints it.

    Secrets appear as ``{"type": "string", "format": "password", "writeOnly": true}``.
    """
    return {"$schema": JSON_SCHEMA_DIALECT, **RelaybotConfig.model_json_schema(mode="validation")}


def channel_models() -> tuple[type[BaseModel], ...]:
    """The channel config models, in the order of the registry (:mod:`channels.registry`)."""
    return tuple(kind.config for kind in KINDS.values())


def channel_capability_table() -> str:
    """A Markdown table: per channel kind, its stream modes, defaults and message limit, read
    off the registry's kinds.

    Returns:
        The table, lines joined by ``\\n``, with a trailing newline.
    """
    rows = [
        "| Kind | Stream modes | Default | `draft_update_interval_ms` default | Message limit |",
        "|---|---|---|---|---|",
    ]
    for name, kind in KINDS.items():
        fields = kind.config.model_fields
        if "stream_mode" in fields:
            modes = ", ".join(f"`{m}`" for m in typing.get_args(fields["stream_mode"].annotation))
            modes = f"`stream_mode`: {modes}"
            default = f"`stream_mode: {fields['stream_mode'].default}`"
        elif "stream_drafts" in fields:
            modes = "`stream_drafts`: `true` (as `partial`), `false` (as `off`)"
            default = f"`stream_drafts: {str(fields['stream_drafts'].default).lower()}`"
        else:  # served over HTTP: always streamed as `partial`
            modes, default = "`partial`", "`partial`"
        interval = fields["draft_update_interval_ms"].default
        rows.append(f"| `{name}` | {modes} | {default} | {interval} | {kind.describe_limit()} |")
    return "\n".join(rows) + "\n"


def readme_capability_table(text: str) -> str | None:
    """The text between the capability markers of a README, or ``None`` without markers."""
    start = text.find(CAPABILITIES_START)
    end = text.find(CAPABILITIES_END, start + 1)
    if start < 0 or end < 0:
        return None
    return text[start + len(CAPABILITIES_START) : end]


def replace_capability_table(text: str) -> str:
    """``text`` with the generated table between the capability markers.

    Raises:
        ValueError: the markers are missing.
    """
    current = readme_capability_table(text)
    if current is None:
        raise ValueError(f"no {CAPABILITIES_START} ... {CAPABILITIES_END} block")
    start = text.index(CAPABILITIES_START) + len(CAPABILITIES_START)
    return text[:start] + "\n" + channel_capability_table() + text[start + len(current) :]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the JSON Schema, or the capability table with ``--table``. Returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m config.schema",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--table", action="store_true", help="print the capability table")
    parser.add_argument("--update-readme", metavar="FILE", help="rewrite the table in FILE")
    args = parser.parse_args(argv)
    if args.update_readme:
        path = Path(args.update_readme)
        path.write_text(replace_capability_table(path.read_text("utf-8")), encoding="utf-8")
    elif args.table:
        sys.stdout.write(channel_capability_table())
    else:
        sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
