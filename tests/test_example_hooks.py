"""The shipped example hook, loaded as the example config names it."""

from __future__ import annotations

from config.models import PolicyConfig
from orchestrator.policy import OutboundPolicy
from tests.policy_hooks import guard_here


def test_example_hook_masks_email_addresses_once_per_piece() -> None:
    policy = OutboundPolicy.from_config(
        PolicyConfig(on_message_sending="orchestrator.policy.example_hooks:mask_email_addresses")
    )
    reply = policy.new_reply("tg", "1")
    assert guard_here(reply, "Write to ada@example.org today.") == "Write to [email] today."
    assert guard_here(reply, "No address here.") == "No address here."
