"""Errors of the outbound policy.

::

    PolicyError (ValueError)     the policy section cannot be put to use: a hook that cannot be
                                 imported, a secret pattern that does not compile
    HookFailed (Exception)       one call of the hook failed: it raised, returned neither text
                                 nor None, or its worker process died or could not start
    HookTimedOut (TimeoutError)  one call of the hook did not answer within its timeout (its
                                 worker process was killed)
"""

from __future__ import annotations

__all__ = ["HookFailed", "HookTimedOut", "PolicyError"]


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


class HookFailed(Exception):
    """One call of ``on_message_sending`` failed; the piece fails closed (architecture §4).

    Attributes:
        detail: what went wrong, one line (``"RuntimeError: …"`` for what the hook raised).
        trace: the hook's traceback as its worker formatted it (``""`` when it raised nothing).
    """

    def __init__(self, detail: str, trace: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.trace = trace


class HookTimedOut(TimeoutError):
    """One call of ``on_message_sending`` took longer than ``timeout_secs`` (seconds); its
    worker process was killed."""

    def __init__(self, timeout_secs: float) -> None:
        super().__init__(f"on_message_sending did not answer within {timeout_secs:g} s")
        self.timeout_secs = timeout_secs
