"""matrix-nio, set up for the Matrix channel: the client and its error responses as channel
errors (architecture §3 "Network errors").

* :func:`build_client`: ``max_limit_exceeded=0`` and ``max_timeouts=0``, so nio never waits out a
  429 or retries a timeout itself; no sync-token store of nio's (the channel keeps the token in
  relaybot's store); end-to-end encryption only with a key store directory
  (:mod:`channels.matrix.crypto`).
* :class:`InviteAwareClient` notes the rooms whose invite carries ``m.room.encryption`` in its
  stripped state: nio's parser drops every invite-state event but member, alias and name, so the
  adapter could not otherwise refuse an encrypted room before joining it.
* :func:`translate`: ``M_LIMIT_EXCEEDED`` → :class:`ChannelRateLimited` (``retry_after_ms`` / 1000
  seconds; 5 s when the server gave none), ``M_TOO_LARGE`` → :class:`MessageTooLong`,
  ``M_NOT_FOUND`` → :class:`MessageGone`, a 5xx → :class:`ChannelUnavailable`, anything else →
  :class:`ChannelWriteFailed` (Client-Server API "Standard error response",
  https://spec.matrix.org/latest/client-server-api/#standard-error-response).
* :func:`call`: awaits one request; a timeout is :class:`ChannelTimeout` (it may have landed), a
  refused connection :class:`ChannelUnavailable`, an error response goes through
  :func:`translate`, and nio's refusal to encrypt (no room key shared yet, members not synced)
  is :class:`ChannelWriteFailed`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import aiohttp
import nio
import nio.exceptions

from channels.errors import (
    ChannelRateLimited,
    ChannelTimeout,
    ChannelUnavailable,
    ChannelWriteFailed,
    MessageGone,
    MessageTooLong,
)
from channels.matrix.kind import MATRIX_MAX_TEXT_LENGTH

__all__ = ["DEFAULT_RETRY_AFTER_MS", "InviteAwareClient", "build_client", "call", "translate"]

DEFAULT_RETRY_AFTER_MS = 5000
"""The wait after a 429 that names none, in ms (what nio itself would wait)."""


class InviteAwareClient(nio.AsyncClient):  # type: ignore[misc]
    """An ``AsyncClient`` that keeps ``encrypted_invites``: room ids whose invite's stripped
    state holds ``m.room.encryption``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.encrypted_invites: set[str] = set()

    async def parse_body(self, transport_response: Any) -> dict[Any, Any]:
        body: dict[Any, Any] = await super().parse_body(transport_response)
        rooms = body.get("rooms") if isinstance(body, dict) else None
        invites = rooms.get("invite") if isinstance(rooms, dict) else None
        if isinstance(invites, dict):
            for room_id, info in invites.items():
                state = info.get("invite_state", {}) if isinstance(info, dict) else {}
                events = state.get("events", []) if isinstance(state, dict) else []
                if any(
                    isinstance(e, dict) and e.get("type") == "m.room.encryption" for e in events
                ):
                    self.encrypted_invites.add(room_id)
        return body


def build_client(
    homeserver: str,
    user_id: str,
    device_id: str | None,
    *,
    request_timeout_secs: float,
    store_path: str | None = None,
) -> InviteAwareClient:
    """A client that returns every 429 and raises every timeout at once (see the module
    docstring); ``request_timeout_secs`` bounds each request. ``store_path``: end-to-end
    encryption on, nio's key store in that directory (created if missing); ``None``: off."""
    config = nio.AsyncClientConfig(
        max_limit_exceeded=0,
        max_timeouts=0,
        encryption_enabled=store_path is not None,
        store_sync_tokens=False,
        request_timeout=request_timeout_secs,
    )
    if store_path is not None:
        Path(store_path).mkdir(parents=True, exist_ok=True)
    return InviteAwareClient(
        homeserver, user_id, device_id=device_id or "", store_path=store_path or "", config=config
    )


async def call(request: Awaitable[Any], *, length: int = 0) -> Any:
    """Await one nio request; its error response or exception as a channel error (module
    docstring). ``length``: the text's length in characters, for :class:`MessageTooLong`."""
    try:
        response = await request
    except TimeoutError as exc:
        raise ChannelTimeout(f"the homeserver did not answer in time: {exc}") from exc
    except aiohttp.ClientConnectorError as exc:
        raise ChannelUnavailable(f"cannot reach the homeserver: {exc}") from exc
    except aiohttp.ClientError as exc:  # the request may have reached the server
        raise ChannelTimeout(f"the connection failed: {exc}") from exc
    except (nio.exceptions.LocalProtocolError, nio.exceptions.OlmTrustError) as exc:
        raise ChannelWriteFailed(f"cannot encrypt for the room: {exc}") from exc
    except (nio.exceptions.EncryptionError, nio.exceptions.GroupEncryptionError) as exc:
        raise ChannelWriteFailed(f"cannot encrypt for the room: {exc}") from exc
    if isinstance(response, nio.ErrorResponse):
        raise translate(response, length)
    return response


def translate(response: nio.ErrorResponse, length: int) -> Exception:
    """An error response as the channel error the engine acts on; ``length`` is the text's
    length in characters (for :class:`MessageTooLong`)."""
    code = str(response.status_code or "")
    status = getattr(getattr(response, "transport_response", None), "status", 0) or 0
    if code == "M_LIMIT_EXCEEDED" or status == 429:
        wait_ms = response.retry_after_ms
        return ChannelRateLimited(
            (wait_ms if wait_ms is not None else DEFAULT_RETRY_AFTER_MS) / 1000
        )
    if code == "M_TOO_LARGE":
        return MessageTooLong(MATRIX_MAX_TEXT_LENGTH, length)
    if code == "M_NOT_FOUND":
        return MessageGone(f"{code}: {response.message}")
    if status >= 500:
        return ChannelUnavailable(f"the homeserver answered {status}: {response.message}")
    return ChannelWriteFailed(f"{code or status}: {response.message}")
