"""Build a :class:`Channel` from its config (one module per network, imported lazily)."""

from __future__ import annotations

import importlib
from typing import Any

from channels.base import Channel, InboundHandler

__all__ = ["CHANNEL_CLASSES", "build_channel"]

CHANNEL_CLASSES: dict[str, str] = {
    "console": "channels.console:ConsoleChannel",
    "telegram": "channels.telegram:TelegramChannel",
    "matrix": "channels.matrix:MatrixChannel",
    "discord": "channels.discord:DiscordChannel",
}


def build_channel(name: str, config: Any, on_inbound: InboundHandler) -> Channel:
    """Instantiate the adapter for ``config.kind``.

    Raises:
        NotImplementedError: the kind's adapter is not available in this build (the daemon turns
            this into a one-line start error naming the channel).
    """
    module_name, _, class_name = CHANNEL_CLASSES[config.kind].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise NotImplementedError(f"channel kind {config.kind!r} is not available yet") from exc
    cls: type[Channel] = getattr(module, class_name)
    return cls(name, config, on_inbound)
