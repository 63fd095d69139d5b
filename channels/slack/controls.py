"""Block Kit controls (https://docs.slack.dev/reference/block-kit): the approval prompt with
Approve / Deny buttons and the Stop button of a running answer, and the presses waited for.
Pure: building blocks and matching presses.

A button's ``action_id`` names the control (:data:`APPROVE`, :data:`DENY`, :data:`STOP`) and
its ``value`` the prompt it belongs to (a fresh token per prompt), so a press of an old
prompt's button answers nothing. Who may press is the caller's decision (the asker of the
thread; see :mod:`channels.slack.adapter`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APPROVE",
    "DENY",
    "OUTCOME",
    "SECTION_MAX",
    "STOP",
    "approval_blocks",
    "section",
    "stop_blocks",
]

APPROVE = "relaybot_approve"
DENY = "relaybot_deny"
STOP = "relaybot_stop"
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
    return [{"type": "actions", "elements": [_button("Stop", STOP, token, "danger")]}]
