"""Logging the Matrix channel in: an access token or a password, and the device it runs as.

* ``access_token``: checked with ``/account/whoami``
  (https://spec.matrix.org/latest/client-server-api/#get_matrixclientv3accountwhoami), which
  also names the token's device; a configured ``device_id`` that differs is a start error (the
  key store would belong to another device). The client is then restored with that device, so
  nio opens the key store of that device when end-to-end encryption is on.
* ``password``: ``/login`` with the device id kept in the channel state (the first login's), so
  restarts neither pile up devices nor lose the device the key store belongs to.

A rejected credential or an unreachable homeserver is a :class:`ChannelStartError` with a
one-line cause, never the secret; a credential refused for good (:data:`REJECTED`, a token of
another user or device) is ``permanent``: the daemon does not retry it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
import nio

from channels.errors import ChannelStartError
from channels.matrix.client import InviteAwareClient
from channels.matrix.kind import MatrixChannelConfig

__all__ = ["DEVICE_KEY", "REJECTED", "log_in"]

DEVICE_KEY = "device_id"
"""The channel-state key of the device a password login created."""
REJECTED = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN", "M_USER_DEACTIVATED"})
"""Matrix error codes that say a credential is refused for good: the daemon does not retry."""


async def log_in(
    client: InviteAwareClient,
    config: MatrixChannelConfig,
    remember: Callable[[str, str], Awaitable[None]],
    *,
    encrypted: bool,
) -> None:
    """Log ``client`` in (module docstring); ``remember(key, value)`` keeps a value in the
    channel state; ``encrypted``: end-to-end encryption is on (a device id is then required).

    Raises:
        ChannelStartError: refused, unreachable, or no device to keep keys for; one line.
    """
    try:
        if config.access_token is not None:
            await _restore(client, config, config.access_token.get_secret_value(), encrypted)
            return
        assert config.password is not None
        login = await client.login(config.password.get_secret_value(), device_name="relaybot")
        if not isinstance(login, nio.LoginResponse):
            raise ChannelStartError(
                f"login refused ({login.status_code}: {login.message})",
                permanent=login.status_code in REJECTED,
            )
        await remember(DEVICE_KEY, login.device_id)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ChannelStartError(
            f"cannot reach the homeserver at {config.homeserver}: {exc}"
        ) from None


async def _restore(
    client: InviteAwareClient, config: MatrixChannelConfig, token: str, encrypted: bool
) -> None:
    client.user_id, client.access_token = config.user_id, token
    who = await client.whoami()
    if not isinstance(who, nio.WhoamiResponse):
        raise ChannelStartError(
            f"access token rejected ({who.status_code})", permanent=who.status_code in REJECTED
        )
    if who.user_id != config.user_id:
        raise ChannelStartError(f"the access token belongs to {who.user_id}", permanent=True)
    device = who.device_id or config.device_id or ""
    if config.device_id and who.device_id and who.device_id != config.device_id:
        raise ChannelStartError(
            f"the access token belongs to device {who.device_id}, not device_id {config.device_id}",
            permanent=True,
        )
    if encrypted and not device:
        raise ChannelStartError("end-to-end encryption needs the token's device_id", permanent=True)
    if device:  # nio opens the device's key store here (encryption on)
        client.restore_login(config.user_id, device, token)
