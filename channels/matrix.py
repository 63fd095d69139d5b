"""The Matrix channel (``kind: matrix``) on matrix-nio (architecture §3, "Matrix specifics").

Theory of operation
-------------------
The adapter executes primitive writes; the delivery engine decides what to write and when.

* **Login.** ``access_token`` (+ ``device_id``) is checked with ``/account/whoami``; otherwise
  ``password`` logs in, reusing the device id kept in the channel state, so restarts do not
  pile up devices. A rejected credential or an unreachable homeserver is a
  :class:`ChannelStartError` with a one-line cause, never the secret.
* **Sync.** :meth:`MatrixChannel.serve` long-polls ``/sync`` with a filter whose timeline limit
  (200) exceeds the default 10. The ``next_batch`` token is saved in the channel state after
  every event of a batch was handed on (the daemon keeps each message in its store before
  that returns), so a restart neither answers an old message again nor misses one sent while
  it was down. On the very first start (no token) one sync only takes the token: events from
  before the bot first ran are never answered; the first start's time is kept too, and older
  events are skipped whatever the token. The first sync after each start takes the rooms' full
  state (``full_state``: member counts decide what is a direct room); a ``limited`` timeline
  (more than 200 events since the last sync) is completed with ``/messages`` back to the
  previous token.
* **Inbound.** ``m.text`` messages (not ``m.notice``: other bots', not edits, not our own)
  become :class:`InboundMessage`: ``chat_id`` the room id, ``sender_id`` the MXID and
  ``sender_handle`` the MXID without ``@`` (the homeserver verifies it; ``sender_name`` is the
  display name, shown only), ``is_direct`` for rooms of at most two members,
  ``mentions_bot`` for ``m.mentions``, the MXID or display name in the body, or a reply to one
  of our events; ``thread_id`` the thread root. ``allowed_rooms`` (when set) filters rooms;
  the orchestrator applies ``allowed_users`` and ``respond_in_groups``. Invites from allowed
  users (to allowed rooms) are joined; an encrypted room is refused with one log line (this
  version builds its clients without e2e; the line says to install matrix-nio[e2e] when libolm
  is absent), and nothing is ever sent into one.
* **Writes.** One request per primitive, no splitting, no waiting: clients are built with
  ``max_limit_exceeded=0`` and ``max_timeouts=0``, so ``M_LIMIT_EXCEEDED`` becomes
  :class:`ChannelRateLimited` (``retry_after_ms`` / 1000 s) and the engine honours it
  (architecture §3 "Network errors"). Sends carry ``body`` + ``formatted_body``
  (:mod:`channels.matrix_format`); edits are ``m.replace`` with ``m.new_content`` and the
  outer ``body`` ``* `` + text; a thread's writes carry ``rel_type: m.thread``; the first
  message of a reply references the user's event (``m.in_reply_to``) in rooms of more than two
  members. ``notice_previews``: plain (preview) writes are ``m.notice``, the formatted final
  edit ``m.text``. ``live_marker``: plain writes carry ``org.matrix.msc4357.live``, the final
  formatted edit drops it (MSC4357).
* **Approvals.** A prompt; a reply ``yes``/``no`` to it (or, with one prompt open in the room,
  a plain ``yes``/``no``) or a ✅/❌ reaction on it from an allowed user answers it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from typing import Any

import aiohttp
import anyio
import nio
from nio.crypto import ENCRYPTION_ENABLED

from channels.base import (
    Channel,
    ChannelHealth,
    InboundHandler,
    InboundMessage,
    MessageRef,
    Rendering,
)
from channels.errors import (
    ChannelStartError,
    ChannelTimeout,
    ChannelUnavailable,
    ChannelWriteFailed,
)
from channels.limits import MATRIX_LIMITS
from channels.matrix_approvals import Approvals
from channels.matrix_content import LIVE_KEY, edit_content, send_content
from channels.matrix_events import (
    is_edit,
    mentions_user,
    reaction_answer,
    reply_target,
    strip_reply_fallback,
    thread_root,
)
from channels.matrix_format import markdown_to_html
from channels.matrix_nio import InviteAwareClient, build_client, translate
from config.models import MatrixChannelConfig

__all__ = ["LIVE_KEY", "SYNC_FILTER", "MatrixChannel"]

_LOG = logging.getLogger(__name__)

SYNC_FILTER: dict[str, Any] = {
    "room": {"timeline": {"limit": 200}, "state": {"lazy_load_members": False}},
    "presence": {"types": []},
    "account_data": {"types": []},
}
"""The ``/sync`` filter: a timeline limit (200 events) above the default of 10."""
_FIRST_FILTER: dict[str, Any] = {**SYNC_FILTER, "room": {"timeline": {"limit": 1}}}
_TOKEN, _DEVICE, _FIRST_START = "sync_token", "device_id", "first_start_ms"
_OWN_EVENTS_KEPT = 2000
_GAP_PAGES = 20
_REJECTED = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN", "M_USER_DEACTIVATED"})
"""Matrix error codes that say a credential is refused for good: the daemon does not retry."""
_E2E_CAUSE = (
    "end-to-end encryption is not supported by this version"
    if ENCRYPTION_ENABLED
    else "install matrix-nio[e2e]"
)
"""Why encrypted rooms are refused: the clients are built without e2e in any case."""


class MatrixChannel(Channel):
    """A Matrix account (see the module docstring).

    Args:
        name: the channel's key in the config.
        config: its :class:`MatrixChannelConfig`.
        on_inbound: awaited per inbound message; must return quickly.
        sync_timeout_ms: the ``/sync`` long-poll wait.
        request_timeout_secs: the bound of every other request (then :class:`ChannelTimeout`).
    """

    limits = MATRIX_LIMITS
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
        self._display_name = ""
        self._first_start_ms = 0
        self._own: deque[str] = deque(maxlen=_OWN_EVENTS_KEPT)
        self._approvals = Approvals()
        self._warned_encrypted: set[str] = set()
        self._refused: set[str] = set()
        self._serving: anyio.CancelScope | None = None
        self._stopped = anyio.Event()
        self._sync_problem: str | None = None
        self._synced = False  # the first sync after start takes the rooms' full state

    # -- lifecycle ------------------------------------------------------------------------

    async def _get(self, key: str) -> str | None:
        return await self.state.get(key) if self.state is not None else None

    async def _set(self, key: str, value: str) -> None:
        if self.state is not None:
            await self.state.set(key, value)

    async def start(self) -> None:
        """Log in, then take the sync token (the first start's sync answers nothing).

        Raises:
            ChannelStartError: a rejected credential or an unreachable homeserver; one line.
        """
        if self._client is not None:
            return
        _LOG.info("%s: encrypted rooms are refused (%s)", self.name, _E2E_CAUSE)
        device = self.config.device_id or await self._get(_DEVICE)
        client = build_client(
            self.config.homeserver,
            self.config.user_id,
            device,
            request_timeout_secs=self.request_timeout_secs,
        )
        try:
            await self._login(client)
            profile = await client.get_displayname(self.config.user_id)
            if isinstance(profile, nio.ProfileGetDisplayNameResponse):
                self._display_name = profile.displayname or ""
            first = await self._get(_FIRST_START)
            if first is None:
                first = str(int(time.time() * 1000))
                await self._set(_FIRST_START, first)
            self._first_start_ms = int(first)
            token = await self._get(_TOKEN)
            if token is None:
                response = await client.sync(timeout=0, sync_filter=_FIRST_FILTER)
                if not isinstance(response, nio.SyncResponse):
                    raise ChannelStartError(f"the first sync failed: {response.message}")
                await self._handle_invites(client, response)
                await self._set(_TOKEN, response.next_batch)
            else:
                client.next_batch = token
        except BaseException:
            await client.close()
            raise
        self._client = client

    async def _login(self, client: InviteAwareClient) -> None:
        host = self.config.homeserver
        try:
            if self.config.access_token is not None:
                client.restore_login(
                    self.config.user_id,
                    self.config.device_id or "",
                    self.config.access_token.get_secret_value(),
                )
                who = await client.whoami()
                if not isinstance(who, nio.WhoamiResponse):
                    raise ChannelStartError(
                        f"access token rejected ({who.status_code})",
                        permanent=who.status_code in _REJECTED,
                    )
                if who.user_id != self.config.user_id:
                    raise ChannelStartError(
                        f"the access token belongs to {who.user_id}", permanent=True
                    )
                client.device_id = who.device_id or client.device_id
                return
            assert self.config.password is not None
            login = await client.login(
                self.config.password.get_secret_value(), device_name="relaybot"
            )
            if not isinstance(login, nio.LoginResponse):
                raise ChannelStartError(
                    f"login refused ({login.status_code}: {login.message})",
                    permanent=login.status_code in _REJECTED,
                )
            await self._set(_DEVICE, login.device_id)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelStartError(f"cannot reach the homeserver at {host}: {exc}") from None

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
        """The sync loop: each batch's events handed on, then its token saved. Failures are
        logged and retried with backoff (1 s doubling to 30 s)."""
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
                    await self._handle(client, response, since)
                    await self._set(_TOKEN, response.next_batch)
                    backoff = 1.0
                    continue
                if response is not None:
                    self._sync_problem = f"sync refused: {response.status_code or response.message}"
                    _LOG.warning("%s: sync refused: %s", self.name, response.message)
                with anyio.move_on_after(backoff):  # or until stop()
                    await self._stopped.wait()
                backoff = min(backoff * 2, 30.0)

    # -- inbound --------------------------------------------------------------------------

    def _allowed_user(self, user_id: str) -> bool:
        names = {str(user).strip().lstrip("@").lower() for user in self.config.allowed_users}
        return "*" in names or user_id.lstrip("@").lower() in names

    def _allowed_room(self, room_id: str) -> bool:
        return not self.config.allowed_rooms or room_id in self.config.allowed_rooms

    async def _handle_invites(self, client: InviteAwareClient, response: nio.SyncResponse) -> None:
        for room_id, info in response.rooms.invite.items():
            inviter, encrypted = None, room_id in client.encrypted_invites
            for event in info.invite_state:
                source = getattr(event, "source", {})
                if (
                    source.get("type") == "m.room.member"
                    and source.get("state_key") == self.config.user_id
                ):
                    inviter = source.get("sender")
            if inviter is None or not self._allowed_user(inviter):
                _LOG.info("%s: ignoring an invite to %s from %s", self.name, room_id, inviter)
            elif not self._allowed_room(room_id):
                _LOG.info("%s: ignoring an invite to %s: not in allowed_rooms", self.name, room_id)
            elif encrypted:
                if room_id in self._refused:
                    continue
                self._refused.add(room_id)
                _LOG.warning(
                    "%s: not joining the encrypted room %s: %s", self.name, room_id, _E2E_CAUSE
                )
            else:
                joined = await client.join(room_id)
                if not isinstance(joined, nio.JoinResponse):
                    _LOG.warning("%s: could not join %s: %s", self.name, room_id, joined.message)

    async def _handle(
        self, client: InviteAwareClient, response: nio.SyncResponse, since: str | None
    ) -> None:
        await self._handle_invites(client, response)
        for room_id, room in response.rooms.join.items():
            if not self._allowed_room(room_id):
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
        timeline's ``prev_batch`` to the previous sync token, at most
        :data:`_GAP_PAGES` pages of 100 (Client-Server API "Syncing", limited timelines)."""
        gap: list[dict[str, Any]] = []
        for _ in range(_GAP_PAGES):
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
            self._own.append(str(event.get("event_id")))
            return
        if int(event.get("origin_server_ts", 0)) < self._first_start_ms:
            return
        if kind == "m.room.encrypted":
            if room_id not in self._warned_encrypted:
                self._warned_encrypted.add(room_id)
                _LOG.warning("%s: cannot read the encrypted room %s", self.name, room_id)
            return
        if kind == "m.reaction":
            answer = reaction_answer(content)
            if answer is not None and self._allowed_user(sender):
                self._approvals.answer(*answer)
            return
        if kind != "m.room.message" or content.get("msgtype") != "m.text" or is_edit(content):
            return
        body = content.get("body")
        if not isinstance(body, str):
            return
        replied = reply_target(content)
        text = strip_reply_fallback(body) if replied else body
        if self._allowed_user(sender) and self._approvals.answer_text(room_id, replied, text):
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
                message_id=str(event.get("event_id")),
                is_direct=members <= 2,
                mentions_bot=(replied is not None and replied in self._own)
                or mentions_user(content, text, self.config.user_id, self._display_name),
                thread_id=thread_root(content),
            )
        )

    # -- primitives -----------------------------------------------------------------------

    def _connected(self) -> InviteAwareClient:
        if self._client is None:
            raise ChannelWriteFailed(f"channel {self.name!r} is not started")
        return self._client

    async def _call(self, request: Any, *, length: int = 0) -> Any:
        """Await one nio request; its error response or exception as a channel error."""
        try:
            response = await request
        except TimeoutError as exc:
            raise ChannelTimeout(f"the homeserver did not answer in time: {exc}") from exc
        except aiohttp.ClientConnectorError as exc:
            raise ChannelUnavailable(f"cannot reach the homeserver: {exc}") from exc
        except aiohttp.ClientError as exc:  # the request may have reached the server
            raise ChannelTimeout(f"the connection failed: {exc}") from exc
        if isinstance(response, nio.ErrorResponse):
            raise translate(response, length)
        return response

    def _live(self, formatted: bool) -> bool:
        return self.config.live_marker and not formatted and self.stream_mode == "partial"

    def _msgtype(self, formatted: bool) -> str:
        notice = self.config.notice_previews and not formatted and self.stream_mode == "partial"
        return "m.notice" if notice else "m.text"

    def _refuse_encrypted(self, client: InviteAwareClient, room_id: str) -> None:
        room = client.rooms.get(room_id)
        if room is not None and room.encrypted:  # never plaintext into an encrypted room
            raise ChannelWriteFailed(f"{room_id} is encrypted: {_E2E_CAUSE}")

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
        self._refuse_encrypted(client, chat_id)
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
        sent = await self._call(
            client.room_send(chat_id, "m.room.message", content), length=len(text)
        )
        self._own.append(sent.event_id)
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
        await self._call(client.room_send(ref.chat_id, "m.room.message", content), length=len(text))

    async def _delete_message(self, ref: MessageRef) -> None:
        client = self._connected()
        await self._call(client.room_redact(ref.chat_id, ref.message_id))

    async def _send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        client = self._connected()
        await self._call(client.room_typing(chat_id, True, timeout=5000))

    async def _request_approval(
        self, chat_id: str, prompt: str, *, thread_id: str | None = None
    ) -> bool | None:
        """Raises ChannelError when the prompt cannot be sent."""
        question = f"{prompt}\n\nReply yes or no (or react ✅ / ❌)."
        ref = await self._send_message(
            chat_id, question, formatted=False, reply_to=None, thread_id=thread_id
        )
        approval = self._approvals.open(chat_id, ref.message_id)
        try:
            with anyio.move_on_after(self.approval_timeout_secs):
                await approval.answered.wait()
        finally:
            self._approvals.close(ref.message_id)
        outcome = {True: "✅ Approved", False: "❌ Denied", None: "⌛ No answer: not approved"}
        with contextlib.suppress(Exception):  # the answer stands either way
            await self._edit_message(
                ref, f"{prompt}\n\n{outcome[approval.answer]}", formatted=False
            )
        return approval.answer

    def render(self, text: str) -> Rendering:
        """The final form of ``text`` (its ``formatted_body``) and its length in characters of
        ``body`` (what the 4000-character limit counts)."""
        return Rendering(markdown_to_html(text), len(text))
