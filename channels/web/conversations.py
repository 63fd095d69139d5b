"""The web chat's conversations: each browser's list, and what each conversation showed.

A browser is known by a random id in a cookie (cookies ignore the port, so the list survives a
page served on another port); its conversations are kept under ``convs:<browser>`` and each
conversation's transcript — the user's messages and the bot's messages as last written, already
through the outbound policy — under ``conv:<id>``, in the channel's state (the daemon's store),
so a reload of the page or a restart of the bot shows them again. The model's history of a
conversation is the store's, keyed by the conversation id as the chat id.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from channels.base import ChannelState

__all__ = ["MAX_CONVERSATIONS", "Conversations", "Transcript", "new_id"]

MAX_CONVERSATIONS = 200
"""Conversations a browser's list keeps (the oldest beyond are dropped from the list)."""
TITLE_CHARS = 60
"""A conversation's title: the first characters of its first message."""


def new_id() -> str:
    """A random id (96 bits, URL-safe): of a browser or a conversation."""
    return secrets.token_urlsafe(12)


class _MemoryState:
    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self._values.get(key)

    async def set(self, key: str, value: str) -> None:
        self._values[key] = value


@dataclass(slots=True)
class Transcript:
    """What one conversation showed, in order: ``{"id", "role": "user" | "bot", "text"}``."""

    messages: list[dict[str, Any]] = field(default_factory=list)

    def write(self, message_id: str, role: str, text: str) -> None:
        """Add message ``message_id``, or replace its text when it is there."""
        for message in reversed(self.messages):
            if message["id"] == message_id:
                message["text"] = text
                return
        self.messages.append({"id": message_id, "role": role, "text": text})

    def remove(self, message_id: str) -> None:
        self.messages = [m for m in self.messages if m["id"] != message_id]


class Conversations:
    """Browsers' conversation lists and the transcripts, over a :class:`ChannelState`
    (``None``: kept in memory only)."""

    def __init__(self, state: ChannelState | None) -> None:
        self._state: ChannelState = state if state is not None else _MemoryState()
        self._open: dict[str, Transcript] = {}  # transcripts read or written since start

    async def listed(self, browser: str) -> list[dict[str, str]]:
        """The browser's conversations, newest first: ``{"id", "title"}``."""
        raw = await self._state.get(f"convs:{browser}")
        listed: list[dict[str, str]] = json.loads(raw) if raw else []
        return listed

    async def owns(self, browser: str, conversation: str) -> bool:
        return any(c["id"] == conversation for c in await self.listed(browser))

    async def create(self, browser: str) -> str:
        """A new, empty conversation at the top of the browser's list; returns its id."""
        conversation = new_id()
        listed = [{"id": conversation, "title": ""}, *await self.listed(browser)]
        await self._state.set(f"convs:{browser}", json.dumps(listed[:MAX_CONVERSATIONS]))
        return conversation

    async def titled(self, browser: str, conversation: str, text: str) -> None:
        """Name an untitled conversation after its first message."""
        listed = await self.listed(browser)
        for entry in listed:
            if entry["id"] == conversation and not entry["title"]:
                entry["title"] = " ".join(text.split())[:TITLE_CHARS] or "(image)"
                await self._state.set(f"convs:{browser}", json.dumps(listed))
                return

    async def forget(self, browser: str, conversation: str) -> None:
        """Delete ``conversation``: out of the browser's list, its transcript emptied."""
        listed = [c for c in await self.listed(browser) if c["id"] != conversation]
        await self._state.set(f"convs:{browser}", json.dumps(listed))
        await self._state.set(f"conv:{conversation}", "")
        self._open.pop(conversation, None)

    async def transcript(self, conversation: str) -> Transcript:
        if conversation not in self._open:
            raw = await self._state.get(f"conv:{conversation}")
            self._open[conversation] = Transcript(json.loads(raw) if raw else [])
        return self._open[conversation]

    def cached(self, conversation: str) -> Transcript | None:
        """The transcript when it was read or written since start (writes need no I/O)."""
        return self._open.get(conversation)

    async def save(self, conversation: str) -> None:
        transcript = self._open.get(conversation)
        if transcript is not None:
            await self._state.set(f"conv:{conversation}", json.dumps(transcript.messages))
