"""End-to-end encryption of the Matrix channel: whether it is on, and the device's keys.

Theory of operation
-------------------
Encrypted rooms need matrix-nio's ``e2e`` extra (``pip install 'relaybot[e2e]'`` installs
``matrix-nio[e2e]``: vodozemac for Olm/Megolm, peewee for nio's SQLite key store, atomicwrites and
cachetools) and a ``store_path``: the directory of nio's key store (``<user id>_<device id>.db``,
the device's Olm account, its Olm sessions and the rooms' Megolm sessions). It must survive
restarts: the homeserver keeps the device's public keys, and a device that lost its store cannot
read the rooms again nor upload new keys under the same device id.

:func:`refusal_cause` says why encrypted rooms are refused (``None``: they are not);
:func:`e2e_missing` imports the extra's modules, so a missing one is seen at the import seam the
way an installation without the extra would show it. With encryption on, nio decrypts timeline
events as it parses a sync (a decrypted event's ``source`` has the plaintext's ``type`` and
``content``, so the adapter reads it like any other) and encrypts ``room_send`` contents,
``m.relates_to`` copied to the cleartext so edits and threads still relate
(https://spec.matrix.org/latest/client-server-api/#end-to-end-encryption).
:class:`KeyKeeper` does what nio's own ``sync_forever`` does after each sync, for the adapter's
own sync loop: upload the device and one-time keys when the server holds too few, query the
members' device keys when their device lists changed, claim one-time keys for devices without an
Olm session and send the to-device messages nio queued. Devices are trusted on first use: the
bot shares room keys with every device of the room's members (``ignore_unverified_devices``).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import anyio
import nio

__all__ = ["E2E_MODULES", "KeyKeeper", "KeysRejected", "e2e_missing", "refusal_cause"]

_LOG = logging.getLogger("channels.matrix_crypto")

E2E_MODULES = ("vodozemac", "peewee", "atomicwrites", "cachetools")
"""What ``matrix-nio[e2e]`` adds (matrix-nio 0.26 metadata: ``Requires-Dist`` with
``extra == "e2e"``)."""


class KeysRejected(RuntimeError):
    """The homeserver refused the device's keys (e.g. the store was lost: the device's keys on
    the server are not the store's)."""


def e2e_missing() -> str | None:
    """``None`` when matrix-nio's end-to-end support imports; else the one-line cause."""
    for name in E2E_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            return f"install matrix-nio[e2e] ({name} cannot be imported)"
    if not nio.crypto.ENCRYPTION_ENABLED:
        return "install matrix-nio[e2e]"
    return None


def refusal_cause(store_path: str | None) -> str | None:
    """Why encrypted rooms are refused with this config's ``store_path``; ``None``: they are
    joined and answered."""
    missing = e2e_missing()
    if missing is not None:
        return missing
    if store_path is None:
        return "set store_path (a directory kept across restarts) for end-to-end encryption"
    return None


def _failed(response: Any) -> bool:
    return isinstance(response, nio.ErrorResponse)


class KeyKeeper:
    """Keeps one client's keys current; one round at a time (a send may need a key query while
    the sync loop runs one)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = anyio.Lock()

    async def upload(self, client: nio.AsyncClient) -> None:
        """Upload the device keys and one-time keys the server lacks.

        Raises:
            KeysRejected: the homeserver refused them; the message holds its answer.
        """
        async with self._lock:
            if client.should_upload_keys:
                response = await client.keys_upload()
                if _failed(response):
                    raise KeysRejected(f"{response.status_code}: {response.message}")

    async def refresh(self, client: nio.AsyncClient) -> None:
        """After a sync, or before a send into an encrypted room: every step nio asks for.
        A refused step is logged and tried again next time."""
        async with self._lock:
            if client.should_upload_keys:
                self._check("key upload", await client.keys_upload())
            if client.should_query_keys:
                self._check("key query", await client.keys_query())
            if client.should_claim_keys:
                users = client.get_users_for_key_claiming()
                self._check("key claim", await client.keys_claim(users))
            if client.outgoing_to_device_messages:
                for response in await client.send_to_device_messages():
                    self._check("a to-device message", response)

    def _check(self, what: str, response: Any) -> None:
        if _failed(response):
            _LOG.warning("%s: %s refused: %s", self._name, what, response.message)
