"""Example ``on_message_sending`` hooks (architecture §4), usable as they are from the config:

.. code-block:: yaml

    policy:
      on_message_sending: orchestrator.policy.example_hooks:mask_email_addresses

A hook is a plain function ``(channel, chat_id, text) -> str | None``: it returns the text to
send, or ``None`` to cancel that piece. It runs once per delivered piece, on text the redaction
window already redacted, and its output is redacted again.
"""

from __future__ import annotations

import re

__all__ = ["mask_email_addresses"]

_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")


def mask_email_addresses(channel: str, chat_id: str, text: str) -> str | None:
    """Replace e-mail addresses with ``[email]``."""
    return _EMAIL.sub("[email]", text)
