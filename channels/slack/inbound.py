"""Slack events into :class:`~channels.base.InboundMessage`\\ s (architecture §3 "Inbound").
Pure: no network, no clock.

* **Which messages.** A ``message`` event without a ``subtype`` (edits, joins and bot
  messages carry one), or an ``app_mention``; never the bot's own. In a DM (``channel_type:
  im``, ids ``D…``) every message is for the bot; in a channel only a mention of it
  (``<@BOT>``, removed from the text) — the orchestrator's ``respond_in_groups`` decides.
* **Once.** Slack sends a mention in a channel both as ``message`` and as ``app_mention``,
  and sends an event again when it missed the ack (Socket Mode reconnects, HTTP
  ``X-Slack-Retry-Num``): a message is handed on once per (channel, ts), here for the
  running process and through ``update_ids`` (a hash of the two) for the store.
* **Conversations.** A thread is a conversation: ``thread_id`` is the thread's ts, and a
  top-level message starts a thread of its own (its ts), so the reply goes into it. The
  reader remembers who asked in each thread (an approval prompt outside an answer answers to
  them; streaming in a channel names them as the recipient) and each user's latest thread per
  channel (a slash command acts there).
"""

from __future__ import annotations

import hashlib
import html
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from channels.base import InboundMessage
from channels.slack.commands import chat_command

__all__ = ["Asker", "InboundReader", "command_ack", "update_id"]

_REMEMBERED = 4096
"""Messages, threads and users remembered (oldest forgotten first)."""


def update_id(channel: str, ts: str) -> int:
    """A message's update id for the store: 63 bits of a hash of (channel, ts)."""
    digest = hashlib.blake2b(f"{channel}:{ts}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def command_ack(payload: dict[str, Any]) -> dict[str, Any]:
    """A slash command's acknowledgement: the command, shown to its user only."""
    return {"response_type": "ephemeral", "text": str(payload.get("command", ""))}


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asked in a thread: the Slack user id and their team (workspace) id."""

    user: str
    team: str | None


class _Bounded(OrderedDict[Any, Any]):
    def remember(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > _REMEMBERED:
            self.popitem(last=False)


class InboundReader:
    """Reads events for the channel ``name`` of the bot ``bot_user_id``."""

    def __init__(self, name: str, bot_user_id: str, team_id: str | None = None) -> None:
        self.name = name
        self.bot_user_id = bot_user_id
        self.team_id = team_id
        self._mention = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>\s*")
        self._seen = _Bounded()
        self._askers = _Bounded()
        self._threads = _Bounded()

    def event(self, event: dict[str, Any]) -> InboundMessage | None:
        """The message of an Events API ``event``, or None (not for us, or seen already)."""
        kind = event.get("type")
        if kind not in ("message", "app_mention") or event.get("subtype") or event.get("bot_id"):
            return None
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if not (user and channel and ts) or user == self.bot_user_id:
            return None
        if (channel, ts) in self._seen:
            return None
        self._seen.remember((channel, ts), True)
        raw = str(event.get("text") or "")
        direct = event.get("channel_type") == "im" or str(channel).startswith("D")
        mentioned = kind == "app_mention" or self._mention.search(raw) is not None
        text = html.unescape(self._mention.sub("", raw)).strip()
        thread = str(event.get("thread_ts") or ts)
        team = event.get("team") or event.get("user_team") or self.team_id
        self._askers.remember((channel, thread), Asker(str(user), team))
        self._threads.remember((channel, user), thread)
        return InboundMessage(
            channel=self.name,
            chat_id=str(channel),
            sender_id=str(user),
            sender_name=str(user),
            text=text,
            message_id=str(ts),
            is_direct=direct,
            mentions_bot=mentioned,
            thread_id=thread,
            update_ids=(update_id(str(channel), str(ts)),),
        )

    def command(self, payload: dict[str, Any]) -> InboundMessage:
        """A slash command (``/reset``, ``/ai-status`` …) as the chat command's text
        (:func:`~channels.slack.commands.chat_command`), in the user's latest thread of that
        channel (none yet: the channel's top level)."""
        channel, user = str(payload.get("channel_id")), str(payload.get("user_id"))
        words = chat_command(str(payload.get("command", "")), str(payload.get("text") or ""))
        return InboundMessage(
            channel=self.name,
            chat_id=channel,
            sender_id=user,
            sender_name=str(payload.get("user_name") or user),
            text=words,
            is_direct=channel.startswith("D"),
            mentions_bot=True,
            thread_id=self._threads.get((channel, user)),
        )

    def asker(self, channel: str, thread: str | None) -> Asker | None:
        """Who asked in that thread (None: unknown, e.g. after a restart)."""
        return self._askers.get((channel, thread))
