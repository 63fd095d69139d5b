"""The ``relaybot`` command line's grammar: every command, its options and its ``--help`` text
(:func:`build_parser`). What each command does is in :mod:`orchestrator.cli`."""

from __future__ import annotations

import argparse
from importlib import metadata

__all__ = ["build_parser"]


_DESCRIPTION = """\
relaybot streams large-language-model answers into chat channels (Telegram, Matrix, Discord,
Slack, a web page, an OpenAI-compatible API, the terminal): throttled in-place edits or one
message per paragraph, tool calls between model turns, and no secret ever visible.

Start with `relaybot run`: with no config file it chats in this terminal and on a web page on
this machine (its address is printed), with OpenAI when OPENAI_API_KEY is set, else Anthropic
when ANTHROPIC_API_KEY is set, else a built-in demo model.
"""

_EPILOG = """\
exit codes: 0 normal end (also after SIGINT/SIGTERM); 1 a piped console run could not produce
an answer; 2 a bad config file or bad arguments, a store that cannot be written, or every
channel refused for good (a rejected token).
Run `relaybot COMMAND --help` for the options of a command."""

_RUN_DESCRIPTION = """\
Start every channel of the config file and answer messages until SIGINT or SIGTERM; running
answers then get up to 30 s to finish (a second signal cuts that short). A channel that cannot
start because its server is unreachable is retried with backoff (1 s doubling to 60 s) for as
long as the bot runs, even when it is the only one; when every channel failed for good (a
rejected token) the exit code is 2. SIGHUP reads the config file again: changed channels and
providers restart, the others keep their running answers; a file that does not validate is
logged in one line and the running config stays.

Without --config and RELAYBOT_CONFIG no file is looked up: the embedded default runs the console
channel (this terminal; /help lists its commands and keys) and a web page on a free loopback
port (its address is printed) with
  OpenAI     when OPENAI_API_KEY is set (model $OPENAI_MODEL, default gpt-4.1-mini;
             OPENAI_BASE_URL overrides the API, and without OPENAI_MODEL the first model
             that server lists is used and named on stderr),
  Anthropic  else when ANTHROPIC_API_KEY is set (model $ANTHROPIC_MODEL, default
             claude-haiku-4-5; ANTHROPIC_BASE_URL overrides the API),
  a demo     otherwise: a built-in demo model on 127.0.0.1 with canned answers,
and keeps the conversation in $XDG_DATA_HOME/relaybot/relaybot.db (default
~/.local/share/relaybot/relaybot.db); /reset in the chat deletes it.

Piped input (`echo hi | relaybot run`) prints only the answers and exits at the end of input:
0, or 1 when an answer could not be produced (the cause in one line on stderr)."""

_CHECK_DESCRIPTION = """\
Validate a config file as `relaybot run` would use it: the schema, the tool names, the
on_message_sending hook (it is imported) and the secret patterns. Every problem is printed in one
pass as FILE:LINE: key.path: message, without ever showing a value; then the exit code is 2.
The store must be writable where storage.path puts it (a relative path is in $STATE_DIRECTORY,
else $XDG_DATA_HOME/relaybot). Warning lines: a channel kind this version cannot start, an
absent or empty allowed_users (nobody could talk to the bot), a $NAME without braces. A valid
file prints FILE: ok and exits 0."""

_TOOLS_DESCRIPTION = """\
List every tool `relaybot run` would offer the model, from the same config: the built-in tools
of agent.tools and the tools of each agent.mcp_servers server (started, asked, stopped again).
One line per tool: its name, built-in or mcp:SERVER, "approval" when require_approval covers it,
and its description. Exit 0; 1 when a server did not start or a require_approval name is no
tool's; 2 for a bad config file."""

_SCHEMA_DESCRIPTION = """\
Print the JSON Schema (draft 2020-12) of the config file, e.g. for an editor's YAML language
server."""


_DOCTOR_DESCRIPTION = """\
Check online, one line each with ✓ or ✗ and what to do, what `relaybot run` would use: every
channel's credentials (Telegram getMe, Discord users/@me, Matrix whoami), every provider's key
and model (its models list, or one tiny request), the store (connect, migrate, write one row)
and the ops port (server.listen: can it be bound). --store-only checks only the store and reads
only the storage section of the file, so the other sections' secrets need not be set.
Exit 0 when every check passed, 1 when one failed, 2 for a bad config file."""


_MIGRATE_DESCRIPTION = """\
Copy one store into another: conversations, run records, waiting messages, channel state and the
update ids already seen, e.g. from the SQLite file into the PostgreSQL server that several
instances will share. The destination's schema is created first; a destination that already
holds history or run records is refused. URLs: sqlite:///PATH (three slashes, then the path:
sqlite:////var/lib/relaybot/relaybot.db is absolute, sqlite:///x.db relative) or
postgresql://USER@HOST:PORT/DB, the password in PGPASSWORD. Stop relaybot first.
Exit 0 after the copy, 1 when it failed (one line on stderr), 2 for a bad URL."""


def _version() -> str:
    try:
        return metadata.version("relaybot")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _add_config(parser: argparse.ArgumentParser) -> None:
    """The ``--config FILE`` option of a command that reads the whole config."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the YAML config file (default: $RELAYBOT_CONFIG, else the embedded default)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``relaybot``: one sub-parser per command (``args.command``)."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="relaybot", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=raw
    )
    parser.add_argument(
        "--version", action="version", version=f"relaybot {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="serve the configured chat channels (default: a chat in this terminal)",
        description=_RUN_DESCRIPTION,
        formatter_class=raw,
    )
    _add_config(run)
    run.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log lines on stderr: readable text (default) or one JSON object per line",
    )
    run.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=None,
        help="the least severe log lines shown (default: info; warning in an interactive console)",
    )
    check = sub.add_parser(
        "check-config",
        help="validate a config file: exit 0, or print every problem and exit 2",
        description=_CHECK_DESCRIPTION,
        formatter_class=raw,
    )
    check.add_argument("file", metavar="FILE", help="the YAML config file to check")
    sub.add_parser(
        "schema",
        help="print the JSON Schema of the config file",
        description=_SCHEMA_DESCRIPTION,
        formatter_class=raw,
    )
    tools = sub.add_parser(
        "tools",
        help="list every tool the bot would offer the model (built-in and MCP)",
        description=_TOOLS_DESCRIPTION,
        formatter_class=raw,
    )
    _add_config(tools)
    doctor = sub.add_parser(
        "doctor",
        help="check online what the config names: channels, providers, store, ops port",
        description=_DOCTOR_DESCRIPTION,
        formatter_class=raw,
    )
    _add_config(doctor)
    doctor.add_argument(
        "--store-only",
        action="store_true",
        help="check only the store; read only the storage section of the file",
    )
    migrate = sub.add_parser(
        "migrate-store",
        help="copy conversations and run records from one store to another",
        description=_MIGRATE_DESCRIPTION,
        formatter_class=raw,
    )
    migrate.add_argument(
        "--from", dest="source", required=True, metavar="URL", help="the store read"
    )
    migrate.add_argument(
        "--to", dest="destination", required=True, metavar="URL", help="the store written"
    )
    from orchestrator.ops import runs_cli

    runs_cli.add_parser(sub)
    from orchestrator.ops import usage_cli

    usage_cli.add_parser(sub)
    return parser
