"""The console's commands: which lines go to the bot as commands, and what the console answers
itself (``/help``, an unknown ``/word``). Pure: no I/O.

The bot's commands are the shared menu (:data:`channels.base.COMMAND_MENU`: ``/new``, ``/model``,
``/system``, ``/status``, ``/usage``, …, answered by the daemon, architecture §5 "Chat
controls") with ``/start`` and ``/regenerate``; ``/help`` is answered here with them and the
keys. Any other ``/word`` is answered "unknown command" instead of going to the model, and
``//text`` sends ``/text``.
"""

from __future__ import annotations

import re

from channels.base import COMMAND_MENU

__all__ = ["BOT_COMMANDS", "HELP_TEXT", "is_stop", "local_answer"]

_EXTRA = (("start", "Say hello"), ("regenerate", "Ask the last question again"))

BOT_COMMANDS = frozenset(
    {f"/{name}" for name, _, _ in COMMAND_MENU if name != "help"} | {f"/{n}" for n, _ in _EXTRA}
)
"""Commands passed on to the bot (the daemon answers them); ``/help`` is answered here."""


def _help_text() -> str:
    rows = [
        (f"/{name}" + (f" {argument.upper()}" if argument else ""), text)
        for name, text, argument in COMMAND_MENU
    ] + [(f"/{name}", text) for name, text in _EXTRA]
    width = max(len(command) for command, _ in rows) + 2
    commands = "\n".join(f"  {command.ljust(width)}{text}" for command, text in rows)
    return f"""\
Commands:
{commands}
Keys:
  Enter         send the line
  Ctrl-C        stop the running answer (at an empty prompt, or twice in 2 s: quit)
  Ctrl-D        quit (at an empty prompt)
  Up, Down      earlier lines (history); Ctrl-R searches them
  Ctrl-U        delete the line; Ctrl-L clears the screen
A line starting with // is sent as text starting with /."""


HELP_TEXT = _help_text()
"""What ``/help`` prints: every command of :data:`BOT_COMMANDS`, ``/help`` and the keys."""

_COMMAND = re.compile(r"/(?P<name>[A-Za-z0-9_]+)(?:@\S*)?")


def is_stop(text: str) -> bool:
    """Whether the line ``text`` is ``/stop`` (arguments and a ``@bot`` suffix allowed)."""
    match = _COMMAND.fullmatch(text.split(maxsplit=1)[0]) if text else None
    return match is not None and match.group("name").lower() == "stop"


def local_answer(text: str) -> str | None:
    """The answer to ``text`` made by the console itself, or None when it goes to the bot."""
    match = _COMMAND.fullmatch(text.split(maxsplit=1)[0])
    if match is None:
        return None  # not a command: a message (also "/usr/bin is ...")
    command = "/" + match.group("name").lower()
    if command == "/help":
        return HELP_TEXT
    if command in BOT_COMMANDS:
        return None
    return f"unknown command {command} — /help lists the commands (//text sends /text)"
