"""``/stop``, ``/reset`` and ``/help`` as Discord application commands (slash commands).

They are registered globally once the bot is connected (one ``PUT
/applications/{application.id}/commands``, which replaces the bot's global commands; Discord may
take a while to show new ones in clients). An invocation is acknowledged at once, with an
ephemeral line only the user sees (Discord wants an answer within 3 s), and reaches the
orchestrator as the same text the user could have typed (``/stop``), so the commands behave as
the text commands do: ``/stop`` ends the running answer of that conversation, ``/reset`` forgets
it.

Application commands: https://discord.com/developers/docs/interactions/application-commands
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import app_commands

__all__ = ["COMMANDS", "CommandHandler", "command_tree"]

COMMANDS: tuple[tuple[str, str], ...] = (
    ("stop", "Stop the answer being written"),
    ("reset", "Forget this conversation"),
    ("help", "Say hello and list the commands"),
)
"""``(name, description)`` of each registered command."""

CommandHandler = Callable[[discord.Interaction[Any], str], Awaitable[None]]
"""Called with the interaction and the command's name (``"stop"``)."""


def _command(
    name: str, description: str, handler: CommandHandler
) -> app_commands.Command[Any, ..., None]:
    async def invoked(interaction: discord.Interaction[Any]) -> None:
        await handler(interaction, name)

    return app_commands.Command(name=name, description=description, callback=invoked)


def command_tree(client: discord.Client, handler: CommandHandler) -> app_commands.CommandTree[Any]:
    """The client's command tree holding :data:`COMMANDS`, each calling ``handler``. Build it
    before the client connects (discord.py routes interactions to the tree it knows)."""
    tree: app_commands.CommandTree[Any] = app_commands.CommandTree(client)
    for name, description in COMMANDS:
        tree.add_command(_command(name, description, handler))
    return tree
