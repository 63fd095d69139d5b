"""The embedded default config of ``relaybot run`` without a config file (architecture §7).

``config/default.yaml`` holds what is fixed: the console channel and the web page, served on a
free loopback port (printed at start). What
depends on the run is added here: the provider (OpenAI with ``OPENAI_API_KEY``, model
``$OPENAI_MODEL``, else Anthropic with ``ANTHROPIC_API_KEY``, else the built-in demo model, whose
server address is known only once it listens) and the store's path under ``$XDG_DATA_HOME``.
:func:`config.loader.default_config` validates the result like any file.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from config.errors import ConfigIssue

__all__ = [
    "ANTHROPIC_MODEL",
    "ANTHROPIC_PROVIDER_NAME",
    "DEFAULT_SOURCE_NAME",
    "DEMO_API_KEY",
    "DEMO_MODEL",
    "DEMO_PROVIDER_NAME",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "OPENAI_PROVIDER_NAME",
    "PROVIDER_VARIABLES",
    "default_data",
    "default_store_path",
    "default_yaml_text",
    "environment_problems",
]

DEFAULT_SOURCE_NAME = "<embedded default>"
"""The ``FILE`` of messages about the embedded default (any such message is a bug)."""

OPENAI_PROVIDER_NAME = "openai"
OPENAI_MODEL = "gpt-4.1-mini"
"""Used unless ``OPENAI_MODEL`` is set, or ``OPENAI_BASE_URL`` names a server that lists its
models (then the first it lists: :func:`orchestrator.cli` asks it and passes ``listed_model``)."""
OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Used unless ``OPENAI_BASE_URL`` is set in the environment (the OpenAI SDK's variable)."""

PROVIDER_VARIABLES: dict[str, dict[str, str]] = {
    "openai": {"api_key": "OPENAI_API_KEY", "model": "OPENAI_MODEL", "base_url": "OPENAI_BASE_URL"},
    "anthropic": {
        "api_key": "ANTHROPIC_API_KEY",
        "model": "ANTHROPIC_MODEL",
        "base_url": "ANTHROPIC_BASE_URL",
    },
}
"""The environment variables the embedded default's provider (by name) reads, by field: what
a hint tells the user to set."""

ANTHROPIC_PROVIDER_NAME = "anthropic"
ANTHROPIC_MODEL = "claude-haiku-4-5"
"""Used unless ``ANTHROPIC_MODEL`` is set in the environment. The API root is the provider's
default unless ``ANTHROPIC_BASE_URL`` is set (the Anthropic SDK's variables)."""

DEMO_PROVIDER_NAME = "demo"
DEMO_MODEL = "relaybot-demo"
"""The model name the demo server reports (``orchestrator.ops.demo_model.MODEL_NAME``)."""
DEMO_API_KEY = "demo"
"""Sent to the demo server, which ignores it (``openai_chat`` requires a key)."""


def default_yaml_text() -> str:
    """The text of ``config/default.yaml`` (package data)."""
    return resources.files("config").joinpath("default.yaml").read_text(encoding="utf-8")


def default_store_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/relaybot/relaybot.db``, default ``$HOME/.local/share/relaybot/...``.

    Per the XDG Base Directory spec an unset, empty or relative ``XDG_DATA_HOME`` is ignored.
    """
    base = environ.get("XDG_DATA_HOME", "")
    if not base or not Path(base).is_absolute():
        home = environ.get("HOME") or str(Path.home())
        base = str(Path(home) / ".local" / "share")
    return Path(base) / "relaybot" / "relaybot.db"


def default_data(
    data: Any,
    environ: Mapping[str, str],
    *,
    demo_base_url: str | None,
    listed_model: str | None = None,
) -> dict[str, Any]:
    """Complete the data of ``default.yaml`` with the provider and the store path.

    Args:
        data: ``default.yaml`` read into plain data (not modified).
        environ: the environment.
        demo_base_url: the demo model's API root; used only without ``OPENAI_API_KEY`` and
            ``ANTHROPIC_API_KEY``.
        listed_model: the first model the ``OPENAI_BASE_URL`` server lists; the OpenAI model
            is ``$OPENAI_MODEL``, else this, else :data:`OPENAI_MODEL`.

    Returns:
        The completed data, to be validated. An empty variable counts as unset.

    Raises:
        ValueError: none of ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` and ``demo_base_url`` is
            given.
    """
    result: dict[str, Any] = copy.deepcopy(data) if isinstance(data, dict) else {}
    api_key = environ.get("OPENAI_API_KEY")
    if api_key:
        name = OPENAI_PROVIDER_NAME
        provider = {
            "kind": "openai_chat",
            "base_url": environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL,
            "api_key": api_key,
            "model": environ.get("OPENAI_MODEL") or listed_model or OPENAI_MODEL,
        }
    elif anthropic_key := environ.get("ANTHROPIC_API_KEY"):
        name = ANTHROPIC_PROVIDER_NAME
        provider = {
            "kind": "anthropic",
            "api_key": anthropic_key,
            "model": environ.get("ANTHROPIC_MODEL") or ANTHROPIC_MODEL,
        }
        if environ.get("ANTHROPIC_BASE_URL"):
            provider["base_url"] = environ["ANTHROPIC_BASE_URL"]
    elif demo_base_url:
        name = DEMO_PROVIDER_NAME
        provider = {
            "kind": "openai_chat",
            "base_url": demo_base_url,
            "api_key": DEMO_API_KEY,
            "model": DEMO_MODEL,
            "proxy": "none",  # served in this process: never through the environment's proxy
        }
    else:
        raise ValueError(
            "the embedded default config needs OPENAI_API_KEY, ANTHROPIC_API_KEY or a demo_base_url"
        )
    result["providers"] = {name: provider}
    result["agent"] = {**(result.get("agent") or {}), "providers": [name]}
    result["storage"] = {**(result.get("storage") or {}), "path": str(default_store_path(environ))}
    return result


def environment_problems(issues: Sequence[ConfigIssue]) -> list[str]:
    """What is wrong with the embedded default, said as the environment caused it: one line per
    issue, ``relaybot: OPENAI_API_KEY: <message>`` for a value taken from a variable
    (:data:`PROVIDER_VARIABLES`), else ``relaybot: <issue>``. Never the value itself (the
    messages hold none)."""
    variables = {
        f"providers.{name}.{field}": variable
        for name, fields in PROVIDER_VARIABLES.items()
        for field, variable in fields.items()
    }
    return [
        f"relaybot: {variables[issue.path]}: {issue.message}"
        if issue.path in variables
        else f"relaybot: {issue}"
        for issue in issues
    ]
