"""What the stores keep, as values (architecture §7): round records, waiting messages, drafts,
and the text forms of messages that both stores share.

A waiting message is JSON of its :class:`InboundMessage` fields; its attachments' bytes are base64
text there (RFC 4648), so a queued photo survives a restart. History keeps a user message's text
and, for its images, only a note of how many there were (``[2 images]``), then its
``history_note`` (documents and voice notes: their names, types and SHA-256, the documents'
text): the bytes are sent in the turn they arrived with, not again.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from channels.base import Attachment, InboundMessage, Quoted
from providers.base import ChatMessage
from providers.events import ToolCall

__all__ = [
    "SEEN_UPDATES_KEPT",
    "ConversationRef",
    "Draft",
    "RoundRecord",
    "WaitingMessage",
    "decode_inbound",
    "draft_row",
    "encode_inbound",
    "lock_key",
    "message_row",
    "row_to_draft",
    "row_to_message",
    "row_to_record",
    "sort_key",
    "stored_content",
    "thread_key",
]

SEEN_UPDATES_KEPT = 10_000
"""Update ids kept per channel for dedupe (the newest; older ones are pruned)."""

ConversationRef = tuple[str, str, str | None]
"""A conversation: (channel, chat id, thread id or None)."""


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One model round. ``ttft_ms`` (milliseconds) is ``None`` for rounds without text and
    blocking rounds; ``outcome`` is ``ok``, ``tool_calls``, ``interrupted``, ``refused``,
    ``stopped`` (``/stop``) or ``undelivered`` (the reply's chat or thread was gone);
    ``writes_sent`` counts sends, edits and deletes during the round."""

    channel: str
    chat_id: str
    provider: str | None
    attempts: int
    ttft_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    writes_sent: int
    finish_reason: str | None
    outcome: str
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class WaitingMessage:
    """A message kept until its turn starts: ``id`` is its row, ``received_at`` Unix seconds."""

    id: int
    message: InboundMessage
    received_at: float


@dataclass(frozen=True, slots=True)
class Draft:
    """A reply in flight, as the chat shows it (architecture §7 "Store", §9): recorded before
    the reply's first write and cleared when it ends, so that after a hard kill (or the death of
    the instance writing it) the cut reply is marked interrupted.

    ``message_ids`` are the reply's messages in the order they were sent (empty before the
    first send landed); ``message_id`` is the last of them (``None`` before the first send) and
    ``text`` what it shows (``formatted``: in the channel's markup). ``reply_to`` is the user's
    message the reply answers (``None``: none), for a reply cut before its first message."""

    channel: str
    chat_id: str
    thread_id: str | None
    message_id: str | None
    text: str
    formatted: bool
    message_ids: tuple[str, ...] = ()
    reply_to: str | None = None


def draft_row(draft: Draft) -> tuple[str, str, str, str, str, bool, str, str | None]:
    """``draft`` as the ``drafts`` table's columns (channel, chat_id, thread_id, message_id,
    text, formatted, message_ids, reply_to): ``''`` for no message yet, the ids as JSON."""
    d = draft
    ids = json.dumps(list(d.message_ids))
    return (
        d.channel, d.chat_id, thread_key(d.thread_id), d.message_id or "", d.text, d.formatted,
        ids, d.reply_to,
    )  # fmt: skip


def row_to_draft(row: Sequence[Any]) -> Draft:
    """The inverse of :func:`draft_row` (``formatted`` may be stored as 0 or 1)."""
    channel, chat_id, thread_id, message_id, text, formatted, ids, reply_to = row
    return Draft(
        channel, chat_id, thread_id or None, message_id or None, text, bool(formatted),
        tuple(str(i) for i in json.loads(ids or "[]")), reply_to,
    )  # fmt: skip


def thread_key(thread_id: str | None) -> str:
    """The tables hold ``''`` for "no thread"."""
    return thread_id or ""


