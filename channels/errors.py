"""Channel errors (architecture §3).

Hierarchy::

    ChannelError
    ├── ChannelRateLimited    wait retry_after seconds, counted from the platform's answer
    ├── MessageNotModified    the edit equals what is shown; callers treat it as success
    ├── MessageTooLong        over the platform limit (limit, length in the channel's unit)
    ├── MessageGone           the message to edit or delete no longer exists (the user deleted it)
    ├── ChatMoved             the chat has a new id (a Telegram group became a supergroup)
    ├── DestinationGone       the chat or thread the reply goes to no longer exists
    ├── ChannelTimeout        no answer in time; the write MAY have landed (never blindly re-send)
    ├── ChannelUnavailable    refused outright (5xx, connection refused): it did NOT land
    ├── ChannelStartError     the channel could not start (bad token: permanent; unreachable server)
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
    "ChatMoved",
    "DestinationGone",
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


class ChatMoved(ChannelError):
    """The chat moved to ``new_chat_id`` (Telegram ``parameters.migrate_to_chat_id``: a group
    upgraded to a supergroup); the write did not land, and the old chat takes no more."""

    def __init__(self, new_chat_id: str, message: str = "") -> None:
        super().__init__(message or f"the chat moved to {new_chat_id}")
        self.new_chat_id = new_chat_id


class DestinationGone(ChannelError):
    """The chat or thread written to no longer exists (a deleted forum topic): nothing more of
    the reply can be delivered there."""


class ChannelTimeout(ChannelError):
    pass


class ChannelUnavailable(ChannelError):
    """The platform refused the write outright (a 5xx answer, a refused connection): it did not
    land, so it may be retried as it is."""


class ChannelStartError(ChannelError):
    """The channel could not start. ``permanent``: the cause will not go away by itself (a
    rejected token or credential), so the daemon does not retry; otherwise (server unreachable,
    5xx, a timeout) it retries with backoff (architecture §7)."""

    def __init__(self, message: str = "", *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class ChannelWriteFailed(ChannelError):
    pass
