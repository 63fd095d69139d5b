"""Reading Matrix events: relations, mentions, reply fallbacks, approval answers (pure).

Every function takes raw event JSON (``event.source`` dicts, Client-Server API "Events",
https://spec.matrix.org/latest/client-server-api/#events) and returns plain values; the adapter
(:mod:`channels.matrix.adapter`) decides what to do with them. No I/O (architecture §1).

* Threads: ``m.relates_to.rel_type == "m.thread"``, the root in ``event_id``
  (https://spec.matrix.org/latest/client-server-api/#threading).
* Replies: ``m.relates_to.m.in_reply_to.event_id``; a thread event's reply with
  ``is_falling_back: true`` is only the fallback for clients without threads, not a reply
  (https://spec.matrix.org/latest/client-server-api/#rich-replies).
  The replied-to event's text (:func:`replied_text`) is its latest edit's, when the server
  aggregated one.
* Mentions: ``m.mentions.user_ids`` (https://spec.matrix.org/latest/client-server-api/#user-and-room-mentions),
  or, from clients that do not send it, the MXID or display name in the body.
"""

from __future__ import annotations

from typing import Any

from channels.controls import ControlAction

__all__ = [
    "approval_answer",
    "control_reaction",
    "is_edit",
    "mentions_user",
    "reaction_answer",
    "replied_text",
    "reply_target",
    "strip_reply_fallback",
    "thread_root",
]

_YES = frozenset({"yes", "y", "approve", "approved", "ok", "✅"})
_NO = frozenset({"no", "n", "deny", "denied", "❌"})


def _relation(content: dict[str, Any]) -> dict[str, Any]:
    relation = content.get("m.relates_to")
    return relation if isinstance(relation, dict) else {}


def thread_root(content: dict[str, Any]) -> str | None:
    """The thread root event id of a message in a thread, else None."""
    relation = _relation(content)
    root = relation.get("event_id")
    if relation.get("rel_type") == "m.thread" and isinstance(root, str):
        return root
    return None


def is_edit(content: dict[str, Any]) -> bool:
    """True for an ``m.replace`` edit (a user correcting a message is not a new question)."""
    return _relation(content).get("rel_type") == "m.replace"


def edited_text(content: dict[str, Any]) -> tuple[str, str] | None:
    """An ``m.replace`` edit of a text message: (the edited event's id, its new body from
    ``m.new_content``); None otherwise (spec "Event replacements")."""
    relation, new = _relation(content), content.get("m.new_content")
    target = relation.get("event_id")
    if relation.get("rel_type") != "m.replace" or not isinstance(target, str):
        return None
    if not isinstance(new, dict) or new.get("msgtype") != "m.text":
        return None
    body = new.get("body")
    return (target, body) if isinstance(body, str) else None


def reply_target(content: dict[str, Any]) -> str | None:
    """The event id this message replies to; None when it replies to nothing, or only as a
    thread's fallback (``is_falling_back``)."""
    relation = _relation(content)
    if relation.get("rel_type") == "m.thread" and relation.get("is_falling_back", False):
        return None
    reply = relation.get("m.in_reply_to")
    target = reply.get("event_id") if isinstance(reply, dict) else None
    return target if isinstance(target, str) else None


def strip_reply_fallback(body: str) -> str:
    """``body`` without the quoted fallback older clients put before a reply's own text:
    the leading ``> `` lines and the blank line after them."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    if index < len(lines) and not lines[index].strip():
        index += 1
    return "\n".join(lines[index:])


def replied_text(source: dict[str, Any]) -> str | None:
    """The text a replied-to event shows: its latest edit's ``m.new_content`` when the server
    aggregated one into ``unsigned.m.relations.m.replace`` (spec "Server-side aggregation of
    m.replace relationships"), else its body, without a reply fallback; None when it has none.
    """
    content = source.get("content")
    if not isinstance(content, dict):
        return None
    relations = source.get("unsigned", {}).get("m.relations", {})
    edit = relations.get("m.replace") if isinstance(relations, dict) else None
    if isinstance(edit, dict):
        new = edit.get("content", {}).get("m.new_content")
        if isinstance(new, dict) and isinstance(new.get("body"), str):
            content = new
    body = content.get("body")
    if not isinstance(body, str) or not body.strip():
        return None
    return strip_reply_fallback(body) if reply_target(content) else body


def mentions_user(content: dict[str, Any], body: str, user_id: str, display_name: str) -> bool:
    """True when the message mentions ``user_id``: in ``m.mentions.user_ids`` or, when the
    client sent no ``m.mentions``, by MXID or display name in ``body`` (case-insensitive)."""
    declared = content.get("m.mentions")
    if isinstance(declared, dict):
        ids = declared.get("user_ids")
        if isinstance(ids, list) and user_id in ids:
            return True
    lowered = body.lower()
    if user_id.lower() in lowered:
        return True
    return bool(display_name) and display_name.lower() in lowered


def approval_answer(text: str) -> bool | None:
    """``yes`` / ``no`` (and kin, any case, trailing punctuation ignored) as True / False; None
    for any other text."""
    word = text.strip().lower().rstrip(".!")
    if word in _YES:
        return True
    if word in _NO:
        return False
    return None


def reaction_answer(content: dict[str, Any]) -> tuple[str, bool] | None:
    """An ``m.reaction`` with ✅ or ❌ (variation selectors ignored): (the event it annotates,
    the answer); None for any other reaction."""
    relation = _relation(content)
    target, key = relation.get("event_id"), relation.get("key")
    if relation.get("rel_type") != "m.annotation" or not isinstance(target, str):
        return None
    if not isinstance(key, str):
        return None
    key = key.replace("\ufe0f", "").strip()
    if key in ("✅", "✔", "👍"):
        return target, True
    if key in ("❌", "✖", "👎"):
        return target, False
    return None


STOP_KEYS = frozenset({"⏹", "🛑"})
"""Reaction keys that stop an answer (variation selectors ignored)."""
REGENERATE_KEYS = frozenset({"🔁", "🔄"})
"""Reaction keys that ask the last question again (variation selectors ignored)."""


def control_reaction(content: dict[str, Any]) -> tuple[str, ControlAction] | None:
    """An ``m.reaction`` with ⏹ or 🛑 (``stop``), 🔁 or 🔄 (``regenerate``): (the event it
    annotates, the action); None for any other."""
    relation = _relation(content)
    target, key = relation.get("event_id"), relation.get("key")
    if relation.get("rel_type") != "m.annotation" or not isinstance(target, str):
        return None
    key = key.replace("\ufe0f", "").strip() if isinstance(key, str) else ""
    if key in STOP_KEYS:
        return target, "stop"
    if key in REGENERATE_KEYS:
        return target, "regenerate"
    return None
