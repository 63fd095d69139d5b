"""Slack's errors as ours (architecture §3): one table, used at the adapter.

A Web API method answers ``{"ok": false, "error": CODE}`` (slack_sdk raises ``SlackApiError``
with the response) or HTTP 429 with ``Retry-After`` in seconds, counted per method and
workspace by the method's rate-limit tier (https://docs.slack.dev/apis/web-api/rate-limits):
the engine waits that long, so the adapter never retries itself (slack_sdk's default retry
handlers retry only a refused connection). Mapping:

    ratelimited (HTTP 429)                 ChannelRateLimited(Retry-After, default 1 s)
    msg_too_long                           MessageTooLong
    message_not_found                      MessageGone
    channel_not_found, is_archived,
    thread_not_found                       DestinationGone
    not_in_channel                         DestinationGone (says: invite the bot)
    invalid_auth, not_authed,
    account_inactive, token_revoked        ChannelWriteFailed (says: check bot_token)
    HTTP 5xx, internal_error, fatal_error,
    service_unavailable, request_timeout   ChannelUnavailable (did not land)
    a timeout                              ChannelTimeout (may have landed)
    a refused connection                   ChannelUnavailable
    anything else                          ChannelWriteFailed(code)
"""

from __future__ import annotations

import asyncio

import aiohttp
from slack_sdk.errors import SlackApiError

from channels.errors import (
    ChannelError,
    ChannelRateLimited,
    ChannelTimeout,
    ChannelUnavailable,
    ChannelWriteFailed,
    DestinationGone,
    MessageGone,
    MessageTooLong,
)

__all__ = ["AUTH_ERRORS", "NETWORK_ERRORS", "NO_STREAMING", "error_code", "translate_error"]

AUTH_ERRORS = frozenset({"invalid_auth", "not_authed", "account_inactive", "token_revoked"})
"""Codes meaning the token is refused: retrying cannot help."""

NO_STREAMING = frozenset(
    {
        *("unknown_method", "not_allowed_token_type", "missing_scope", "feature_not_enabled"),
        *("channel_type_not_supported", "method_not_supported_for_channel_type"),
    }
)
"""``chat.startStream`` codes meaning this workspace or token cannot stream (``auto`` then
edits instead)."""

_GONE = frozenset({"channel_not_found", "is_archived", "thread_not_found"})
_UNAVAILABLE = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)

NETWORK_ERRORS = (SlackApiError, aiohttp.ClientError, OSError, asyncio.TimeoutError)
"""What a Web API call raises besides our own errors."""


def error_code(exc: SlackApiError) -> str:
    """The ``error`` of Slack's answer (``""`` when it had none)."""
    data = exc.response.data if isinstance(exc.response.data, dict) else {}
    return str(data.get("error") or "")


def translate_error(exc: BaseException, *, limit: int, length: int = 0) -> ChannelError:
    """Our error for ``exc`` (module docstring); ``limit`` and ``length`` in characters."""
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return ChannelTimeout("Slack did not answer in time")
    if not isinstance(exc, SlackApiError):
        return ChannelUnavailable(f"cannot reach the Slack API: {exc}")
    code, status = error_code(exc), exc.response.status_code
    if status == 429 or code == "ratelimited":
        retry_after = exc.response.headers.get("Retry-After", "1")
        try:
            seconds = max(float(retry_after), 0.0)
        except ValueError:
            seconds = 1.0
        return ChannelRateLimited(seconds)
    if code == "msg_too_long":
        return MessageTooLong(limit, length)
    if code == "message_not_found":
        return MessageGone("the message was deleted")
    if code in _GONE:
        return DestinationGone(f"the Slack conversation is gone ({code})")
    if code == "not_in_channel":
        return DestinationGone("the bot is not in this channel: invite it (/invite @the-bot)")
    if code in AUTH_ERRORS:
        return ChannelWriteFailed(f"Slack refused the bot token ({code}): check bot_token")
    if status >= 500 or code in _UNAVAILABLE:
        return ChannelUnavailable(f"Slack is unavailable ({code or status})")
    return ChannelWriteFailed(f"Slack refused the write: {code or status}")
