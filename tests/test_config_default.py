"""The embedded default config of ``relaybot run`` without a file (architecture §7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels.console.kind import ConsoleChannelConfig
from channels.web.kind import WebChannelConfig
from config.default import ANTHROPIC_MODEL, default_store_path, default_yaml_text
from config.loader import default_config


def test_default_yaml_is_package_data() -> None:
    assert "kind: console" in default_yaml_text()


def test_with_openai_api_key_uses_openai() -> None:
    config = default_config({"OPENAI_API_KEY": "sk-test", "HOME": "/home/u"}, demo_base_url=None)
    assert list(config.providers) == ["openai"]
    provider = config.providers["openai"]
    assert (provider.kind, provider.model) == ("openai_chat", "gpt-4.1-mini")
    assert provider.resolved_base_url == "https://api.openai.com/v1"
    assert provider.api_key is not None and provider.api_key.get_secret_value() == "sk-test"
    assert config.agent.providers == ["openai"]


def test_openai_key_wins_over_the_demo_and_base_url_may_be_overridden() -> None:
    environ = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    config = default_config(environ, demo_base_url="http://127.0.0.1:8/v1")
    assert config.agent.providers == ["openai"]
    assert config.providers["openai"].resolved_base_url == "http://127.0.0.1:9/v1"


def test_without_a_key_uses_the_demo_model() -> None:
    config = default_config({"OPENAI_API_KEY": ""}, demo_base_url="http://127.0.0.1:5555/v1")
    assert list(config.providers) == ["demo"]
    demo = config.providers["demo"]
    assert (demo.kind, demo.model) == ("openai_chat", "relaybot-demo")
    assert demo.resolved_base_url == "http://127.0.0.1:5555/v1"
    assert config.agent.providers == ["demo"]


def test_without_a_key_or_a_demo_server_it_refuses() -> None:
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        default_config({}, demo_base_url=None)


def test_the_console_and_the_web_page_on_a_free_loopback_port() -> None:
    config = default_config({}, demo_base_url="http://127.0.0.1:1/v1")
    assert list(config.channels) == ["console", "web"]
    console = config.channels["console"]
    assert isinstance(console, ConsoleChannelConfig)
    assert console.stream_drafts is True
    web = config.channels["web"]
    assert isinstance(web, WebChannelConfig) and web.auth == "none"
    assert config.server.listen == "127.0.0.1:0"
    assert config.agent.tools == ["current_time"]


def test_store_path_follows_xdg() -> None:
    config = default_config({"XDG_DATA_HOME": "/data"}, demo_base_url="http://127.0.0.1:1/v1")
    assert config.storage.path == "/data/relaybot/relaybot.db"
    assert default_store_path({"HOME": "/home/u"}) == Path(
        "/home/u/.local/share/relaybot/relaybot.db"
    )
    # The XDG spec: an empty or relative XDG_DATA_HOME is ignored.
    for value in ("", "relative/dir"):
        assert default_store_path({"XDG_DATA_HOME": value, "HOME": "/h"}) == Path(
            "/h/.local/share/relaybot/relaybot.db"
        )


def test_with_only_anthropic_api_key_uses_anthropic_with_the_documented_model() -> None:
    config = default_config({"ANTHROPIC_API_KEY": "sk-ant-test"}, demo_base_url="http://x:1/v1")
    assert list(config.providers) == ["anthropic"]
    provider = config.providers["anthropic"]
    assert (provider.kind, provider.model) == ("anthropic", ANTHROPIC_MODEL)
    assert ANTHROPIC_MODEL == "claude-haiku-4-5"
    assert provider.base_url is None  # the provider's own default API root
    assert provider.api_key is not None and provider.api_key.get_secret_value() == "sk-ant-test"
    assert config.agent.providers == ["anthropic"]
    # Documented where a user looks: the help of `relaybot run`, the README, default.yaml.
    assert ANTHROPIC_MODEL in default_yaml_text()
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "ANTHROPIC_API_KEY" in readme and ANTHROPIC_MODEL in readme


def test_anthropic_model_and_base_url_come_from_the_sdk_variables() -> None:
    environ = {
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_MODEL": "claude-opus-4-5",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    }
    provider = default_config(environ).providers["anthropic"]
    assert (provider.model, provider.base_url) == ("claude-opus-4-5", "http://127.0.0.1:9")


def test_openai_key_wins_over_anthropic_key() -> None:
    config = default_config({"OPENAI_API_KEY": "sk", "ANTHROPIC_API_KEY": "k"})
    assert config.agent.providers == ["openai"]
    # Empty variables count as unset.
    config = default_config({"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": "k"})
    assert config.agent.providers == ["anthropic"]
    config = default_config({"ANTHROPIC_API_KEY": ""}, demo_base_url="http://127.0.0.1:1/v1")
    assert config.agent.providers == ["demo"]


def test_openai_model_is_honoured_and_wins_over_a_listed_model() -> None:
    environ = {"OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "gpt-5-nano"}
    config = default_config(environ, demo_base_url=None, listed_model="llama3.2")
    assert config.providers["openai"].model == "gpt-5-nano"
    listed = default_config({"OPENAI_API_KEY": "k"}, demo_base_url=None, listed_model="qwen3")
    assert listed.providers["openai"].model == "qwen3"
