"""The channel-write boundary's one error table (architecture §3 "Network errors")."""

from __future__ import annotations

import pytest

from channels.errors import (
    ChannelError,
    ChannelRateLimited,
    ChannelStartError,
    ChannelTimeout,
    ChannelUnavailable,
    ChannelWriteFailed,
    ChatMoved,
    DestinationGone,
    MessageGone,
    MessageNotModified,
    MessageTooLong,
)
from orchestrator.delivery.driver import write_outcome


class _TopicDeleted(MessageGone):
    """A platform's own kind of gone message: an adapter's subclass."""


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (ChannelRateLimited(3.0), "rate_limited"),
        (MessageNotModified(), "not_modified"),
        (MessageTooLong(4096, 5000), "too_long"),
        (MessageGone(), "gone"),
        (_TopicDeleted(), "gone"),
        (ChatMoved("-100"), "moved"),
        (DestinationGone("thread deleted"), "unreachable"),
        (ChannelTimeout(), "timeout"),
        (ChannelUnavailable(), "refused"),
        (ChannelWriteFailed("bad request"), "failed"),
        (ChannelStartError("bad token"), "failed"),
        (ChannelError(), "failed"),
        (KeyError("an adapter's bug"), "failed"),
    ],
)
def test_each_error_class_has_one_outcome(exc: Exception, reason: str) -> None:
    assert write_outcome(exc) == reason
