"""``relaybot runs``: the latest model rounds from the store, as a table or JSON (architecture §7).

The store is the one ``relaybot run`` would use: ``storage.url`` or ``storage.path`` of
``--config FILE`` (or ``$RELAYBOT_CONFIG``; only its ``storage`` section is read, by
:func:`config.loader.load_storage_config`, so the secrets of the other sections need not be set),
else the embedded default's
``$XDG_DATA_HOME/relaybot/relaybot.db``. It is only read; a missing SQLite store, or a
PostgreSQL server that cannot be reached, is one line and exit 1.

Columns: time (UTC, ``YYYY-MM-DD HH:MM:SS``), channel, chat (``chat/thread`` in a thread),
provider, attempts, TTFT (ms), tokens (input + output), writes (sends, edits and deletes), outcome.
``--json`` prints one JSON object per round instead, newest first, with every stored field
(``time`` in ISO 8601 UTC).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from config.storage import StorageConfig
from config.store_url import without_password
from orchestrator.ops.logsetup import iso_utc
from orchestrator.store import RoundRecord, Store

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Print the latest model rounds from the store as a table: time (UTC), channel, chat, provider,
attempts, time to first token, tokens, writes and outcome (ok, tool_calls, interrupted, refused,
stopped, undelivered). The store is storage.path of --config FILE ($RELAYBOT_CONFIG), else the
embedded default's $XDG_DATA_HOME/relaybot/relaybot.db."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``runs`` to the ``relaybot`` subcommands."""
    runs = sub.add_parser(
        "runs",
        help="print the latest model rounds from the store",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    runs.add_argument("--config", metavar="FILE", help="the config file naming the store")
    runs.add_argument(
        "--limit", type=_positive, default=20, metavar="N", help="how many rounds (default: 20)"
    )
    runs.add_argument("--chat", metavar="ID", help="only the rounds of this chat id")
    runs.add_argument(
        "--json", action="store_true", help="one JSON object per line instead of a table"
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _storage(config_file: str | None, environ: dict[str, str]) -> StorageConfig | Path | None:
    """The ``storage`` section of the config file, or the embedded default's store path when
    there is no file; None when the section is not valid (its problems were printed)."""
    from config.default import default_store_path
    from config.errors import ConfigError
    from config.loader import format_errors, load_storage_config

    path = config_file or environ.get("RELAYBOT_CONFIG")
    if not path:
        return default_store_path(environ)
    try:
        return load_storage_config(path, environ=environ)
    except ConfigError as exc:
        print(format_errors(exc), file=sys.stderr)
        return None


async def _shared_rounds(url: str, limit: int, chat: str | None) -> list[tuple[float, RoundRecord]]:
    from orchestrator.store import open_store

    store = await open_store(url, pool_size=1)
    try:
        return await store.recent_rounds(limit, chat)
    finally:
        await store.aclose()


def run(args: argparse.Namespace) -> int:
    """``relaybot runs``; returns the exit code (2: bad config, 1: no store)."""
    storage = _storage(args.config, dict(os.environ))
    if storage is None:
        return 2
    if isinstance(storage, StorageConfig) and storage.shared:
        import anyio

        try:
            rounds = anyio.run(_shared_rounds, storage.store_url(), args.limit, args.chat)
        except Exception as exc:  # psycopg.Error: one line
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            first = without_password(first, storage.store_url())
            print(f"relaybot: cannot read the store: {first}", file=sys.stderr)
            return 1
        return _print(args, rounds)
    path = storage if isinstance(storage, Path) else Path(storage.store_url()[len("sqlite:///") :])
    if not path.exists():
        print(f"relaybot: no store at {path} (nothing has run with it yet)", file=sys.stderr)
        return 1
    try:
        store = Store(path)
        try:
            rounds = store.recent_rounds(args.limit, args.chat)
        finally:
            store.close()
    except Exception as exc:  # sqlite3.Error, OSError: not a store, or not readable: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"relaybot: cannot read the store at {path}: {first}", file=sys.stderr)
        return 1
    return _print(args, rounds)


def _print(args: argparse.Namespace, rounds: list[tuple[float, RoundRecord]]) -> int:
    if args.json:
        for at, record in rounds:
            sys.stdout.write(json.dumps(_as_json(at, record)) + "\n")
    else:
        # Piped (not a terminal): wide enough that no cell is cut, whatever COLUMNS says.
        width = None if sys.stdout.isatty() else 200
        Console(highlight=False, width=width).print(_table(rounds))
    sys.stdout.flush()
    return 0


def _as_json(at: float, record: RoundRecord) -> dict[str, object]:
    return {
        "time": iso_utc(at),
        "channel": record.channel,
        "chat": record.chat_id,
        "thread": record.thread_id,
        "provider": record.provider,
        "attempts": record.attempts,
        "ttft_ms": record.ttft_ms,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "cached_tokens": record.cached_tokens,
        "writes": record.writes_sent,
        "finish_reason": record.finish_reason,
        "outcome": record.outcome,
    }


def _table(rounds: list[tuple[float, RoundRecord]]) -> Table:
    table = Table(title=f"latest {len(rounds)} round(s)", title_justify="left")
    for name in ("time (UTC)", "channel", "chat", "provider"):
        table.add_column(name, no_wrap=True)
    for name in ("attempts", "TTFT ms", "tokens", "writes"):
        table.add_column(name, justify="right")
    table.add_column("outcome", no_wrap=True, min_width=11)
    for at, record in rounds:
        chat = record.chat_id + (f"/{record.thread_id}" if record.thread_id else "")
        tokens = (record.input_tokens or 0) + (record.output_tokens or 0)
        table.add_row(
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)),
            record.channel,
            chat,
            record.provider or "-",
            str(record.attempts),
            "-" if record.ttft_ms is None else f"{record.ttft_ms:.0f}",
            str(tokens) if tokens else "-",
            str(record.writes_sent),
            record.outcome,
        )
    return table