def lock_key(channel: str, chat_id: str, thread_id: str | None) -> int:
    """A conversation's 64-bit signed lock id (PostgreSQL advisory locks take a ``bigint``):
    the first 8 bytes of BLAKE2b over the key's parts."""
    digest = hashlib.blake2b(
        "\x1f".join((channel, chat_id, thread_key(thread_id))).encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def sort_key(message: InboundMessage) -> int | None:
    """The order of a waiting message within its conversation: its first update id (platforms
    number updates in arrival order), or None (then the row id orders it)."""
    return min(message.update_ids) if message.update_ids else None


def encode_inbound(message: InboundMessage) -> str:
    """``message`` as JSON of its fields; attachment bytes as base64 text."""
    fields = asdict(message)
    fields["attachments"] = [
        {**asdict(a), "data": base64.b64encode(a.data).decode("ascii")} for a in message.attachments
    ]
    return json.dumps(fields)


def decode_inbound(text: str) -> InboundMessage:
    """The inverse of :func:`encode_inbound` (also reads rows written before attachments and
    update ids existed). Raises ``ValueError`` on a malformed row."""
    fields = json.loads(text)
    fields["attachments"] = tuple(
        Attachment(
            a["mime_type"],
            base64.b64decode(a["data"]),
            a.get("size"),
            a.get("kind", "image"),
            a.get("file_name"),
            a.get("duration"),
        )
        for a in fields.get("attachments", ())
    )
    fields["update_ids"] = tuple(fields.get("update_ids", ()))
    if fields.get("context") is not None:
        fields["context"] = tuple((role, text) for role, text in fields["context"])
    quoted = fields.get("quoted")
    fields["quoted"] = Quoted(**quoted) if isinstance(quoted, dict) else None
    return InboundMessage(**fields)


def stored_content(message: ChatMessage) -> str:
    """What history keeps of a message: a note of its images' count, its ``history_note``
    (:mod:`orchestrator.turn.inputs`: documents and voice notes), then its text."""
    count = len(message.images)
    notes = [message.history_note] if message.history_note else []
    if count:
        notes.insert(0, "[1 image]" if count == 1 else f"[{count} images]")
    if not notes:
        return message.content
    note = "\n".join(notes)
    return f"{note}\n{message.content}" if message.content else note


def message_row(message: ChatMessage) -> tuple[Any, ...]:
    """(role, content, tool_calls, tool_call_id, name, provider_items) as stored: the JSON
    columns are text or None."""
    m = message
    return (
        m.role,
        stored_content(m),
        json.dumps([[c.id, c.name, c.arguments] for c in m.tool_calls]) if m.tool_calls else None,
        m.tool_call_id,
        m.name,
        json.dumps(list(m.provider_items)) if m.provider_items else None,
    )


def row_to_record(row: tuple[Any, ...]) -> RoundRecord:
    """A ``rounds`` row (channel … outcome, thread_id) as a record."""
    (channel, chat_id, provider, attempts, ttft_ms, input_tokens, output_tokens, cached,
     writes, finish_reason, outcome, thread_id) = row  # fmt: skip
    return RoundRecord(
        channel,
        chat_id,
        provider,
        attempts,
        ttft_ms,
        input_tokens,
        output_tokens,
        cached,
        writes,
        finish_reason,
        outcome,
        thread_id=thread_id or None,
    )


def row_to_message(row: tuple[Any, ...]) -> ChatMessage:
    """A ``messages`` row (role, content, tool_calls, tool_call_id, name, provider_items)."""
    role, content, tool_calls, tool_call_id, name, provider_items = row
    calls = tuple(ToolCall(*c) for c in json.loads(tool_calls)) if tool_calls else ()
    items = tuple(json.loads(provider_items)) if provider_items else ()
    return ChatMessage(
        role=role,
        content=content,
        tool_calls=calls,
        tool_call_id=tool_call_id,
        name=name,
        provider_items=items,
    )
