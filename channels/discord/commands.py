"""The commands of :data:`channels.base.COMMAND_MENU` as Discord application commands (slash
commands); one with an argument (``/model NAME``, ``/system TEXT``) takes it as an optional
string option.

They are registered globally once the bot is connected (one ``PUT
/applications/{application.id}/commands``, which replaces the bot's global commands; Discord may
take a while to show new ones in clients). An invocation is acknowledged at once, with an
ephemeral line only the user sees (Discord wants an answer within 3 s), and reaches the
orchestrator as the same text the user could have typed (``/stop``, ``/model smart``), so the
commands behave as the text commands do: ``/stop`` ends the running answer of that conversation,
``/reset`` forgets it.

Application commands: https://discord.com/developers/docs/interactions/application-commands
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import app_commands

from channels.base import COMMAND_MENU

__all__ = ["COMMANDS", "CommandHandler", "command_tree"]

COMMANDS: tuple[tuple[str, str], ...] = tuple((name, text) for name, text, _ in COMMAND_MENU)
"""``(name, description)`` of each registered command."""

CommandHandler = Callable[[discord.Interaction[Any], str], Awaitable[None]]
"""Called with the interaction and the command's text without its ``/`` (``"stop"``,
``"model smart"``)."""


def _command(
    name: str, description: str, argument: str | None, handler: CommandHandler
) -> app_commands.Command[Any, ..., None]:
    if argument is None:

        async def invoked(interaction: discord.Interaction[Any]) -> None:
            await handler(interaction, name)

        return app_commands.Command(name=name, description=description, callback=invoked)

    async def with_argument(interaction: discord.Interaction[Any], value: str = "") -> None:
        await handler(interaction, f"{name} {value}".strip())

    described = app_commands.describe(value=f"the {argument}")(with_argument)
    return app_commands.Command(name=name, description=description, callback=described)


def command_tree(client: discord.Client, handler: CommandHandler) -> app_commands.CommandTree[Any]:
    """The client's command tree holding :data:`COMMANDS`, each calling ``handler``. Build it
    before the client connects (discord.py routes interactions to the tree it knows)."""
    tree: app_commands.CommandTree[Any] = app_commands.CommandTree(client)
    for name, description, argument in COMMAND_MENU:
        tree.add_command(_command(name, description, argument, handler))
    return tree
