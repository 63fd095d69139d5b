"""``relaybot check-config`` / ``run --config`` print the loader's messages (architecture §6,
§7)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from config.schema import json_schema

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("orchestrator.cli") is None, reason="orchestrator.cli not built yet"
)

SECRET = "sk-proj-CLISECRETclisecret0123456789"
BAD = """\
providers:
  main: {kind: openai_chat, api_key: "${OPENAI_API_KEY}", model: m, timeout_secs: soon}
agent:
  providers: [main, backup]
channels:
  term: {kind: console, colour: blue}
"""


def _relaybot(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_check_config_accepts_the_example() -> None:
    env = {
        "OPENAI_API_KEY": "k",
        "ANTHROPIC_API_KEY": "k",
        "TELEGRAM_BOT_TOKEN": "1:k",
        "TELEGRAM_WEBHOOK_SECRET": "k",
        "MATRIX_ACCESS_TOKEN": "k",
        "DISCORD_BOT_TOKEN": "k",
        "SLACK_BOT_TOKEN": "k",
        "SLACK_APP_TOKEN": "k",
        "MCP_SEARCH_TOKEN": "k",
        "WEB_TOKEN": "web-token-0123456789",
        "API_TOKEN": "api-token-0123456789",
    }
    from orchestrator.ops.config_checks import available_channel_kinds

    result = _relaybot("check-config", "config/example.yaml", env=env)
    assert result.returncode == 0, result.stderr
    # Only warnings, one per channel whose kind this version cannot start.
    missing = {"matrix", "discord", "slack"} - available_channel_kinds()
    warned = {line.split("'")[1] for line in result.stderr.splitlines()}
    assert warned == missing
    assert all(": warning: channel kind '" in line for line in result.stderr.splitlines())
    assert result.stdout.startswith("config/example.yaml: ")


@pytest.mark.parametrize("command", [["check-config"], ["run", "--config"]])
def test_bad_config_prints_file_line_messages_and_exits_2(
    tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD, encoding="utf-8")
    result = _relaybot(*command, str(path), env={"OPENAI_API_KEY": SECRET})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{path}:2: providers.main.timeout_secs: expected a number",
        f"{path}:4: agent.providers[1]: unknown provider 'backup' (configured: main)",
        f"{path}:6: channels.term.colour: unknown key (expected one of: "
        "draft_update_interval_ms, allowed_users, respond_in_groups, show_reasoning, "
        "show_tool_status, admins, kind, stream_drafts)",
    ]
    assert SECRET[:12] not in result.stdout + result.stderr


def test_schema_command_prints_the_json_schema() -> None:
    result = _relaybot("schema")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json_schema()
