"""The Web API methods of the local Slack peer (:mod:`tests.peers.slack`): the world, the
messages, and what each method does to them.

Semantics kept from Slack (https://docs.slack.dev/reference/methods):

* Every method answers HTTP 200 with ``{"ok": true, …}`` or ``{"ok": false, "error": CODE}``;
  a rate-limited call answers HTTP 429 with ``Retry-After`` (seconds) and ``"error":
  "ratelimited"`` and is not applied. Arguments come as JSON, as a form, or in the query;
  the token as ``Authorization: Bearer`` (or a ``token`` argument): another token is
  ``invalid_auth``.
* ``chat.postMessage`` / ``chat.update``: ``text`` over :data:`MAX_TEXT` (40,000) characters
  is ``msg_too_long``; more than 50 blocks ``invalid_blocks``; an unknown channel
  ``channel_not_found``; a channel the bot is not in ``not_in_channel``; an unknown message
  ``message_not_found``; another author's message ``cant_update_message``.
* ``chat.startStream`` needs ``thread_ts`` here and, outside a DM, ``recipient_user_id`` and
  ``recipient_team_id``; ``markdown_text`` over :data:`MAX_STREAM_TEXT` (12,000) per call is
  ``msg_too_long``; ``chat.appendStream`` / ``chat.stopStream`` on a message that is not
  streaming is ``message_not_in_streaming_state``. A streaming message cannot be updated
  (``cant_update_message``) until it is stopped.
* ``assistant.threads.setStatus`` records the status of (channel, thread).
* ``chat.postEphemeral`` records the line shown to one user (:attr:`WebApi.ephemerals`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BOT_ID",
    "MAX_STREAM_TEXT",
    "MAX_TEXT",
    "TEAM_ID",
    "ApiError",
    "StoredMessage",
    "WebApi",
]

BOT_ID = "U0BOT0001"
"""The bot user's id."""
TEAM_ID = "T0TEAM001"
MAX_TEXT = 40_000
"""``text`` limit of chat.postMessage / chat.update, in characters."""
MAX_STREAM_TEXT = 12_000
"""``markdown_text`` limit of one chat.startStream / appendStream / stopStream call."""
MAX_BLOCKS = 50


