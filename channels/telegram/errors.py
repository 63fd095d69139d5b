"""Telegram's errors mapped to ours, once, at the seam (architecture §3 "Network errors").

python-telegram-bot capitalises the Bot API's descriptions and Telegram appends details, so
descriptions are matched case-insensitively by prefix.
"""

from __future__ import annotations

import datetime as dtm
import logging
import warnings

from telegram.error import (
    BadRequest,
    ChatMigrated,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from channels.errors import (
    ChannelError,
    ChannelRateLimited,
    ChannelTimeout,
    ChannelUnavailable,
    ChannelWriteFailed,
    ChatMoved,
    DestinationGone,
    MessageGone,
    MessageNotModified,
    MessageTooLong,
)
from channels.telegram.kind import TELEGRAM_MAX_TEXT_LENGTH

__all__ = ["is_parse_error", "quiet_rate_limiter_log", "translate_error"]

_GONE = ("message to edit not found", "message to delete not found", "message can't be edited")
_DESTINATION_GONE = ("message thread not found",)
"""The forum topic was deleted (or closed to the bot): no write reaches it any more."""


def _description(exc: TelegramError) -> str:
    text = str(exc).strip().lower()
    return text.removeprefix("bad request: ")


def translate_error(exc: TelegramError, *, length: int = 0) -> ChannelError:
    """Map a python-telegram-bot error to ours (architecture §3), once, at the seam.

    Args:
        exc: what PTB raised.
        length: the visible length of the rejected text, in UTF-16 code units (for
            :class:`MessageTooLong`).
    """
    if isinstance(exc, RetryAfter):
        with warnings.catch_warnings():  # int vs timedelta: PTB warns on the int form
            warnings.simplefilter("ignore")
            value: int | float | dtm.timedelta = exc.retry_after
        seconds = value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)
        return ChannelRateLimited(seconds)
    if isinstance(exc, ChatMigrated):  # 400 with parameters.migrate_to_chat_id
        return ChatMoved(str(exc.new_chat_id), f"the group became a supergroup: {exc}")
    if isinstance(exc, TimedOut):
        return ChannelTimeout(f"no answer from the Bot API in time: {exc}")
    text = _description(exc)
    if isinstance(exc, BadRequest):
        if text.startswith("message is not modified"):
            return MessageNotModified(str(exc))
        if text.startswith(_DESTINATION_GONE):
            return DestinationGone(str(exc))
        if text.startswith(_GONE):
            return MessageGone(str(exc))
        if text.startswith("message is too long"):
            return MessageTooLong(TELEGRAM_MAX_TEXT_LENGTH, length)
    elif type(exc) is NetworkError:
        # PTB raises a bare NetworkError for an error answer other than 400/401/403/404/409 (a
        # 5xx: the server refused the write) and, as "httpx.<Error>: ...", for a transport
        # failure. A refused connection did not land; a connection lost after the request was
        # sent may have (architecture §3 "Network errors").
        cause = str(exc)
        if not cause.startswith("httpx.") or cause.startswith("httpx.ConnectError"):
            return ChannelUnavailable(f"{type(exc).__name__}: {exc}")
        return ChannelTimeout(f"the connection failed during the request: {exc}")
    return ChannelWriteFailed(f"{type(exc).__name__}: {exc}")


def is_parse_error(exc: TelegramError) -> bool:
    return isinstance(exc, BadRequest) and _description(exc).startswith("can't parse entities")


class _PassedOnRetryAfter(logging.Filter):
    """With ``max_retries=0`` AIORateLimiter logs every ``RetryAfter`` it passes on as an error
    with a traceback; each one is handled (the engine waits it out), so that record is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Rate limit hit after maximum of 0 retries")


def quiet_rate_limiter_log() -> None:
    logger = logging.getLogger("telegram.ext.AIORateLimiter")
    if not any(isinstance(f, _PassedOnRetryAfter) for f in logger.filters):
        logger.addFilter(_PassedOnRetryAfter())
