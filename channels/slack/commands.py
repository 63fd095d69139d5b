"""The commands of :data:`channels.base.COMMAND_MENU` as Slack slash commands. Pure.

A Slack app cannot register its slash commands through the bot token: they are declared in the
app's settings (**Slash Commands**) or its manifest (``features.slash_commands``,
https://docs.slack.dev/reference/app-manifest), which :func:`manifest_commands` gives and the
README's table lists (:func:`readme_table`; ``tests/test_slack_units.py`` keeps them equal).
Slack delivers an invocation (Socket Mode ``slash_commands``, or HTTP) with the command and its
text; the channel acknowledges it at once (Slack wants an answer within 3 s) with an ephemeral
echo only the user sees, and it reaches the orchestrator as the text the user could have typed
(:func:`chat_command`: ``/model smart``), so it behaves as the text command does.

Slack keeps some names for itself (``/status``) and one workspace may hold other apps' commands
of the same name, so a command may be declared with a prefix: ``/WORD-NAME`` (``/ai-status``)
is the chat command ``/NAME`` when NAME is in the menu.
"""

from __future__ import annotations

from typing import Any

from channels.base import COMMAND_MENU

__all__ = [
    "MENU_NAMES",
    "RESERVED",
    "chat_command",
    "declared_name",
    "manifest_commands",
    "readme_table",
]

MENU_NAMES = frozenset(name for name, _, _ in COMMAND_MENU)
"""The chat commands' names (without ``/``)."""

RESERVED = frozenset({"status"})
"""Names Slack keeps for its own slash commands (declare them with a prefix)."""


def chat_command(command: str, text: str = "") -> str:
    """The chat command text of a slash command ``command`` (``/ai-model``) with its ``text``
    (``smart``): ``/model smart``. A name not in the menu passes through as it is."""
    name = command.strip().removeprefix("/")
    if name not in MENU_NAMES:
        _, dash, suffix = name.rpartition("-")
        if dash and suffix in MENU_NAMES:
            name = suffix
    return f"/{name} {text.strip()}".strip()


def declared_name(name: str, prefix: str = "ai-") -> str:
    """The slash command to declare for the menu command ``name``: prefixed where Slack keeps
    the name."""
    return f"/{prefix}{name}" if name in RESERVED else f"/{name}"


def manifest_commands() -> list[dict[str, Any]]:
    """The app manifest's ``features.slash_commands`` entries (Socket Mode: no ``url``)."""
    entries: list[dict[str, Any]] = []
    for name, description, argument in COMMAND_MENU:
        entry: dict[str, Any] = {
            "command": declared_name(name),
            "description": description,
            "should_escape": False,
        }
        if argument is not None:
            entry["usage_hint"] = f"[{argument}]"
        entries.append(entry)
    return entries


def readme_table() -> str:
    """The README's table of the slash commands to declare (Markdown)."""
    rows = ["| Slash command | Usage hint | Description |", "|---|---|---|"]
    for entry in manifest_commands():
        hint = entry.get("usage_hint", "")
        rows.append(f"| `{entry['command']}` | {hint and f'`{hint}`'} | {entry['description']} |")
    return "\n".join(rows)
