"""``relaybot usage``: tokens and cost per user or per chat from the store (architecture §5
"Usage and cost", §7).

The store is the one ``relaybot runs`` reads (``storage`` of ``--config FILE`` or
``$RELAYBOT_CONFIG``, else the embedded default's). Sums are of the ``usage`` rows recorded since
``--since DATE`` (``YYYY-MM-DD``, UTC; default: the first of this month), per (channel, user)
with ``--by user`` (the default) or per (channel, chat) with ``--by chat``, most tokens first.
``--json`` prints one JSON object per line instead of the table. The cost is in the unit of
``providers.X.prices``; rows counted from our estimate are said so (``estimated`` rounds).
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import sys
import time
from pathlib import Path

from config.storage import StorageConfig
from config.store_url import without_password
from orchestrator.controls.usage import Grouping, group_usage, month_start, usage_report
from orchestrator.ops.runs_cli import _storage
from orchestrator.store.control_rows import UsageRecord

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Print the tokens and cost recorded per user (or per chat) since a date (default: the first of
this month, UTC), most tokens first. The store is storage of --config FILE ($RELAYBOT_CONFIG),
else the embedded default's $XDG_DATA_HOME/relaybot/relaybot.db."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``usage`` to the ``relaybot`` subcommands."""
    usage = sub.add_parser(
        "usage",
        help="print tokens and cost per user or chat from the store",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    usage.add_argument("--config", metavar="FILE", help="the config file naming the store")
    usage.add_argument(
        "--by", choices=("user", "chat"), default="user", help="sum per user (default) or chat"
    )
    usage.add_argument(
        "--since", type=_date, metavar="DATE", help="YYYY-MM-DD, UTC (default: this month)"
    )
    usage.add_argument(
        "--json", action="store_true", help="one JSON object per line instead of a table"
    )


def _date(text: str) -> float:
    try:
        parsed = time.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise argparse.ArgumentTypeError("expected a date as YYYY-MM-DD, e.g. 2026-12-01") from None
    return float(calendar.timegm(parsed))


async def _rows(url: str, since: float) -> list[UsageRecord]:
    from orchestrator.store import open_store

    store = await open_store(url, pool_size=1)
    try:
        return await store.controls.usage_rows(since)
    finally:
        await store.aclose()


def run(args: argparse.Namespace) -> int:
    """``relaybot usage``; returns the exit code (2: bad config, 1: no store)."""
    import anyio

    storage = _storage(args.config, dict(os.environ))
    if storage is None:
        return 2
    if isinstance(storage, StorageConfig) and storage.shared:
        url = storage.store_url()
    else:
        path = (
            storage if isinstance(storage, Path) else Path(storage.store_url()[len("sqlite:///") :])
        )
        if not path.exists():
            print(f"relaybot: no store at {path} (nothing has run with it yet)", file=sys.stderr)
            return 1
        url = f"sqlite:///{path}"
    since = args.since if args.since is not None else month_start(time.time())
    try:
        records = anyio.run(_rows, url, since)
    except Exception as exc:  # psycopg.Error, sqlite3.Error, OSError: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"relaybot: cannot read the store: {without_password(first, url)}", file=sys.stderr)
        return 1
    by: Grouping = args.by
    rows = group_usage(records, by)
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps({"by": by, **row.as_json()}) + "\n")
    else:
        day = time.strftime("%Y-%m-%d", time.gmtime(since))
        sys.stdout.write(f"usage since {day} (UTC), by {by}\n{usage_report(rows, by)}\n")
    sys.stdout.flush()
    return 0
