"""What the registry knows of one channel kind (architecture §3 "Kinds"): its config model, its
message limit and where its adapter lives.

Theory of operation: each network's folder (``channels/<kind>/``) ends in a ``kind.py`` that
builds one :class:`ChannelKind`; :mod:`channels.registry` lists those modules, and everything
that depends on the set of kinds — the ``channels`` section's discriminated union, the JSON
Schema, the README's capability table, ``check-config``'s list of kinds, the architecture tests —
is derived from that list. A ``kind.py`` holds only pydantic models and numbers: the config
loader imports every one of them, and loading one must not load its network's library. The
adapter is named by import path and loaded only when a channel of that kind is built.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from channels.base import ChannelLimits

if TYPE_CHECKING:
    from channels.base import Channel
    from channels.settings import ChannelSettings

__all__ = ["UNLIMITED", "ChannelKind"]

UNLIMITED = sys.maxsize
"""A ``max_length`` meaning "no limit" (the console)."""


@dataclass(frozen=True, slots=True)
class ChannelKind:
    """One channel kind of the config file.

    Attributes:
        config: the pydantic model of one channel of this kind; its ``kind`` field is
            ``Literal["<name>"]`` (the discriminator of the ``channels`` section).
        limits: the platform's message limit, written once (each number's source in the
            docstring of the constant it is built from).
        adapter: ``"module:Class"`` of the :class:`~channels.base.Channel` subclass, imported
            when a channel of this kind is built.
    """

    config: type[ChannelSettings]
    limits: ChannelLimits
    adapter: str

    @property
    def name(self) -> str:
        """The ``kind`` value of the config file, read off the model's discriminator."""
        annotation = self.config.model_fields["kind"].annotation
        (value,) = getattr(annotation, "__args__", (None,))
        if not isinstance(value, str):
            raise TypeError(f"{self.config.__name__}.kind must be a Literal of one string")
        return value

    @property
    def adapter_module(self) -> str:
        """The import path of the adapter's module."""
        return self.adapter.partition(":")[0]

    def adapter_class(self) -> type[Channel]:
        """Import the adapter.

        Raises:
            NotImplementedError: the adapter's module is absent from this build (the daemon turns
                this into a one-line start error naming the channel).
        """
        module_name, _, class_name = self.adapter.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            raise NotImplementedError(f"channel kind {self.name!r} is not available yet") from exc
        cls: type[Channel] = getattr(module, class_name)
        return cls

    def describe_limit(self) -> str:
        """The limit in words, as the capability table prints it (``"4096 UTF-16 code units"``)."""
        if self.limits.max_length >= UNLIMITED:
            return "unlimited"
        if self.limits.unit == "utf16":
            return f"{self.limits.max_length} UTF-16 code units"
        return f"{self.limits.max_length} characters"
