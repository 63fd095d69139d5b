"""Channel errors (architecture §3).

Hierarchy::

    ChannelError
    ├── ChannelRateLimited    wait retry_after seconds, counted from the platform's answer
    ├── MessageNotModified    the edit equals what is shown; callers treat it as success
    ├── MessageTooLong        over the platform limit (limit, length in the channel's unit)
    ├── MessageGone           the message to edit or delete no longer exists (the user deleted it)
    ├── ChannelTimeout        no answer in time; the write MAY have landed (never blindly re-send)
    ├── ChannelUnavailable    refused outright (5xx, connection refused): it did NOT land
    ├── ChannelStartError     the channel could not start (bad token, unreachable server)
    └── ChannelWriteFailed    any other rejected write (the message says what the platform said)
"""

from __future__ import annotations

__all__ = [
    "ChannelError",
    "ChannelRateLimited",
    "ChannelStartError",
    "ChannelTimeout",
    "ChannelUnavailable",
    "ChannelWriteFailed",
    "MessageGone",
    "MessageNotModified",
    "MessageTooLong",
]


class ChannelError(Exception):
    pass


class ChannelRateLimited(ChannelError):
    """``retry_after`` in seconds, counted from the moment the platform answered."""

    def __init__(self, retry_after: float, message: str = "") -> None:
        super().__init__(message or f"rate limited; retry after {retry_after:g} s")
        self.retry_after = retry_after


class MessageNotModified(ChannelError):
    pass


class MessageTooLong(ChannelError):
    """``limit`` and ``length`` are in the channel's unit (UTF-16 code units or characters)."""

    def __init__(self, limit: int, length: int) -> None:
        super().__init__(f"message is too long: {length} > {limit}")
        self.limit = limit
        self.length = length


class MessageGone(ChannelError):
    pass


class ChannelTimeout(ChannelError):
    pass


class ChannelUnavailable(ChannelError):
    """The platform refused the write outright (a 5xx answer, a refused connection): it did not
    land, so it may be retried as it is."""


class ChannelStartError(ChannelError):
    pass


class ChannelWriteFailed(ChannelError):
    pass
