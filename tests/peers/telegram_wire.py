"""The Bot API's wire vocabulary for the local peer: error answers, recorded calls, messages.

Error descriptions are Telegram's, byte for byte (``shared/fixtures/
telegram_bot_api_responses.json``; a test compares them). Parameters arrive as a query string,
a form (python-telegram-bot's way: strings as they are, anything else JSON-encoded), multipart
or a JSON body (https://core.telegram.org/bots/api#making-requests).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = [
    "BOT_USER",
    "CANT_BE_EDITED",
    "CHAT_NOT_FOUND",
    "DEFAULT_TOKEN",
    "DELETE_NOT_FOUND",
    "EDIT_NOT_FOUND",
    "NOT_FOUND",
    "NOT_MODIFIED",
    "POLLING_CONFLICT",
    "QUERY_INVALID",
    "TEXT_EMPTY",
    "THREAD_NOT_FOUND",
    "TOO_LONG",
    "UNAUTHORIZED",
    "WEBHOOK_CONFLICT",
    "ApiError",
    "BotMessage",
    "Call",
    "read_params",
]

DEFAULT_TOKEN = "4242:local-test-token"
BOT_USER: dict[str, Any] = {
    "id": 4242,
    "is_bot": True,
    "first_name": "Relay",
    "username": "relay_test_bot",
    "can_join_groups": True,
    "can_read_all_group_messages": False,
    "supports_inline_queries": False,
}


@dataclass(frozen=True)
class ApiError:
    """A Bot API error answer: HTTP ``status`` (also ``error_code``), ``description``,
    optional ``parameters`` (e.g. ``{"retry_after": 9}``, seconds)."""

    status: int
    description: str
    parameters: Mapping[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": False,
            "error_code": self.status,
            "description": self.description,
        }
        if self.parameters:
            out["parameters"] = dict(self.parameters)
        return out

    @classmethod
    def flood(cls, retry_after: int) -> ApiError:
        """429 flood control; ``retry_after`` in seconds."""
        description = f"Too Many Requests: retry after {retry_after}"
        return cls(429, description, {"retry_after": retry_after})

    @classmethod
    def cant_parse(cls, detail: str) -> ApiError:
        return cls(400, f"Bad Request: can't parse entities: {detail}")

    @classmethod
    def bad_request(cls, detail: str) -> ApiError:
        return cls(400, f"Bad Request: {detail}")

    @classmethod
    def migrated(cls, new_chat_id: int) -> ApiError:
        """A write to a group that became a supergroup (``parameters.migrate_to_chat_id``,
        https://core.telegram.org/bots/api#responseparameters)."""
        description = "Bad Request: group chat was upgraded to a supergroup chat"
        return cls(400, description, {"migrate_to_chat_id": new_chat_id})


NOT_MODIFIED = ApiError.bad_request(
    "message is not modified: specified new message content and reply markup are exactly the "
    "same as a current content and reply markup of the message"
)
TOO_LONG = ApiError.bad_request("message is too long")
TEXT_EMPTY = ApiError.bad_request("message text is empty")
EDIT_NOT_FOUND = ApiError.bad_request("message to edit not found")
DELETE_NOT_FOUND = ApiError.bad_request("message to delete not found")
CANT_BE_EDITED = ApiError.bad_request("message can't be edited")
CHAT_NOT_FOUND = ApiError.bad_request("chat not found")
THREAD_NOT_FOUND = ApiError.bad_request("message thread not found")
QUERY_INVALID = ApiError.bad_request(
    "query is too old and response timeout expired or query ID is invalid"
)
UNAUTHORIZED = ApiError(401, "Unauthorized")
NOT_FOUND = ApiError(404, "Not Found")
POLLING_CONFLICT = ApiError(
    409,
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running",
)
WEBHOOK_CONFLICT = ApiError(
    409,
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to "
    "delete the webhook first",
)


@dataclass
class Call:
    """One request. Times are ``time.monotonic()`` seconds; ``answered_at`` is None while
    pending and when the client went away first (``abandoned``)."""

    method: str
    params: dict[str, Any]
    at: float
    answered_at: float | None = None
    status: int | None = None
    result: Any = None
    error: str | None = None
    abandoned: bool = False

    @property
    def chat_id(self) -> int | str | None:
        return self.params.get("chat_id")


@dataclass
class BotMessage:
    """A message in a chat: ``text`` is the visible text, ``entities`` Bot API dicts."""

    chat_id: int
    message_id: int
    text: str
    from_bot: bool
    entities: tuple[dict[str, Any], ...] = ()
    reply_markup: dict[str, Any] | None = None
    edit_count: int = 0
    raw: dict[str, Any] = field(default_factory=dict)


_JSON_PARAMS = frozenset(
    {"entities", "reply_markup", "reply_parameters", "allowed_updates", "commands", "scope"}
)
_INT_PARAMS = frozenset({"message_id", "offset", "limit", "timeout", "max_connections"})


async def read_params(request: web.Request) -> dict[str, Any]:
    """A request's parameters (query string, form, multipart or JSON body), typed: JSON-valued
    ones decoded, integers parsed, uploaded files as their bytes. Form values are strings;
    python-telegram-bot JSON-encodes every non-string value."""
    raw: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json()
        raw.update(body if isinstance(body, dict) else {})
        typed = set(body) if isinstance(body, dict) else set()
        files: dict[str, bytes] = {}
    else:
        form = await request.post()
        raw.update({k: v for k, v in form.items() if isinstance(v, str)})
        files = {k: v.file.read() for k, v in form.items() if isinstance(v, web.FileField)}
        typed = set()
    params: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in typed and isinstance(value, str):
            if key in _JSON_PARAMS:
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            elif key in _INT_PARAMS or (key == "chat_id" and re.fullmatch(r"-?\d+", value)):
                value = _number(value)
            elif value in ("true", "false"):
                value = value == "true"
        params[key] = value
    params.update(files)  # an uploaded file's bytes (sendVoice's ``voice``)
    return params


def _number(value: str) -> int | float | str:
    """An integer parameter as sent (``"0.3"`` stays a float; garbage stays a string)."""
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(value)
    return value
