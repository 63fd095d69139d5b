"""Discord's wire vocabulary for the local peer: ids, objects, error answers, recorded requests.

Object shapes follow the Discord API reference (https://discord.com/developers/docs/resources/
message, .../resources/channel, .../resources/guild, .../resources/user), trimmed to the
fields discord.py 2.x reads. Error bodies are Discord's JSON error format
(https://discord.com/developers/docs/reference#error-messages): ``{"code", "message"}`` plus,
for form errors (50035), ``errors`` nested by field down to ``_errors: [{code, message}]``.
Answers carry ``Content-Type: application/json`` exactly: discord.py's ``json_or_text``
compares the header with ``==``, so a ``; charset=utf-8`` suffix turns every body into a string.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

__all__ = [
    "APPLICATION_ID",
    "BOT_ID",
    "DEFAULT_TOKEN",
    "DISCORD_EPOCH_MS",
    "ApiError",
    "RateLimit",
    "Refused",
    "Request",
    "StoredMessage",
    "json_response",
    "now_iso",
    "snowflakes",
    "user_object",
]

DISCORD_EPOCH_MS = 1_420_070_400_000
"""The first second of 2015 (UTC), in ms since the Unix epoch: snowflakes count from it."""

BOT_ID = 900_000_000_000_000_001
APPLICATION_ID = BOT_ID  # for bots created since 2017 the application id is the bot's user id
DEFAULT_TOKEN = "OTAwMDAwMDAwMDAwMDAwMDAx.local.test-token"

_increment = itertools.count()


def snowflakes() -> int:
    """A fresh snowflake: ms since :data:`DISCORD_EPOCH_MS` << 22, a 12-bit counter below.

    Later calls give larger ids (the counter breaks ties within one ms, as Discord's does).
    """
    ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
    return (ms << 22) | (next(_increment) & 0x3FFFFF)


def now_iso() -> str:
    """The current UTC time as ISO 8601 with offset, as Discord writes timestamps."""
    return datetime.now(UTC).isoformat()


def user_object(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    """A user object (``username`` is the unique handle, ``global_name`` the display name)."""
    obj: dict[str, Any] = {
        "id": str(user_id),
        "username": name.lower(),
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "public_flags": 0,
    }
    if bot:
        obj.update(bot=True, verified=True, mfa_enabled=False, flags=0, email=None)
    return obj


def json_response(status: int, body: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    """``body`` as JSON with ``Content-Type`` exactly ``application/json`` (no charset)."""
    out = {"Content-Type": "application/json", **(headers or {})}
    return web.Response(status=status, body=json.dumps(body).encode(), headers=out)


@dataclass(frozen=True)
class ApiError:
    """A Discord error answer: HTTP ``status``, JSON ``code`` and ``message``, optional form
    ``errors`` (the nested ``{"field": {"_errors": [...]}}`` tree of 50035)."""

    status: int
    code: int
    message: str
    errors: Mapping[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.errors is not None:
            out["errors"] = dict(self.errors)
        return out

    @classmethod
    def invalid_form(cls, field_name: str, code: str, message: str) -> ApiError:
        """50035 "Invalid Form Body" with one field error (``field_name`` may be dotted)."""
        tree: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
        for part in reversed(field_name.split(".")):
            tree = {part: tree}
        return cls(400, 50035, "Invalid Form Body", tree)

    @classmethod
    def too_long(cls, limit: int = 2000) -> ApiError:
        """``content`` over ``limit`` characters (code points), as Discord answers it."""
        return cls.invalid_form(
            "content", "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length."
        )

    @classmethod
    def server_error(cls, status: int = 500) -> ApiError:
        return cls(status, 0, f"{status}: Internal Server Error")


class Refused(Exception):
    """Raised by a route handler: the request is answered with ``error``, unapplied."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(f"{error.status} {error.code} {error.message}")
        self.error = error


UNAUTHORIZED = ApiError(401, 0, "401: Unauthorized")
NOT_FOUND = ApiError(404, 0, "404: Not Found")
UNKNOWN_CHANNEL = ApiError(404, 10003, "Unknown Channel")
UNKNOWN_MESSAGE = ApiError(404, 10008, "Unknown Message")
UNKNOWN_INTERACTION = ApiError(404, 10062, "Unknown interaction")
EMPTY_MESSAGE = ApiError(400, 50006, "Cannot send an empty message")
NOT_AUTHOR = ApiError(403, 50005, "Cannot edit a message authored by another user")
ALREADY_ACKNOWLEDGED = ApiError(400, 40060, "Interaction has already been acknowledged.")
UNKNOWN_REFERENCE = ApiError.invalid_form(
    "message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"
)


@dataclass(frozen=True)
class RateLimit:
    """A 429 answer: ``retry_after`` in seconds (float, as in the body), ``global_`` for the
    global limit, ``scope`` for ``X-RateLimit-Scope``. ``via=False`` leaves out the ``Via``
    header, which is how discord.py recognises a Cloudflare ban (it raises at once)."""

    retry_after: float
    global_: bool = False
    scope: str = "user"
    via: bool = True

    def response(self) -> web.Response:
        body = {
            "message": "You are being rate limited.",
            "retry_after": self.retry_after,
            "global": self.global_,
        }
        headers = {
            "Retry-After": str(max(1, round(self.retry_after + 0.4999))),
            "X-RateLimit-Scope": self.scope,
        }
        if self.global_:
            headers["X-RateLimit-Global"] = "true"
        if self.via:
            headers["Via"] = "1.1 google"
        return json_response(429, body, headers)


@dataclass
class Request:
    """One REST request as it reached the peer.

    ``route`` is ``"METHOD /template"`` (e.g. ``"POST /channels/{channel_id}/messages"``),
    ``call`` its 1-based number among that route's requests; ``json`` the decoded JSON body
    (or a multipart request's ``payload_json``), ``None`` when there was none; ``files`` a
    multipart request's uploaded files by file name. Times are
    ``time.monotonic()`` seconds; ``answered_at`` stays None when the client went away first.
    """

    method: str
    path: str
    route: str
    call: int
    query: dict[str, str]
    json: Any
    at: float
    headers: dict[str, str] = field(default_factory=dict)
    answered_at: float | None = None
    status: int | None = None
    response: Any = None
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def allowed_mentions(self) -> dict[str, Any] | None:
        return self.json.get("allowed_mentions") if isinstance(self.json, dict) else None

    @property
    def content(self) -> str | None:
        return self.json.get("content") if isinstance(self.json, dict) else None


@dataclass
class StoredMessage:
    """A message in a channel as the peer keeps it. ``payload`` is the message object sent on
    the wire (kept current through edits); ``pinged_users``/``pinged_everyone`` say whom it
    notified under its ``allowed_mentions`` (Discord's rules: without the field everything
    mentioned pings; with it, only what ``parse``/``users``/``replied_user`` allow)."""

    payload: dict[str, Any]
    from_bot: bool
    edits: int = 0
    deleted: bool = False
    ephemeral: bool = False
    pinged_users: frozenset[int] = frozenset()
    pinged_everyone: bool = False

    @property
    def id(self) -> int:
        return int(self.payload["id"])

    @property
    def channel_id(self) -> int:
        return int(self.payload["channel_id"])

    @property
    def content(self) -> str:
        return str(self.payload.get("content", ""))

    @property
    def reference_id(self) -> int | None:
        ref = self.payload.get("message_reference")
        return int(ref["message_id"]) if ref and ref.get("message_id") else None
