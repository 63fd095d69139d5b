"""The content of the Matrix channel's writes (pure): a new message and an edit of one.

* A new message: :func:`~channels.matrix.format.message_content`, plus, in a thread,
  ``m.relates_to: {rel_type: m.thread, event_id: <root>, is_falling_back, m.in_reply_to}``
  (https://spec.matrix.org/latest/client-server-api/#threading), or, answering a user's event in
  a room of more than two members, ``m.relates_to: {m.in_reply_to: {event_id}}`` (rich replies).
* An edit: ``m.relates_to: {rel_type: m.replace, event_id}``, ``m.new_content`` the new message
  content (``body``, ``format``, ``formatted_body``), and the outer ``body`` / ``formatted_body``
  ``* `` + text for clients without edits
  (https://spec.matrix.org/latest/client-server-api/#event-replacements).
* A voice note: ``m.audio`` with ``url`` (or, in an encrypted room, ``file``: the uploaded
  ciphertext's ``EncryptedFile``), ``info`` and the MSC3245 voice marker
  ``org.matrix.msc3245.voice`` (clients show a voice message), related like a new message.
* ``live``: ``org.matrix.msc4357.live: {}`` on the message and in ``m.new_content`` while it
  streams (MSC4357); the final edit goes without it, which ends the live state.
"""

from __future__ import annotations

from typing import Any

from channels.matrix.format import markdown_to_html, message_content

__all__ = ["LIVE_KEY", "edit_content", "send_content", "voice_content"]

LIVE_KEY = "org.matrix.msc4357.live"


def send_content(
    text: str,
    *,
    formatted: bool,
    msgtype: str,
    live: bool,
    thread_id: str | None,
    reply_to: str | None,
    group: bool,
) -> dict[str, Any]:
    """A new message of ``text``; ``group``: the room has more than two members."""
    content = message_content(text, formatted=formatted, msgtype=msgtype)
    if live:
        content[LIVE_KEY] = {}
    if thread_id is not None:
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": thread_id,
            "is_falling_back": reply_to is None,
            "m.in_reply_to": {"event_id": reply_to or thread_id},
        }
    elif reply_to is not None and group:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return content


def edit_content(
    event_id: str, text: str, *, formatted: bool, msgtype: str, live: bool
) -> dict[str, Any]:
    """An ``m.replace`` edit of ``event_id`` to ``text``."""
    new = message_content(text, formatted=formatted, msgtype=msgtype)
    if live:
        new[LIVE_KEY] = {}
    html = markdown_to_html(text) if formatted else new["formatted_body"]
    return {
        "msgtype": msgtype,
        "body": f"* {text}",
        "format": new["format"],
        "formatted_body": f"* {html}",
        "m.mentions": {},
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


def voice_content(
    url: str,
    encrypted_file: dict[str, Any] | None,
    *,
    mime_type: str,
    size: int,
    thread_id: str | None,
    reply_to: str | None,
    group: bool,
) -> dict[str, Any]:
    """An ``m.audio`` voice note of the file at ``url`` (``encrypted_file``: its keys, as
    ``upload(encrypt=True)`` gave them, in an encrypted room)."""
    content = send_content(
        "", formatted=False, msgtype="m.audio", live=False, thread_id=thread_id,
        reply_to=reply_to, group=group,
    )  # fmt: skip
    for key in ("format", "formatted_body"):
        content.pop(key, None)
    content.update(
        body="answer.ogg",
        info={"mimetype": mime_type, "size": size},
        **{"org.matrix.msc3245.voice": {}, "org.matrix.msc1767.audio": {}},
    )
    if encrypted_file is not None:
        content["file"] = {**encrypted_file, "url": url}
    else:
        content["url"] = url
    return content
