"""Approval prompts with buttons for the Discord channel (``discord.ui.View``, architecture §5).

A prompt message carries two buttons, ✅ Approve and ❌ Deny, with ``custom_id``\\ s unique to
that prompt. discord.py dispatches a press (INTERACTION_CREATE, component type 2) to the view's
callback; a press by a user who is not allowed is answered with an ephemeral "not allowed" and
changes nothing; the first allowed press edits the prompt to show the outcome, without buttons
(interaction callback type 7, UPDATE_MESSAGE), and ends the wait. The view times out after
``timeout`` seconds: then the answer is ``None`` and the caller edits the prompt itself.

Interactions: https://discord.com/developers/docs/interactions/receiving-and-responding
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import discord

__all__ = ["OUTCOME", "ApprovalView"]

_LOG = logging.getLogger("channels.discord_approval")

OUTCOME: dict[bool | None, str] = {
    True: "✅ Approved",
    False: "❌ Denied",
    None: "⌛ No answer: not approved",
}
"""The line added to the prompt once it is answered (or not)."""


class ApprovalView(discord.ui.View):
    """Two buttons; :attr:`answer` is True/False after an allowed press, None otherwise.

    Args:
        prompt: the prompt's text (the outcome is appended to it).
        timeout: seconds to wait for a press.
        allowed: whether a user id may answer.
        refusal: the orchestrator's word on a press by an allowed user (the asker or an
            admin answers): ``None`` to take it, else the line refusing it.
    """

    def __init__(
        self,
        prompt: str,
        *,
        timeout: float,
        allowed: Callable[[int], bool],
        refusal: Callable[[discord.Interaction[Any]], Awaitable[str | None]] | None = None,
    ) -> None:
        super().__init__(timeout=timeout)
        self.prompt = prompt
        self.answer: bool | None = None
        self._allowed = allowed
        self._refusal = refusal
        token = secrets.token_urlsafe(9)
        for label, style, choice in (
            ("✅ Approve", discord.ButtonStyle.success, True),
            ("❌ Deny", discord.ButtonStyle.danger, False),
        ):
            button: discord.ui.Button[ApprovalView] = discord.ui.Button(
                label=label, style=style, custom_id=f"approve:{token}:{'yn'[not choice]}"
            )
            button.callback = self._callback(choice)  # type: ignore[method-assign,assignment]
            self.add_item(button)

    def _callback(self, choice: bool) -> Callable[[discord.Interaction[Any]], Any]:
        async def pressed(interaction: discord.Interaction[Any]) -> None:
            await self._pressed(interaction, choice)

        return pressed

    async def _pressed(self, interaction: discord.Interaction[Any], choice: bool) -> None:
        try:
            if self.is_finished():
                await interaction.response.send_message(
                    "This request is no longer open.", ephemeral=True
                )
            elif not self._allowed(interaction.user.id):
                await interaction.response.send_message(
                    "You are not allowed to answer this request.", ephemeral=True
                )
            elif self._refusal is not None and (refused := await self._refusal(interaction)):
                await interaction.response.send_message(refused, ephemeral=True)
            else:
                self.answer = choice
                self.stop()
                await interaction.response.edit_message(
                    content=f"{self.prompt}\n\n{OUTCOME[choice]}",
                    view=None,
                    allowed_mentions=discord.AllowedMentions.none(),
                )
        except discord.HTTPException as exc:  # the answer stands; only the display failed
            _LOG.warning("answering an approval button press failed: %s", exc)
