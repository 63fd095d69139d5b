"""Shared pieces of the config models: the strict base model (unknown keys are errors, values
frozen), the stream modes, and the URL checks used by several sections."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
)

__all__ = ["StreamMode", "Strict", "check_http_url", "check_listen", "check_proxy_url"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


StreamMode = Literal["off", "partial", "multi_message"]


def check_http_url(value: str) -> str:
    """Accept an absolute ``http://`` or ``https://`` URL with a host."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError("expected an http:// or https:// URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an http:// or https:// URL")
    return value


_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def check_proxy_url(value: str | None) -> str | None:
    """Accept ``http://``, ``https://``, ``socks5://`` or ``socks5h://`` URLs with a host."""
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in _PROXY_SCHEMES or not parts.hostname:
        raise ValueError("expected a proxy URL: http://, https://, socks5:// or socks5h://")
    return value


def check_listen(value: str | None) -> str | None:
    """Accept ``HOST:PORT`` (``[::1]:9464`` for IPv6), port 0–65535."""
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:9464")
    return value
