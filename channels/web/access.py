"""Who may use a channel served over HTTP (``kind: web``, ``kind: openai_api``; architecture §3
"Access"): bearer tokens compared in constant time, a reverse proxy's user header, and the
loopback rule of ``auth: none``. Pure: strings in, answers out."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Sequence

__all__ = ["bearer_token", "is_loopback", "is_loopback_listen", "token_identity", "token_index"]


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (RFC 6750 §2.1), else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def token_index(given: str | None, tokens: Sequence[str]) -> int | None:
    """The index of ``given`` among ``tokens`` (each compared in constant time), else None."""
    if not given:
        return None
    found = None
    for index, token in enumerate(tokens):
        if hmac.compare_digest(given.encode(), token.encode()):
            found = index
    return found


def token_identity(token: str) -> str:
    """A stable sender id for a token (``key-`` and 12 hex digits of its SHA-256): what
    ``allowed_users``, budgets and logs see instead of the token itself."""
    return "key-" + hashlib.sha256(token.encode()).hexdigest()[:12]


def is_loopback(host: str) -> bool:
    """``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_listen(listen: str | None) -> bool:
    """``server.listen`` binds a loopback address only (an empty host is 127.0.0.1)."""
    if listen is None:
        return False
    host = listen.rpartition(":")[0]
    return host == "" or is_loopback(host)
