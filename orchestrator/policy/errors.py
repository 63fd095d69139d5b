"""Errors of the outbound policy.

::

    PolicyError (ValueError)     the policy section cannot be put to use: a hook that cannot be
                                 imported, a secret pattern that does not compile
"""

from __future__ import annotations

__all__ = ["PolicyError"]


class PolicyError(ValueError):
    """The ``policy`` config section cannot be put to use.

    Attributes:
        key: the config key path at fault, e.g. ``policy.on_message_sending``.
        message: what is wrong, without any secret.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message
