"""Block Kit controls (https://docs.slack.dev/reference/block-kit): the approval prompt with
Approve / Deny buttons, the Stop button of a running answer and the Regenerate button of the
last one. Pure: building blocks.

A button's ``action_id`` names the control (:data:`APPROVE`, :data:`DENY`, :data:`STOP`,
:data:`REGENERATE`) and its ``value`` the prompt or answer it belongs to (a fresh token each),
so a press of an old button answers nothing (:mod:`channels.slack.buttons`). Who may press is
the orchestrator's decision (the asker or an admin).
"""

from __future__ import annotations

from typing import Any

from channels.controls import REGENERATE_LABEL, STOP_LABEL

__all__ = [
    "APPROVE",
    "DENY",
    "NOT_ALLOWED",
    "NO_LONGER_ACTIVE",
    "OUTCOME",
    "REGENERATE",
    "SECTION_MAX",
    "STOP",
    "approval_blocks",
    "regenerate_blocks",
    "section",
    "stop_blocks",
]

APPROVE = "relaybot_approve"
DENY = "relaybot_deny"
STOP = "relaybot_stop"
REGENERATE = "relaybot_regenerate"
NO_LONGER_ACTIVE = "This button is no longer active."
NOT_ALLOWED = "You are not allowed to use this button."
SECTION_MAX = 3000
"""Maximum ``text`` of a section block, in characters (Block Kit, section)."""

OUTCOME: dict[bool | None, str] = {
    True: "✅ Approved.",
    False: "❌ Denied.",
    None: "⌛ No answer in time: not approved.",
}


def section(text: str) -> dict[str, Any]:
    """A mrkdwn section of ``text`` (clipped to :data:`SECTION_MAX` characters)."""
    if len(text) > SECTION_MAX:
        text = text[: SECTION_MAX - 1] + "…"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _button(label: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
    }
    if style is not None:
        button["style"] = style
    return button


def approval_blocks(prompt: str, token: str) -> list[dict[str, Any]]:
    """The prompt (mrkdwn, escaped by the caller) and its two buttons."""
    buttons = [
        _button("Approve", APPROVE, token, "primary"),
        _button("Deny", DENY, token, "danger"),
    ]
    return [section(prompt), {"type": "actions", "elements": buttons}]


def stop_blocks(token: str) -> list[dict[str, Any]]:
    """The Stop button of a running answer."""
    return [{"type": "actions", "elements": [_button(STOP_LABEL, STOP, token, "danger")]}]


def regenerate_blocks(token: str) -> list[dict[str, Any]]:
    """The Regenerate button of the last answer."""
    return [{"type": "actions", "elements": [_button(REGENERATE_LABEL, REGENERATE, token)]}]
