"""The Matrix channel's inbound side: a sync response's invites and timeline events, read into
:class:`~channels.base.InboundMessage`, approval answers and joins (architecture §3 "Matrix
specifics", "Access").

* **Invites** from allowed users (to allowed rooms) are joined. An encrypted room (its invite's
  stripped state holds ``m.room.encryption``, :class:`~channels.matrix.client.InviteAwareClient`)
  is joined only with end-to-end encryption on; otherwise it is refused with one log line naming
  the cause (:func:`channels.matrix.crypto.refusal_cause`), once per room.
* **Events**: our own are noted (a reply to one of them addresses the bot) and never answered;
  events from before the bot first started are skipped. ``m.text`` messages (not ``m.notice``:
  other bots'; an ``m.replace`` of one is its original's id with the new text, marked
  ``edited``, outside threads: ``agent.rerun_edited``) and ``m.file``/``m.audio``/``m.image``
  (their file downloaded and decrypted within ``bounds``, :mod:`channels.matrix.media`; the
  caption as the text) become an :class:`InboundMessage`: ``chat_id`` the room id,
  ``sender_id`` the MXID and ``sender_handle`` the MXID without ``@`` (the homeserver verifies
  it; ``sender_name`` is the display name, shown only), ``is_direct`` for rooms of at most two
  members, ``mentions_bot`` for ``m.mentions``, the MXID or display name in the body, or a reply
  to one of our events; ``thread_id`` the thread root; ``quoted`` the replied-to event's text
  (fetched, :func:`~channels.matrix.events.replied_text`). ``allowed_rooms`` (when set) filters
  rooms; the orchestrator applies ``allowed_users`` and ``respond_in_groups``. Encrypted events
  arrive decrypted when nio could (their ``source`` is the plaintext event); one it could not
  is logged once per room.
* **Gaps**: a ``limited`` timeline (more than the filter's 200 events since the last sync) is
  completed with ``/messages`` back to the previous token.
* **Approvals**: a reply ``yes``/``no`` to a prompt (or, with one prompt open in the room, a
  plain ``yes``/``no``) or a ✅/❌ reaction on it from an allowed user answers it
  (:mod:`channels.matrix.approvals`) once :attr:`MatrixInbound.may_approve` lets them (the
  asker or an admin, :mod:`channels.matrix.reactions`); ⏹ and 🔁 reactions go to
  :attr:`MatrixInbound.on_control`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import nio
from nio.crypto.attachments import decrypt_attachment
from nio.exceptions import EncryptionError

from channels.base import Attachment, InboundHandler, InboundMessage, Quoted
from channels.controls import ControlAction
from channels.matrix.approvals import Approvals
from channels.matrix.client import InviteAwareClient
from channels.matrix.events import (
    control_reaction,
    edited_text,
    is_edit,
    mentions_user,
    reaction_answer,
    replied_text,
    reply_target,
    strip_reply_fallback,
    thread_root,
)
from channels.matrix.kind import MatrixChannelConfig
from channels.matrix.media import MediaFile, media_caption, media_file

__all__ = ["GAP_PAGES", "OWN_EVENTS_KEPT", "MatrixInbound"]

_LOG = logging.getLogger("channels.matrix")

_TAKEN = frozenset({"m.text", "m.file", "m.audio", "m.image"})
r"""The ``msgtype``\ s answered (not ``m.notice``: other bots')."""

OWN_EVENTS_KEPT = 2000
"""Our latest event ids kept, so a reply to one of them counts as addressing the bot."""
GAP_PAGES = 20
"""``/messages`` pages of 100 events fetched at most to fill one limited timeline."""


class MatrixInbound:
    """Reads one account's sync responses (see the module docstring).

    Args:
        name: the channel's name (log lines).
        config: the channel's config.
        on_inbound: awaited per inbound message.
        refused: why encrypted rooms are refused; ``None``: end-to-end encryption is on.
    """

    def __init__(
        self,
        name: str,
        config: MatrixChannelConfig,
        on_inbound: InboundHandler,
        *,
        refused: str | None,
    ) -> None:
        self.name = name
        self.config = config
        self.refused = refused
        self.approvals = Approvals()
        self.display_name = ""
        self.first_start_ms = 0
        """Events older than this (ms since the epoch) are never answered."""
        self._on_inbound = on_inbound
        self.on_control: Callable[[str, str, str, ControlAction], Awaitable[None]] | None = None
        """Awaited with (room id, sender, the event reacted to, the action) for a ⏹ or 🔁
        reaction."""
        self.may_approve: Callable[[str, str], Awaitable[bool]] | None = None
        """Awaited with (room id, sender) before an approval answer is taken: False refuses
        it (the adapter said why in the room)."""
        self._own: deque[str] = deque(maxlen=OWN_EVENTS_KEPT)
        self._refused_rooms: set[str] = set()
        self._undecryptable_rooms: set[str] = set()
        self.bounds: dict[str, int] = {}
        """The most bytes fetched of a file, by kind (``image``, ``document``, ``audio``; the
        adapter sets them from the channel's)."""

    async def _approve(self, room_id: str, sender: str, answer: tuple[str, bool]) -> None:
        """Take ``answer`` (prompt id, yes/no) from ``sender``, an allowed user, once the
        orchestrator lets them answer (the asker or an admin)."""
        if not self.allowed_user(sender):
            return
        if self.may_approve is None or await self.may_approve(room_id, sender):
            self.approvals.answer(*answer)

    def note_own(self, event_id: str) -> None:
        """``event_id`` is ours (a reply to it addresses the bot)."""
        self._own.append(event_id)

    def allowed_user(self, user_id: str) -> bool:
        names = {str(user).strip().lstrip("@").lower() for user in self.config.allowed_users}
        return "*" in names or user_id.lstrip("@").lower() in names

    def allowed_room(self, room_id: str) -> bool:
        return not self.config.allowed_rooms or room_id in self.config.allowed_rooms

    async def handle_invites(self, client: InviteAwareClient, response: nio.SyncResponse) -> None:
        """Join the invites the module docstring allows; log the others."""
        for room_id, info in response.rooms.invite.items():
            inviter, encrypted = None, room_id in client.encrypted_invites
            for event in info.invite_state:
                source = getattr(event, "source", {})
                if (
                    source.get("type") == "m.room.member"
                    and source.get("state_key") == self.config.user_id
                ):
                    inviter = source.get("sender")
            if inviter is None or not self.allowed_user(inviter):
                _LOG.info("%s: ignoring an invite to %s from %s", self.name, room_id, inviter)
            elif not self.allowed_room(room_id):
                _LOG.info("%s: ignoring an invite to %s: not in allowed_rooms", self.name, room_id)
            elif encrypted and self.refused is not None:
                if room_id in self._refused_rooms:
                    continue
                self._refused_rooms.add(room_id)
                _LOG.warning(
                    "%s: not joining the encrypted room %s: %s", self.name, room_id, self.refused
                )
            else:
                joined = await client.join(room_id)
                if not isinstance(joined, nio.JoinResponse):
                    _LOG.warning("%s: could not join %s: %s", self.name, room_id, joined.message)

    async def handle(
        self, client: InviteAwareClient, response: nio.SyncResponse, since: str | None
    ) -> None:
        """Every event of one sync, in order (``since``: the token the sync started from)."""
        await self.handle_invites(client, response)
        for room_id, room in response.rooms.join.items():
            if not self.allowed_room(room_id):
                continue
            if room.timeline.limited and since and room.timeline.prev_batch:
                for source in await self._gap(client, room_id, room.timeline.prev_batch, since):
                    await self._on_event(client, room_id, source)
            for event in room.timeline.events:
                await self._on_event(client, room_id, event.source)

    async def _gap(
        self, client: InviteAwareClient, room_id: str, start: str, since: str
    ) -> list[dict[str, Any]]:
        """The events a ``limited`` sync left out (more than the filter's 200 arrived since
        ``since``, e.g. while the bot was down), oldest first: ``/messages`` backwards from the
        timeline's ``prev_batch`` to the previous sync token, at most :data:`GAP_PAGES` pages of
        100 (Client-Server API "Syncing", limited timelines). nio decrypts what it can."""
        gap: list[dict[str, Any]] = []
        for _ in range(GAP_PAGES):
            page = await client.room_messages(room_id, start, end=since, limit=100)
            if not isinstance(page, nio.RoomMessagesResponse):
                _LOG.warning("%s: could not fetch missed events of %s", self.name, room_id)
                break
            gap.extend(event.source for event in page.chunk)
            if not page.chunk or not page.end or page.end == start:
                break
            start = page.end
        return gap[::-1]

    async def _on_event(
        self, client: InviteAwareClient, room_id: str, event: dict[str, Any]
    ) -> None:
        sender, kind = event.get("sender"), event.get("type")
        content = event.get("content")
        if not isinstance(content, dict) or not isinstance(sender, str):
            return
        if sender == self.config.user_id:
            self.note_own(str(event.get("event_id")))
            return
        if int(event.get("origin_server_ts", 0)) < self.first_start_ms:
            return
        if kind == "m.room.encrypted":  # nio could not decrypt it
            if room_id not in self._undecryptable_rooms:
                self._undecryptable_rooms.add(room_id)
                cause = self.refused or "no room key was shared with this device"
                _LOG.warning(
                    "%s: cannot read an encrypted event in %s: %s", self.name, room_id, cause
                )
            return
        if kind == "m.reaction":
            control = control_reaction(content)
            if control is not None and self.on_control is not None and self.allowed_user(sender):
                await self.on_control(room_id, sender, *control)
            answer = reaction_answer(content)
            if answer is not None and self.approvals.is_open(answer[0]):
                await self._approve(room_id, sender, answer)
            return
        msgtype = content.get("msgtype")
        edit = edited_text(content) if kind == "m.room.message" else None
        if edit is not None:  # agent.rerun_edited: the edited message's new text, marked edited
            content = {**content, "body": edit[1], "m.relates_to": {}}
        elif kind != "m.room.message" or msgtype not in _TAKEN or is_edit(content):
            return
        body = content.get("body")
        if not isinstance(body, str):
            return
        replied = reply_target(content)
        text = strip_reply_fallback(body) if replied else body
        attachments: tuple[Attachment, ...] = ()
        if msgtype != "m.text":
            file = media_file(content)
            if file is None:
                return
            text = media_caption(content)
            allowed = self.allowed_user(sender)  # nobody else's files are downloaded
            fetched = await self._fetch(client, file, content) if allowed else None
            attachments = (fetched or file.attachment(content),)
        answered = self.approvals.text_answer(room_id, replied, text)
        if answered is not None and self.allowed_user(sender):
            await self._approve(room_id, sender, answered)
            return
        matrix_room = client.rooms.get(room_id)
        members = matrix_room.member_count if matrix_room is not None else 2
        await self._on_inbound(
            InboundMessage(
                channel=self.name,
                chat_id=room_id,
                sender_id=sender,
                sender_name=(matrix_room.user_name(sender) if matrix_room else None) or sender,
                sender_handle=sender.removeprefix("@"),  # the MXID, verified by the homeserver
                text=text,
                message_id=edit[0] if edit is not None else str(event.get("event_id")),
                is_direct=members <= 2,
                mentions_bot=(replied is not None and replied in self._own)
                or mentions_user(content, text, self.config.user_id, self.display_name),
                thread_id=thread_root(content),
                quoted=await self._quoted(client, room_id, replied),
                attachments=attachments,
                edited=edit is not None,
            )
        )

    async def _fetch(
        self, client: InviteAwareClient, file: MediaFile, content: dict[str, Any]
    ) -> Attachment:
        """The file of an ``m.file``/``m.audio``/``m.image`` event, downloaded
        (``GET /_matrix/client/v1/media/download``) and decrypted when it is encrypted, unless
        larger than the bound of its kind (then, or when the download failed, without bytes:
        the orchestrator refuses it with one line)."""
        attachment = file.attachment(content)
        if (attachment.size or 0) > self.bounds.get(attachment.kind, 0):
            return attachment
        response = await client.download(mxc=file.url)
        if not isinstance(response, nio.MemoryDownloadResponse):
            _LOG.warning("%s: could not download %s: %s", self.name, file.url, response)
            return attachment
        data = response.body
        if file.key is not None:
            try:
                data = decrypt_attachment(data, file.key, file.sha256 or "", file.iv or "")
            except EncryptionError as exc:
                _LOG.warning("%s: could not decrypt %s: %s", self.name, file.url, exc)
                return attachment
        if len(data) > self.bounds.get(attachment.kind, 0):
            return replace(attachment, size=len(data))
        return replace(attachment, data=data, size=len(data))

    async def _quoted(
        self, client: InviteAwareClient, room_id: str, event_id: str | None
    ) -> Quoted | None:
        """The event a message replies to (``GET /rooms/{roomId}/event/{eventId}``), decrypted
        when it is encrypted and nio can; None when it cannot be read."""
        if event_id is None:
            return None
        response = await client.room_get_event(room_id, event_id)
        if not isinstance(response, nio.RoomGetEventResponse):
            _LOG.info("%s: cannot read the replied-to event %s", self.name, event_id)
            return None
        event = response.event
        if isinstance(event, nio.MegolmEvent) and client.olm is not None:
            try:
                event = client.decrypt_event(event)
            except nio.EncryptionError:
                return None
        source = event.source
        text = replied_text(source)
        if text is None:
            return None
        sender = str(source.get("sender", ""))
        room = client.rooms.get(room_id)
        name = (room.user_name(sender) if room is not None else None) or sender
        return Quoted(text, from_bot=sender == self.config.user_id, sender_name=name)
