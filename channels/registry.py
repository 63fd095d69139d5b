"""The channel kinds: one line each (architecture §3 "Kinds"), and everything derived from them.

Theory of operation: :data:`KIND_MODULES` names the ``kind.py`` of each network's folder, in the
order the config's JSON Schema and the README's capability table list them. Each of those
modules builds one :class:`~channels.kind.ChannelKind` (config model, limits, adapter path) and
imports only pydantic and numbers, so the config loader can import this module without loading
any network library. From the list come :data:`KINDS`, the ``channels`` section's discriminated
union (:data:`ChannelConfig`), :data:`LIMITS_BY_KIND` and :data:`CHANNEL_CLASSES`;
:func:`build_channel` imports an adapter only when a channel of its kind is built. Adding a kind
is a folder ``channels/<kind>/`` and one line here (``docs/extending.md``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from channels.base import Channel, ChannelLimits, InboundHandler
from channels.kind import ChannelKind

__all__ = [
    "CHANNEL_CLASSES",
    "KINDS",
    "KIND_MODULES",
    "LIMITS_BY_KIND",
    "ChannelConfig",
    "build_channel",
    "load_kinds",
]

KIND_MODULES: tuple[str, ...] = (
    "channels.telegram.kind",
    "channels.matrix.kind",
    "channels.discord.kind",
    "channels.slack.kind",
    "channels.console.kind",
    "channels.web.kind",
    "channels.openai_api.kind",
)
"""The ``kind.py`` of every channel kind: the one line a new kind adds."""


def load_kinds(modules: Sequence[str]) -> Mapping[str, ChannelKind]:
    """Import each module's ``KIND``; returns them by name, in the order given.

    Raises:
        TypeError: a module has no :class:`ChannelKind` named ``KIND``.
        ValueError: two modules name the same kind.
    """
    kinds: dict[str, ChannelKind] = {}
    for module_name in modules:
        kind = getattr(importlib.import_module(module_name), "KIND", None)
        if not isinstance(kind, ChannelKind):
            raise TypeError(f"{module_name}.KIND must be a channels.kind.ChannelKind")
        if kind.name in kinds:
            raise ValueError(f"channel kind {kind.name!r} is listed twice")
        kinds[kind.name] = kind
    return MappingProxyType(kinds)


KINDS: Mapping[str, ChannelKind] = load_kinds(KIND_MODULES)
"""Every channel kind by its ``kind`` value."""

LIMITS_BY_KIND: Mapping[str, ChannelLimits] = MappingProxyType(
    {name: kind.limits for name, kind in KINDS.items()}
)
"""The message limit of each kind."""

CHANNEL_CLASSES: Mapping[str, str] = MappingProxyType(
    {name: kind.adapter for name, kind in KINDS.items()}
)
"""``"module:Class"`` of each kind's adapter."""

if TYPE_CHECKING:
    from channels.settings import ChannelSettings

    ChannelConfig = ChannelSettings
else:
    ChannelConfig = Annotated[
        Union[tuple(kind.config for kind in KINDS.values())],  # noqa: UP007 - built at run time
        Field(discriminator="kind"),
    ]
"""One channel of the config file: the discriminated union of every kind's model (``kind``
tells them apart). Type checkers see the shared base model."""


def build_channel(name: str, config: Any, on_inbound: InboundHandler) -> Channel:
    """Instantiate the adapter for ``config.kind``.

    Raises:
        NotImplementedError: the kind's adapter is not available in this build (the daemon turns
            this into a one-line start error naming the channel).
    """
    cls = KINDS[config.kind].adapter_class()
    return cls(name, config, on_inbound)
