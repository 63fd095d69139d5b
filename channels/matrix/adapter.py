"""The Matrix channel (``kind: matrix``) on matrix-nio (architecture §3, "Matrix specifics").

Theory of operation
-------------------
The adapter executes primitive writes; the delivery engine decides what to write and when. This
module holds the lifecycle (start, the sync loop, health, stop) and the primitives; the rest is in
modules named for what they hold: :mod:`channels.matrix.login` (access token or password, the
device), :mod:`channels.matrix.inbound` (a sync's invites and events into inbound messages),
:mod:`channels.matrix.crypto` (end-to-end encryption: when it is on, the device's keys),
:mod:`channels.matrix.client` (the client and its errors as channel errors),
:mod:`channels.matrix.content` and :mod:`channels.matrix.format` (what a write carries),
:mod:`channels.matrix.events` (reading relations and mentions) and
:mod:`channels.matrix.approvals` (open approval prompts).

* **Sync.** :meth:`MatrixChannel.serve` long-polls ``/sync`` with a filter whose timeline limit
  (200) exceeds the default 10. The ``next_batch`` token is saved in the channel state after
  every event of a batch was handed on (the daemon keeps each message in its store before
  that returns), so a restart neither answers an old message again nor misses one sent while
  it was down. On the very first start (no token) one sync only takes the token: events from
  before the bot first ran are never answered; the first start's time is kept too, and older
  events are skipped whatever the token. The first sync after each start takes the rooms' full
  state (``full_state``: member counts decide what is a direct room). While syncs fail,
  :meth:`MatrixChannel.health` is ``degraded`` with the cause; the loop retries with back-off.
* **Encrypted rooms.** With matrix-nio's e2e extra and a ``store_path``, the device's keys are
  uploaded at start and kept current after every sync; encrypted rooms are joined, their
  events read decrypted and every write into them encrypted. Otherwise they are refused with one
  log line naming the cause, and nothing is ever sent into one in plaintext.
* **Writes.** One request per primitive, no splitting, no waiting: clients are built with
  ``max_limit_exceeded=0`` and ``max_timeouts=0``, so ``M_LIMIT_EXCEEDED`` becomes
  :class:`ChannelRateLimited` (``retry_after_ms`` / 1000 s) and the engine honours it
  (architecture §3 "Network errors"). Sends carry ``body`` + ``formatted_body``
  (:mod:`channels.matrix.format`); edits are ``m.replace`` with ``m.new_content`` and the
  outer ``body`` ``* `` + text; a thread's writes carry ``rel_type: m.thread``; the first
  message of a reply references the user's event (``m.in_reply_to``) in rooms of more than two
  members. ``notice_previews``: plain (preview) writes are ``m.notice``; the engine sends the
  final text as a new ``m.text`` event (the one that notifies) and then redacts the previews
  (architecture §3 "Matrix specifics"). ``live_marker``: plain writes carry
  ``org.matrix.msc4357.live``, the final formatted write drops it (MSC4357).
* **Approvals.** A prompt; a reply ``yes``/``no`` to it (or, with one prompt open in the room,
  a plain ``yes``/``no``) or a ✅/❌ reaction on it from an allowed user answers it.
* **Stop.** A ⏹ (or 🛑) reaction on a message of the answer being written works as ``!stop``
  when the orchestrator lets its sender press (the asker or an admin; :meth:`Channel.control`);
  a refused press is said in one ``m.notice``. In ``partial`` the bot puts its own ⏹ on the
  answer's first message and redacts it at the end (:mod:`.reactions`). Commands take the
  prefix ``command_prefix`` (default ``!``: clients take ``/`` for their own commands).
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
from typing import Any

import aiohttp
import anyio
import nio
import nio.exceptions

from channels.base import (
    UNSPACED,
    Channel,
    ChannelHealth,
    InboundHandler,
    MessageRef,
    Rendering,
    WriteSpacing,
)
from channels.errors import ChannelStartError, ChannelWriteFailed
from channels.matrix.client import InviteAwareClient, build_client, call
from channels.matrix.content import LIVE_KEY, edit_content, send_content, voice_content
from channels.matrix.crypto import KeyKeeper, KeysRejected, refusal_cause
from channels.matrix.format import markdown_to_html
from channels.matrix.inbound import MatrixInbound
from channels.matrix.kind import KIND, MatrixChannelConfig
from channels.matrix.login import DEVICE_KEY, log_in
from channels.matrix.reactions import MatrixControls

__all__ = ["LIVE_KEY", "SYNC_FILTER", "MatrixChannel"]

_LOG = logging.getLogger("channels.matrix")

SYNC_FILTER: dict[str, Any] = {
    "room": {"timeline": {"limit": 200}, "state": {"lazy_load_members": False}},
    "presence": {"types": []},
    "account_data": {"types": []},
}
"""The ``/sync`` filter: a timeline limit (200 events) above the default of 10."""
_FIRST_FILTER: dict[str, Any] = {**SYNC_FILTER, "room": {"timeline": {"limit": 1}}}
_TOKEN, _FIRST_START = "sync_token", "first_start_ms"


class MatrixChannel(Channel, MatrixControls):
    """A Matrix account (see the module docstring).

    Args:
        name: the channel's key in the config.
        config: its :class:`MatrixChannelConfig`.
        on_inbound: awaited per inbound message; must return quickly.
        sync_timeout_ms: the ``/sync`` long-poll wait.
        request_timeout_secs: the bound of every other request (then :class:`ChannelTimeout`).
    """

    limits = KIND.limits
    multi_message_unit = "paragraph"

    def __init__(
        self,
        name: str,
        config: MatrixChannelConfig,
        on_inbound: InboundHandler,
        *,
        sync_timeout_ms: int = 30_000,
        request_timeout_secs: float = 30.0,
    ) -> None:
        super().__init__(name, config, on_inbound)
        self.config: MatrixChannelConfig = config
        self.sync_timeout_ms = sync_timeout_ms
        self.request_timeout_secs = request_timeout_secs
        self._client: InviteAwareClient | None = None
        self._inbound = MatrixInbound(name, config, on_inbound, refused=None)
        self._controls_init()
        self._keys = KeyKeeper(name)
        self._serving: anyio.CancelScope | None = None
        self._stopped = anyio.Event()
        self._sync_problem: str | None = None
        self._synced = False  # the first sync after start takes the rooms' full state

    @property
    def final_as_new_message(self) -> bool:
        """``notice_previews`` in ``partial``: the finished answer is a new ``m.text`` (the one
        event that notifies), the notices then redacted."""
        return self.config.notice_previews and self.stream_mode == "partial"

    @property
    def encrypted(self) -> bool:
        """End-to-end encryption is on (known once started)."""
        return self._client is not None and self._inbound.refused is None

    # -- lifecycle ------------------------------------------------------------------------

    async def _get(self, key: str) -> str | None:
        return await self.state.get(key) if self.state is not None else None

    async def _set(self, key: str, value: str) -> None:
        if self.state is not None:
            await self.state.set(key, value)

    async def start(self) -> None:
        """Log in, upload the device's keys (encryption on), then take the sync token (the
        first start's sync answers nothing).

        Raises:
            ChannelStartError: a rejected credential, an unreachable homeserver, or device keys
                the homeserver refused; one line.
        """
        if self._client is not None:
            return
        refused = refusal_cause(self.config.store_path)
        self._inbound.refused = refused
        self._inbound.bounds = {
            "image": self.max_image_bytes,
            "document": self.max_document_bytes,
            "audio": self.max_audio_bytes,
        }
        store = self.config.store_path if refused is None else None
        if refused is None:
            _LOG.info("%s: end-to-end encryption on, keys in %s", self.name, store)
        else:
            _LOG.info("%s: encrypted rooms are refused (%s)", self.name, refused)
        device = self.config.device_id or await self._get(DEVICE_KEY)
        client = build_client(
            self.config.homeserver,
            self.config.user_id,
            device,
            request_timeout_secs=self.request_timeout_secs,
            store_path=store,
        )
        try:
            await log_in(client, self.config, self._set, encrypted=store is not None)
            if store is not None:
                await self._upload_keys(client, store)
            await self._take_token(client)
        except BaseException:
            await client.close()
            raise
        self._client = client

    async def _upload_keys(self, client: InviteAwareClient, store: str) -> None:
        try:
            await self._keys.upload(client)
        except KeysRejected as exc:
            raise ChannelStartError(
                f"the homeserver refused the keys of device {client.device_id} ({exc}); "
                f"was the key store in {store} lost? Log in as a new device"
            ) from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelStartError(f"cannot upload the device keys: {exc}") from None

    async def _take_token(self, client: InviteAwareClient) -> None:
        profile = await client.get_displayname(self.config.user_id)
        if isinstance(profile, nio.ProfileGetDisplayNameResponse):
            self._inbound.display_name = profile.displayname or ""
        first = await self._get(_FIRST_START)
        if first is None:
            first = str(int(time.time() * 1000))
            await self._set(_FIRST_START, first)
        self._inbound.first_start_ms = int(first)
        token = await self._get(_TOKEN)
        if token is None:
            response = await client.sync(timeout=0, sync_filter=_FIRST_FILTER)
            if not isinstance(response, nio.SyncResponse):
                raise ChannelStartError(f"the first sync failed: {response.message}")
            await self._inbound.handle_invites(client, response)
            await self._set(_TOKEN, response.next_batch)
        else:
            client.next_batch = token

    async def stop(self) -> None:
        """Stop syncing and close the HTTP session. Idempotent."""
        self._stopped.set()
        if self._serving is not None:
            self._serving.cancel()
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def health(self) -> ChannelHealth:
        """``degraded`` with the cause while ``/sync`` fails; ``ok`` once a sync succeeds."""
        if self._sync_problem is not None:
            return ChannelHealth("degraded", self._sync_problem)
        return ChannelHealth()

    async def serve(self) -> None:
        """The sync loop: each batch's events handed on, then its token saved, then the
        device's keys kept current (encryption on). Failures are logged and retried with
        backoff (1 s doubling to 30 s)."""
        backoff = 1.0
        with anyio.CancelScope() as self._serving:
            while self._client is not None:
                client = self._client
                since: str | None = client.next_batch
                try:
                    response = await client.sync(
                        timeout=self.sync_timeout_ms,
                        sync_filter=SYNC_FILTER,
                        full_state=not self._synced or None,
                    )
                except (aiohttp.ClientError, TimeoutError) as exc:
                    response = None
                    self._sync_problem = f"sync failed: {exc or type(exc).__name__}"
                    _LOG.warning("%s: %s", self.name, self._sync_problem)
                if isinstance(response, nio.SyncResponse):
                    self._sync_problem = None
                    self._synced = True
                    await self._inbound.handle(client, response, since)
                    await self._set(_TOKEN, response.next_batch)
                    if self.encrypted:
                        await self._refresh_keys(client)
                    backoff = 1.0
                    continue
                if response is not None:
                    self._sync_problem = f"sync refused: {response.status_code or response.message}"
                    _LOG.warning("%s: sync refused: %s", self.name, response.message)
                with anyio.move_on_after(backoff):  # or until stop()
                    await self._stopped.wait()
                backoff = min(backoff * 2, 30.0)

    async def _refresh_keys(self, client: InviteAwareClient) -> None:
        """Keep the device's keys current after a sync; a failure is logged and the keys are
        tried again after the next sync."""
        try:
            await self._keys.refresh(client)
        except (aiohttp.ClientError, TimeoutError, nio.exceptions.LocalProtocolError) as exc:
            _LOG.warning("%s: keeping the device keys failed: %s", self.name, exc)

    # -- primitives -----------------------------------------------------------------------

    def _connected(self) -> InviteAwareClient:
        if self._client is None:
            raise ChannelWriteFailed(f"channel {self.name!r} is not started")
        return self._client

    def _live(self, formatted: bool) -> bool:
        return self.config.live_marker and not formatted and self.stream_mode == "partial"

    def _msgtype(self, formatted: bool) -> str:
        notice = self.config.notice_previews and not formatted and self.stream_mode == "partial"
        return "m.notice" if notice else "m.text"

    async def _room_send(
        self, client: InviteAwareClient, room_id: str, content: Any, kind: str = "m.room.message"
    ) -> Any:
        """Send one event (``m.room.message``, or an ``m.reaction``): encrypted into an encrypted
        room (never plaintext), the keys brought up to date first."""
        room = client.rooms.get(room_id)
        if room is not None and room.encrypted:
            if self._inbound.refused is not None:
                raise ChannelWriteFailed(f"{room_id} is encrypted: {self._inbound.refused}")
            await call(self._keys.refresh(client))
        request = client.room_send(room_id, kind, content, ignore_unverified_devices=True)
        return await call(request, length=len(content.get("body", "")))

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        client = self._connected()
        if (rewritten := self._rewrite(chat_id, thread_id)) is not None:  # agent.rerun_edited
            await self._edit_message(MessageRef(chat_id, rewritten), text, formatted=formatted)
            self._sent(chat_id, thread_id, rewritten)
            await self._mark_stop(chat_id, thread_id, rewritten)
            return MessageRef(chat_id, rewritten)
        room = client.rooms.get(chat_id)
        content = send_content(
            text,
            formatted=formatted,
            msgtype=self._msgtype(formatted),
            live=self._live(formatted),
            thread_id=thread_id,
            reply_to=reply_to,
            group=room is not None and room.member_count > 2,
        )
        sent = await self._room_send(client, chat_id, content)
        self._inbound.note_own(sent.event_id)
        self._sent(chat_id, thread_id, sent.event_id)
        await self._mark_stop(chat_id, thread_id, sent.event_id)
        return MessageRef(chat_id, sent.event_id)

    async def _notice(self, room_id: str, text: str, thread_id: str | None) -> None:
        """One ``m.notice`` line in the conversation (a refused press; architecture §3
        "Buttons")."""
        client = self._connected()
        content = send_content(
            text,
            formatted=False,
            msgtype="m.notice",
            live=False,
            thread_id=thread_id,
            reply_to=None,
            group=False,
        )
        sent = await self._room_send(client, room_id, content)
        self._inbound.note_own(sent.event_id)

    @property
    def can_send_voice(self) -> bool:
        return True

    async def _send_voice(
        self,
        chat_id: str,
        audio: bytes,
        mime_type: str,
        *,
        reply_to: str | None,
        thread_id: str | None,
    ) -> MessageRef:
        """Upload ``audio`` (``POST /_matrix/media/v3/upload``; encrypted first into an
        encrypted room) and send it as an ``m.audio`` voice note
        (:func:`~channels.matrix.content.voice_content`)."""
        client = self._connected()
        room = client.rooms.get(chat_id)
        encrypt = room is not None and room.encrypted
        uploaded, keys = await call(
            client.upload(
                io.BytesIO(audio),
                content_type=mime_type,
                filename="answer.ogg",
                encrypt=encrypt,
                filesize=len(audio),
            )
        )
        if not isinstance(uploaded, nio.UploadResponse):
            raise ChannelWriteFailed(f"the homeserver refused the voice note: {uploaded}")
        content = voice_content(
            uploaded.content_uri,
            keys if encrypt else None,
            mime_type=mime_type,
            size=len(audio),
            thread_id=thread_id,
            reply_to=reply_to,
            group=room is not None and room.member_count > 2,
        )
        sent = await self._room_send(client, chat_id, content)
        self._inbound.note_own(sent.event_id)
        return MessageRef(chat_id, sent.event_id)

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        client = self._connected()
        content = edit_content(
            ref.message_id,
            text,
            formatted=formatted,
            msgtype=self._msgtype(formatted),
            live=self._live(formatted),
        )
        await self._room_send(client, ref.chat_id, content)

    async def _delete_message(self, ref: MessageRef) -> None:
        client = self._connected()
        await call(client.room_redact(ref.chat_id, ref.message_id))

    async def _send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        client = self._connected()
        await call(client.room_typing(chat_id, True, timeout=5000))

    async def _request_approval(
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        """Raises ChannelError when the prompt cannot be sent."""
        question = f"{prompt}\n\nReply yes or no (or react ✅ / ❌)."
        ref = await self._send_message(
            chat_id, question, formatted=False, reply_to=None, thread_id=thread_id
        )
        spacing.landed()
        approvals = self._inbound.approvals
        approval = approvals.open(chat_id, ref.message_id)
        try:
            with anyio.move_on_after(self.approval_timeout_secs):
                await approval.answered.wait()
        finally:
            approvals.close(ref.message_id)
        outcome = {True: "✅ Approved", False: "❌ Denied", None: "⌛ No answer: not approved"}
        with contextlib.suppress(Exception):  # the answer stands either way
            await spacing.next_write()
            await self._edit_message(
                ref, f"{prompt}\n\n{outcome[approval.answer]}", formatted=False
            )
            spacing.landed()
        return approval.answer

    def render(self, text: str) -> Rendering:
        """The final form of ``text`` (its ``formatted_body``) and its length in characters of
        ``body`` (what the 4000-character limit counts)."""
        return Rendering(markdown_to_html(text), len(text))
