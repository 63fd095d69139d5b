"""Build a :class:`ModelProvider` from its config (one module per wire format, imported lazily)."""

from __future__ import annotations

import importlib

from config.models import ProviderConfig
from providers.base import ModelProvider

__all__ = ["PROVIDER_CLASSES", "build_provider"]

PROVIDER_CLASSES: dict[str, str] = {
    "openai_chat": "providers.openai_chat:OpenAIChatProvider",
    "openai_responses": "providers.openai_responses:OpenAIResponsesProvider",
    "anthropic": "providers.anthropic_messages:AnthropicMessagesProvider",
    "ollama": "providers.ollama_chat:OllamaChatProvider",
}


def build_provider(name: str, config: ProviderConfig) -> ModelProvider:
    """Instantiate the provider class for ``config.kind``.

    Raises:
        NotImplementedError: the kind's module is not available in this build.
    """
    module_name, _, class_name = PROVIDER_CLASSES[config.kind].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise NotImplementedError(f"provider kind {config.kind!r} is not available") from exc
    cls: type[ModelProvider] = getattr(module, class_name)
    return cls(name, config)  # type: ignore[call-arg]
