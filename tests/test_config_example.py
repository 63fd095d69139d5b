"""``config/example.yaml`` validates and shows every key of the config (architecture §6)."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from channels.telegram.kind import TelegramChannelConfig, WebhookConfig
from config.loader import load_config
from config.models import (
    AgentConfig,
    GuardrailConfig,
    PolicyConfig,
    ProviderConfig,
    RelaybotConfig,
    SecretPatternConfig,
    ServerConfig,
    SpeechConfig,
    StorageConfig,
)
from config.schema import channel_models
from config.source import read_yaml
from config.tools import McpHttpServerConfig, McpStdioServerConfig

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example.yaml"
FAKE_ENV = {
    "STATE_DIRECTORY": "/var/lib/relaybot",
    "OPENAI_API_KEY": "sk-fake-openai",
    "ANTHROPIC_API_KEY": "sk-ant-fake",
    "TELEGRAM_BOT_TOKEN": "123456:fake-telegram",
    "TELEGRAM_WEBHOOK_SECRET": "fake-webhook-secret",
    "MATRIX_ACCESS_TOKEN": "syt_fake",
    "DISCORD_BOT_TOKEN": "fake.discord.token",
    "SLACK_BOT_TOKEN": "xoxb-fake-slack",
    "SLACK_APP_TOKEN": "xapp-fake-slack",
    "MCP_SEARCH_TOKEN": "fake-mcp-token",
    "WEB_TOKEN": "fake-web-token-0123456789",
    "API_TOKEN": "fake-api-token-0123456789",
}


def _fields(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


@pytest.fixture
def data() -> Any:
    doc = read_yaml(EXAMPLE.read_text("utf-8"), source_name=str(EXAMPLE), environ=FAKE_ENV)
    assert doc.issues == []
    return doc.data


def test_example_validates_with_every_secret_from_the_environment() -> None:
    config = load_config(EXAMPLE, environ=FAKE_ENV)
    secrets = {
        config.providers["main"].api_key,
        config.providers["responses"].api_key,
        config.providers["claude"].api_key,
    }
    assert {s.get_secret_value() for s in secrets if s is not None} == {
        "sk-fake-openai",
        "sk-ant-fake",
    }
    telegram = config.channels["tg"]
    assert isinstance(telegram, TelegramChannelConfig)
    assert telegram.token.get_secret_value() == FAKE_ENV["TELEGRAM_BOT_TOKEN"]
    assert telegram.webhook is not None and telegram.webhook.secret_token is not None
    assert config.providers["local"].resolved_base_url == "http://127.0.0.1:11434"
    # A relative storage.path is in the state directory, not beside the file (architecture §6).
    assert Path(config.storage.path) == Path(FAKE_ENV["STATE_DIRECTORY"]) / "relaybot.db"


def test_example_needs_each_secret_variable() -> None:
    # Every secret is written as ${VAR}: without the environment the file does not load.
    from config.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLE, environ={})
    missing = {issue.message.split()[2] for issue in info.value.errors}
    assert missing == set(FAKE_ENV) - {"STATE_DIRECTORY"}


def test_example_shows_every_key(data: Any) -> None:
    assert set(data) == _fields(RelaybotConfig)
    providers = data["providers"].values()
    assert {p["kind"] for p in providers} == set(
        typing.get_args(ProviderConfig.model_fields["kind"].annotation)
    )
    assert set().union(*providers) == _fields(ProviderConfig)
    assert set(data["agent"]) == _fields(AgentConfig)
    assert set(data["speech"]) == _fields(SpeechConfig)
    servers = data["agent"]["mcp_servers"]
    assert set(servers["fetch"]) == _fields(McpStdioServerConfig)
    assert set(servers["search"]) == _fields(McpHttpServerConfig)
    assert set(data["policy"]) == _fields(PolicyConfig)
    assert set(data["policy"]["extra_secret_patterns"][0]) == _fields(SecretPatternConfig)
    assert set(data["policy"]["guardrails"][0]) == _fields(GuardrailConfig)
    by_kind = {channel["kind"]: channel for channel in data["channels"].values()}
    for model in channel_models():
        kind = typing.get_args(model.model_fields["kind"].annotation)[0]
        assert set(by_kind[kind]) == _fields(model), kind
    assert set(by_kind["telegram"]["webhook"]) == _fields(WebhookConfig)
    assert set(data["storage"]) == _fields(StorageConfig)
    assert set(data["server"]) == _fields(ServerConfig)


def test_example_writes_every_secret_as_a_variable() -> None:
    text = EXAMPLE.read_text("utf-8")
    for value in FAKE_ENV.values():
        assert value not in text
    for line in text.splitlines():
        key = line.split("#", 1)[0].strip().split(":", 1)[0]
        if key in {"api_key", "token", "access_token", "secret_token"}:
            assert "${" in line, line
