"""discord.py's errors mapped to ours, once, at the seam (architecture §3 "Network errors").

discord.py's REST layer (``discord.http.HTTPClient.request``) already waits out a 429 that
carries a ``Via`` header (sleeping ``retry_after`` and trying again, up to 5 tries, while the
write stays in flight) and retries 500, 502, 504 and 524 answers and connection resets (sleeping
1, 3, 5, 7 and 9 s after its 5 tries). What reaches :func:`translate_error` is what it finally
raises; the delivery engine's own retries apply to that alone, so a 429 is never waited out
twice.

Discord error codes: https://discord.com/developers/docs/topics/opcodes-and-status-codes
(10003 Unknown Channel, 10008 Unknown Message, 50035 Invalid Form Body).
"""

from __future__ import annotations

import asyncio

import aiohttp
import discord

from channels.discord.kind import DISCORD_MAX_CONTENT_LENGTH
from channels.errors import (
    ChannelError,
    ChannelRateLimited,
    ChannelTimeout,
    ChannelUnavailable,
    ChannelWriteFailed,
    MessageGone,
    MessageTooLong,
)

__all__ = ["UNKNOWN_MESSAGE", "translate_error"]

UNKNOWN_MESSAGE = 10008
"""The message to edit or delete does not exist (deleted by a user or a moderator)."""
_INVALID_FORM_BODY = 50035


def _retry_after(exc: discord.HTTPException) -> float:
    """A 429 that discord.py did not wait out (no ``Via`` header: it takes it for a ban): the
    ``Retry-After`` header in seconds, else 1 s."""
    headers = getattr(exc.response, "headers", None) or {}
    try:
        return max(0.0, float(headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0


def translate_error(exc: BaseException, *, length: int = 0) -> ChannelError:
    """Map what a discord.py REST call raised to our error classes.

    Args:
        exc: a ``discord.DiscordException``, an ``aiohttp.ClientError``, ``OSError`` or
            ``asyncio.TimeoutError``.
        length: the length of the rejected content in characters (for :class:`MessageTooLong`).

    Returns:
        ``ChannelRateLimited`` (a 429 longer than discord.py's wait bound, or one it refused to
        wait out), ``MessageGone`` (10008), ``MessageTooLong`` (50035 on ``content``),
        ``ChannelUnavailable`` (a 5xx answer discord.py stopped retrying, a refused connection:
        the write did not land), ``ChannelTimeout`` (no answer, or the connection broke after the
        request was sent: it may have landed), else ``ChannelWriteFailed``.
    """
    if isinstance(exc, discord.RateLimited):
        return ChannelRateLimited(exc.retry_after)
    if isinstance(exc, discord.HTTPException):
        first_line = exc.text.splitlines()[0] if exc.text else ""
        described = f"{exc.status} (code {exc.code}): {first_line}"
        if exc.status == 429:
            return ChannelRateLimited(_retry_after(exc))
        if exc.code == UNKNOWN_MESSAGE:
            return MessageGone(described)
        if exc.code == _INVALID_FORM_BODY and "In content:" in exc.text:
            return MessageTooLong(DISCORD_MAX_CONTENT_LENGTH, length)
        if exc.status >= 500:
            return ChannelUnavailable(f"Discord answered {described}")
        return ChannelWriteFailed(f"Discord refused the write: {described}")
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return ChannelUnavailable(f"cannot reach Discord: {exc}")
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return ChannelTimeout("no answer from Discord in time")
    if isinstance(exc, aiohttp.ClientError | OSError):
        return ChannelTimeout(f"the connection to Discord failed during the request: {exc}")
    return ChannelWriteFailed(f"{type(exc).__name__}: {exc}")
