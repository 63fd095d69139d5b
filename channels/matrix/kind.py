"""What the registry knows of Matrix (architecture §3 "Kinds"): the config model of a
``kind: matrix`` channel, its message limit, and the adapter's import path. Pydantic and
numbers only (:mod:`channels.kind`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from channels.base import ChannelLimits
from channels.kind import ChannelKind
from channels.settings import StreamModeSettings
from config.errors import LocatedValueError
from config.fields import StreamMode, check_http_url

__all__ = ["KIND", "MATRIX_MAX_EVENT_BYTES", "MATRIX_MAX_TEXT_LENGTH", "MatrixChannelConfig"]

MATRIX_MAX_EVENT_BYTES = 65536
"""Maximum size of one Matrix event, in bytes of canonical JSON in the federation format.

Source: Matrix spec, Client-Server API, "Size limits"; Synapse rejects a larger event with
``M_TOO_LARGE``.
"""

MATRIX_MAX_TEXT_LENGTH = 4000
"""Our limit for the text of one Matrix message, in characters (code points). Matrix itself
limits only the event size (:data:`MATRIX_MAX_EVENT_BYTES`).

Derivation: an edit event carries the text four times (``body`` and ``formatted_body``, in the
event and again in ``m.new_content``) and a code point takes up to 4 bytes of UTF-8, so
65536 / 16 = 4096 code points fit; 4000 leaves 1536 bytes for the event envelope, and HTML
markup fits in the slack of real text (most code points take 1–3 bytes).
"""

_MXID = re.compile(r"@[\x21-\x39\x3b-\x7e]+:(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
"""A Matrix user id (Matrix spec, Appendices, "User Identifiers" and "Server Name"): ``@``, a
localpart of printable ASCII without ``:`` (historical ids included), ``:``, a server name
(DNS name, IPv4 or bracketed IPv6, optional port); at most 255 bytes."""
_MXID_MAX_BYTES = 255


class MatrixChannelConfig(StreamModeSettings):
    """A Matrix account (matrix-nio)."""

    kind: Literal["matrix"]
    homeserver: str = Field(description="homeserver URL, e.g. https://matrix.example.org")
    user_id: str = Field(description='full user id, e.g. "@bot:example.org"')
    access_token: SecretStr | None = Field(
        default=None, description="log in with this token (with device_id); or use password"
    )
    device_id: str | None = Field(default=None, description="the device of access_token")
    password: SecretStr | None = Field(
        default=None, description="log in with the password when no access_token is given"
    )
    allowed_rooms: list[str] = Field(
        default_factory=list, description="room ids the bot answers and joins; empty = any room"
    )
    notice_previews: bool = Field(
        default=False, description="partial: drafts as m.notice; the finished answer as m.text"
    )
    live_marker: bool = Field(
        default=False, description="partial: mark the draft live (MSC4357) until its final edit"
    )
    store_path: str | None = Field(
        default=None, description="directory of the end-to-end encryption store (matrix-nio[e2e])"
    )
    stream_mode: StreamMode = Field(
        default="multi_message",
        description="off: one message at the end; partial: edit a draft in place; "
        "multi_message: one message per paragraph",
    )
    draft_update_interval_ms: int = Field(
        default=1500, ge=50, description="milliseconds between consecutive writes to one room"
    )
    max_edits_per_message: int = Field(
        default=100, ge=1, description="then no more edits; the final text is still delivered"
    )
    command_prefix: str = Field(
        default="!",
        min_length=1,
        max_length=3,
        description="what starts a command (!model smart); / works too where the client sends it",
    )

    _homeserver = field_validator("homeserver")(check_http_url)

    @field_validator("user_id")
    @classmethod
    def _mxid(cls, value: str) -> str:
        if not _MXID.fullmatch(value) or len(value.encode()) > _MXID_MAX_BYTES:
            raise ValueError('expected a Matrix user id "@name:server", e.g. "@bot:example.org"')
        return value

    @model_validator(mode="after")
    def _credentials(self) -> MatrixChannelConfig:
        if self.access_token is None and self.password is None:
            raise LocatedValueError((("access_token",), "give access_token or password"))
        return self


KIND = ChannelKind(
    config=MatrixChannelConfig,
    limits=ChannelLimits(MATRIX_MAX_TEXT_LENGTH, "chars"),
    adapter="channels.matrix.adapter:MatrixChannel",
)
