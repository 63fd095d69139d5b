"""The chat commands of the controls (architecture §5 "Chat controls"): ``/model``,
``/system``, ``/settings``, ``/status`` and ``/usage``. Each returns the one reply it gets;
a command a user may not give is refused with one line.

``/model`` and ``/system`` change the conversation's settings in the store (its thread's when
sent in a topic or thread), so every instance sharing the store and every later run uses them;
the roles of :mod:`orchestrator.chats.roles` say who may.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from channels.base import Channel, InboundMessage
from config.models import RelaybotConfig
from orchestrator.chats.roles import Presser, Roles, may_change_settings
from orchestrator.controls.settings import (
    MODEL,
    SYSTEM_PROMPT,
    model_alias,
    model_list,
    model_of,
    settings_text,
)
from orchestrator.controls.usage import day_start, month_start, totals_line
from orchestrator.store import ConversationStore
from orchestrator.turn.runner import TurnRunner

__all__ = ["CONTROL_COMMANDS", "NOT_ADMIN", "ChatCommands", "command_args"]

CONTROL_COMMANDS = frozenset({"/model", "/system", "/settings", "/status", "/usage"})
NOT_ADMIN = "⛔ Only an admin can change this chat's settings (the channel's admins list)."
_RESET_WORDS = frozenset({"reset", "default"})


def command_args(text: str) -> str:
    """What follows the command word: ``/model@bot smart`` → ``smart``."""
    parts = text.strip().split(maxsplit=1)
    return parts[1].strip() if len(parts) > 1 else ""


class ChatCommands:
    """Answers the control commands of every channel.

    Args:
        config: the current config (a reload may replace it).
        store: where the settings and usage are kept.
        turns: the turn loop (context fill, and the model chain of an alias).
    """

    def __init__(
        self, config: Callable[[], RelaybotConfig], store: ConversationStore, turns: TurnRunner
    ) -> None:
        self._config = config
        self._store = store
        self._turns = turns

    async def answer(self, channel: Channel, message: InboundMessage, command: str) -> str:
        """The reply to ``command`` (one of :data:`CONTROL_COMMANDS`) sent as ``message``."""
        args = command_args(message.text)
        where = (channel.name, message.chat_id, message.thread_id)
        settings = await self._store.controls.chat_settings(*where)
        config = self._config()
        if command == "/settings":
            return settings_text(settings, config)
        if command == "/status":
            return await self._status(channel, message, settings)
        if command == "/usage":
            return await self._usage(channel, message)
        if command == "/model" and not args:
            return model_list(settings, config)
        if command == "/system" and not args:
            return settings_text(settings, config).split("\n", 1)[1]
        roles = Roles(getattr(channel.config, "admins", ()))
        presser = Presser(message.sender_id, message.sender_handle)
        if not may_change_settings(roles, presser, is_direct=message.is_direct):
            return NOT_ADMIN
        if command == "/model":
            return await self._set_model(where, args, config)
        if args.lower() in _RESET_WORDS:
            await self._store.controls.set_chat_setting(*where, SYSTEM_PROMPT, None)
            return "System prompt reset to the configured one."
        await self._store.controls.set_chat_setting(*where, SYSTEM_PROMPT, args)
        return "System prompt set for this chat (/system reset restores the configured one)."

    async def _set_model(
        self, where: tuple[str, str, str | None], alias: str, config: RelaybotConfig
    ) -> str:
        if alias.lower() in _RESET_WORDS and alias not in config.agent.models:
            await self._store.controls.set_chat_setting(*where, MODEL, None)
            provider, model = model_of({}, config)
            return f"Model: {model} ({provider}), the configured default."
        if alias not in config.agent.models:
            offered = ", ".join(config.agent.models) or "none configured"
            return f"Unknown model {alias!r}: choose one of {offered} (/model lists them)."
        await self._store.controls.set_chat_setting(*where, MODEL, alias)
        provider, model = model_of({MODEL: alias}, config)
        return f"Model: {alias}, {model} ({provider})."

    async def _status(
        self, channel: Channel, message: InboundMessage, settings: dict[str, str]
    ) -> str:
        config = self._config()
        provider, model = model_of(settings, config)
        alias = model_alias(settings, config.agent)
        fill = await self._turns.context_fill(
            channel.name, message.chat_id, message.thread_id, alias
        )
        today = await self._store.controls.usage_totals(
            day_start(time.time()), channel=channel.name, chat_id=message.chat_id
        )
        key = (channel.name, message.chat_id, message.thread_id)
        running = "an answer is being written" if self._turns.running(key) else "idle"
        return (
            f"Model: {model} ({provider})\n"
            f"Context: {fill:.0%} of the budget\n"
            f"Tokens today in this chat: {today.tokens:,}\n"
            f"Now: {running}"
        )

    async def _usage(self, channel: Channel, message: InboundMessage) -> str:
        now = time.time()
        rows = self._store.controls
        lines = []
        for label, who in (
            ("You", {"user_id": message.sender_id}),
            ("This chat", {"chat_id": message.chat_id}),
        ):
            today = await rows.usage_totals(day_start(now), channel=channel.name, **who)
            month = await rows.usage_totals(month_start(now), channel=channel.name, **who)
            lines += [
                f"{label}:",
                totals_line("  today", today),
                totals_line("  this month", month),
            ]
        return "\n".join(lines)
