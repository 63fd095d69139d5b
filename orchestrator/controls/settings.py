"""Per-chat settings (architecture §5 "Chat controls"), pure: which model and which system
prompt a conversation uses, and the texts of ``/model``, ``/system`` and ``/settings``.

The store keeps a conversation's settings by key (``model``: an alias of ``agent.models``;
``system_prompt``: text); an absent key means the config's value. A setting made in a topic or
thread applies there; one made in the chat applies to its topics that set none.
"""

from __future__ import annotations

from collections.abc import Mapping

from config.models import AgentConfig, RelaybotConfig

__all__ = [
    "MODEL",
    "SYSTEM_PROMPT",
    "model_alias",
    "model_list",
    "model_of",
    "settings_text",
    "system_prompt",
]

MODEL = "model"
SYSTEM_PROMPT = "system_prompt"
_PROMPT_SHOWN = 300


def model_alias(settings: Mapping[str, str], agent: AgentConfig) -> str | None:
    """The chat's model alias, when it is still one of ``agent.models`` (an alias a reload
    removed falls back to the configured chain)."""
    alias = settings.get(MODEL)
    return alias if alias in agent.models else None


def model_of(settings: Mapping[str, str], config: RelaybotConfig) -> tuple[str, str]:
    """(provider name, model) the chat's next request goes to: its alias, else the first
    provider of ``agent.providers``."""
    alias = model_alias(settings, config.agent)
    if alias is not None:
        entry = config.agent.models[alias]
        return entry.provider, entry.model or config.providers[entry.provider].model
    name = config.agent.providers[0]
    return name, config.providers[name].model


def system_prompt(settings: Mapping[str, str], agent: AgentConfig) -> str:
    """The chat's system prompt: its own, else ``agent.system_prompt``."""
    return settings.get(SYSTEM_PROMPT, agent.system_prompt)


def model_list(settings: Mapping[str, str], config: RelaybotConfig) -> str:
    """``/model``: the aliases offered, the chat's marked."""
    agent = config.agent
    if not agent.models:
        provider, model = model_of(settings, config)
        return f"Model: {model} ({provider}). No other models are configured (agent.models)."
    current = model_alias(settings, agent)
    lines = ["Models (/model NAME switches; /model default goes back):"]
    for alias, entry in agent.models.items():
        mark = "•" if alias == current else " "
        model = entry.model or config.providers[entry.provider].model
        lines.append(f"{mark} {alias}: {model} ({entry.provider})")
    if current is None:
        provider, model = model_of(settings, config)
        lines.append(f"Now: the default, {model} ({provider}).")
    return "\n".join(lines)


def settings_text(settings: Mapping[str, str], config: RelaybotConfig) -> str:
    """``/settings``: the chat's model and system prompt, and where each comes from."""
    provider, model = model_of(settings, config)
    alias = model_alias(settings, config.agent)
    source = f"/model {alias}" if alias else "configured"
    prompt = system_prompt(settings, config.agent)
    if len(prompt) > _PROMPT_SHOWN:
        prompt = prompt[:_PROMPT_SHOWN] + "…"
    prompt_source = "set with /system" if SYSTEM_PROMPT in settings else "configured"
    return f"Model: {model} ({provider}; {source})\nSystem prompt ({prompt_source}): {prompt}"