class ApiError(Exception):
    """A method's ``{"ok": false, "error": code}``."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class StoredMessage:
    """A message in a channel: ``text`` as shown (the appended ``markdown_text`` of a stream,
    joined), ``appends`` each streamed piece in order, ``streaming`` while open."""

    channel: str
    ts: str
    user: str
    text: str
    thread_ts: str | None = None
    blocks: list[Any] = field(default_factory=list)
    streaming: bool = False
    appends: list[str] = field(default_factory=list)
    edits: int = 0
    deleted: bool = False
    mrkdwn: bool = True
    recipient: tuple[str, str] | None = None


@dataclass(frozen=True)
class Ephemeral:
    """A ``chat.postEphemeral`` message: shown to ``user`` alone in ``channel``."""

    channel: str
    user: str
    text: str
    thread_ts: str | None


class WebApi:
    """The world (channels the bot is in, messages) and the methods acting on it."""

    def __init__(self, token: str, app_token: str) -> None:
        self.token = token
        self.app_token = app_token
        self.dm_channel = "D0DM00001"
        self.channel = "C0GENERAL"
        self.channels: dict[str, bool] = {self.dm_channel: True, self.channel: True}
        """Known channel ids, and whether the bot is a member."""
        self.messages: dict[tuple[str, str], StoredMessage] = {}
        self.statuses: list[tuple[str, str, str]] = []
        self.ephemerals: list[Ephemeral] = []
        """``chat.postEphemeral`` messages, in order (shown to their user alone, never stored)."""
        self._clock = itertools.count(1)
        self.socket_url = ""

    def next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._clock):06d}"

    def add_user_message(self, channel: str, user: str, text: str, thread_ts: str | None) -> str:
        ts = self.next_ts()
        self.messages[(channel, ts)] = StoredMessage(channel, ts, user, text, thread_ts)
        return ts

    # -- dispatch -------------------------------------------------------------------------

    def call(self, method: str, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        """Apply ``method``; raises :class:`ApiError`."""
        wanted = self.app_token if method == "apps.connections.open" else self.token
        if token != wanted:
            raise ApiError("invalid_auth")
        handler = _METHODS.get(method)
        if handler is None:
            raise ApiError("unknown_method")
        return handler(self, args)

    def _channel(self, args: dict[str, Any], key: str = "channel") -> str:
        channel = str(args.get(key) or "")
        if channel not in self.channels:
            raise ApiError("channel_not_found")
        if not self.channels[channel]:
            raise ApiError("not_in_channel")
        return channel

    def _own(self, channel: str, ts: str) -> StoredMessage:
        message = self.messages.get((channel, ts))
        if message is None or message.deleted:
            raise ApiError("message_not_found")
        if message.user != BOT_ID:
            raise ApiError("cant_update_message")
        return message

    @staticmethod
    def _text(args: dict[str, Any], key: str, limit: int) -> str:
        text = str(args.get(key) or "")
        if len(text) > limit:
            raise ApiError("msg_too_long")
        return text

    @staticmethod
    def _blocks(args: dict[str, Any]) -> list[Any]:
        blocks = args.get("blocks") or []
        if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
            raise ApiError("invalid_blocks")
        return blocks

    # -- methods --------------------------------------------------------------------------

    def auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": "https://peer.slack.test/", "team": "Peer", "user": "relaybot",
                "team_id": TEAM_ID, "user_id": BOT_ID, "bot_id": "B0BOT0001"}  # fmt: skip

    def connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.socket_url}

    def post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        text = self._text(args, "text", MAX_TEXT)
        blocks = self._blocks(args)
        if not text and not blocks:
            raise ApiError("no_text")
        thread = args.get("thread_ts")
        ts = self.next_ts()
        message = StoredMessage(channel, ts, BOT_ID, text, thread, blocks)
        message.mrkdwn = args.get("mrkdwn") not in (False, "false", "0")
        self.messages[(channel, ts)] = message
        return {"channel": channel, "ts": ts, "message": {"text": text, "ts": ts}}

    def update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        message = self._own(channel, str(args.get("ts")))
        if message.streaming:
            raise ApiError("cant_update_message")
        message.text = self._text(args, "text", MAX_TEXT)
        message.blocks = self._blocks(args)
        message.mrkdwn = args.get("mrkdwn") not in (False, "false", "0")
        message.edits += 1
        return {"channel": channel, "ts": message.ts, "text": message.text}

    def delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        message = self._own(channel, str(args.get("ts")))
        message.deleted = True
        return {"channel": channel, "ts": message.ts}

    def start_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        thread = args.get("thread_ts")
        if not thread:
            raise ApiError("invalid_arguments")
        recipient = None
        if not channel.startswith("D"):
            user, team = args.get("recipient_user_id"), args.get("recipient_team_id")
            if not user or not team:
                raise ApiError("invalid_arguments")
            recipient = (str(user), str(team))
        text = self._text(args, "markdown_text", MAX_STREAM_TEXT)
        ts = self.next_ts()
        message = StoredMessage(channel, ts, BOT_ID, text, str(thread), streaming=True)
        message.appends, message.recipient = ([text] if text else []), recipient
        self.messages[(channel, ts)] = message
        return {"channel": channel, "ts": ts}

    def _streaming(self, args: dict[str, Any]) -> StoredMessage:
        channel = self._channel(args)
        message = self._own(channel, str(args.get("ts")))
        if not message.streaming:
            raise ApiError("message_not_in_streaming_state")
        return message

    def append_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._streaming(args)
        text = self._text(args, "markdown_text", MAX_STREAM_TEXT)
        if not text:
            raise ApiError("invalid_arguments")
        message.appends.append(text)
        message.text += text
        return {"channel": message.channel, "ts": message.ts}

    def stop_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._streaming(args)
        text = self._text(args, "markdown_text", MAX_STREAM_TEXT)
        message.blocks = self._blocks(args)
        if text:
            message.appends.append(text)
            message.text += text
        message.streaming = False
        return {"channel": message.channel, "ts": message.ts, "message": {"text": message.text}}

    def post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        user, text = str(args.get("user") or ""), self._text(args, "text", MAX_TEXT)
        if not user:
            raise ApiError("user_not_in_channel")
        if not text and not self._blocks(args):
            raise ApiError("no_text")
        thread = args.get("thread_ts")
        self.ephemerals.append(Ephemeral(channel, user, text, str(thread) if thread else None))
        return {"message_ts": self.next_ts()}

    def set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args, "channel_id")
        self.statuses.append((channel, str(args.get("thread_ts")), str(args.get("status"))))
        return {}


_METHODS = {
    "auth.test": WebApi.auth_test,
    "apps.connections.open": WebApi.connections_open,
    "chat.postMessage": WebApi.post_message,
    "chat.update": WebApi.update,
    "chat.delete": WebApi.delete,
    "chat.postEphemeral": WebApi.post_ephemeral,
    "chat.startStream": WebApi.start_stream,
    "chat.appendStream": WebApi.append_stream,
    "chat.stopStream": WebApi.stop_stream,
    "assistant.threads.setStatus": WebApi.set_status,
}
