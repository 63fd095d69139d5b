"""JSON Schema, the generated channel capability table and the platform limits (architecture §3,
§6)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from telegram.constants import MessageLimit

from channels.base import utf16_len
from channels.matrix.kind import MATRIX_MAX_EVENT_BYTES, MATRIX_MAX_TEXT_LENGTH
from channels.registry import LIMITS_BY_KIND
from config.schema import (
    CAPABILITIES_END,
    CAPABILITIES_START,
    channel_capability_table,
    channel_models,
    json_schema,
    main,
    readme_capability_table,
    replace_capability_table,
)

REPO = Path(__file__).resolve().parents[1]
TELEGRAM_LIMITS = LIMITS_BY_KIND["telegram"]
DISCORD_LIMITS = LIMITS_BY_KIND["discord"]
MATRIX_LIMITS = LIMITS_BY_KIND["matrix"]


def test_telegram_limit_is_python_telegram_bots() -> None:
    assert TELEGRAM_LIMITS.max_length == MessageLimit.MAX_TEXT_LENGTH
    assert TELEGRAM_LIMITS.unit == "utf16"
    assert TELEGRAM_LIMITS.measure("😀") == utf16_len("😀") == 2


def test_discord_and_matrix_count_characters() -> None:
    assert (DISCORD_LIMITS.max_length, DISCORD_LIMITS.unit) == (2000, "chars")
    assert MATRIX_LIMITS.unit == "chars"


def test_matrix_limit_fits_an_edit_event() -> None:
    # An edit carries the text four times (body, formatted_body, and both in m.new_content),
    # each code point up to 4 bytes of UTF-8.
    assert MATRIX_MAX_TEXT_LENGTH * 4 * 4 < MATRIX_MAX_EVENT_BYTES


def test_every_channel_kind_has_limits() -> None:
    """Every ``channels/<kind>/`` folder is a registered kind, and every kind has its limits."""
    kinds = {model.model_fields["kind"].annotation.__args__[0] for model in channel_models()}
    folders = {path.parent.name for path in (REPO / "channels").glob("*/kind.py")}
    assert kinds == set(LIMITS_BY_KIND) == folders >= {"telegram", "matrix", "discord", "console"}
    assert LIMITS_BY_KIND["console"].max_length == sys.maxsize


def test_capability_table() -> None:
    assert channel_capability_table() == (
        "| Kind | Stream modes | Default | `draft_update_interval_ms` default | Message limit |\n"
        "|---|---|---|---|---|\n"
        "| `telegram` | `stream_mode`: `off`, `partial`, `multi_message` | "
        "`stream_mode: partial` | 1000 | 4096 UTF-16 code units |\n"
        "| `matrix` | `stream_mode`: `off`, `partial`, `multi_message` | "
        "`stream_mode: multi_message` | 1500 | 4000 characters |\n"
        "| `discord` | `stream_mode`: `off`, `partial`, `multi_message` | "
        "`stream_mode: partial` | 1000 | 2000 characters |\n"
        "| `slack` | `stream_mode`: `off`, `partial`, `multi_message` | "
        "`stream_mode: partial` | 1000 | 40000 characters |\n"
        "| `console` | `stream_drafts`: `true` (as `partial`), `false` (as `off`) | "
        "`stream_drafts: true` | 100 | unlimited |\n"
        "| `web` | `partial` | `partial` | 100 | unlimited |\n"
        "| `openai_api` | `partial` | `partial` | 50 | unlimited |\n"
    )


def test_readme_capability_table_is_the_generated_one() -> None:
    readme = REPO / "README.md"
    if not readme.exists():
        pytest.skip("README.md does not exist yet")
    text = readme.read_text(encoding="utf-8")
    assert CAPABILITIES_START in text and CAPABILITIES_END in text, (
        f"README.md must hold the channel capability table between {CAPABILITIES_START} and "
        f"{CAPABILITIES_END} (generate it with: python -m config.schema --table)"
    )
    block = readme_capability_table(text)
    assert block is not None
    assert block.strip() == channel_capability_table().strip(), (
        "the README's capability table is stale: regenerate it with python -m config.schema --table"
    )


def test_readme_block_is_found_and_replaced(tmp_path: Path) -> None:
    stale = f"# relaybot\n\n{CAPABILITIES_START}\n| old |\n{CAPABILITIES_END}\n\nMore.\n"
    assert readme_capability_table(stale) == "\n| old |\n"
    assert readme_capability_table("# no markers\n") is None
    fresh = replace_capability_table(stale)
    assert fresh == (
        f"# relaybot\n\n{CAPABILITIES_START}\n{channel_capability_table()}{CAPABILITIES_END}"
        "\n\nMore.\n"
    )
    assert (readme_capability_table(fresh) or "").strip() == channel_capability_table().strip()
    readme = tmp_path / "README.md"
    readme.write_text(stale, encoding="utf-8")
    assert main(["--update-readme", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == fresh
    with pytest.raises(ValueError, match="capabilities:start"):
        replace_capability_table("# no markers\n")


def test_json_schema_describes_the_file() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) == {
        "providers",
        "agent",
        "policy",
        "channels",
        "storage",
        "server",
        "limits",
        "speech",
    }
    assert schema["required"] == ["agent", "channels"]
    assert schema["additionalProperties"] is False
    defs = schema["$defs"]
    assert defs["TelegramChannelConfig"]["additionalProperties"] is False
    token = defs["TelegramChannelConfig"]["properties"]["token"]
    assert token["format"] == "password" and token["writeOnly"] is True
    channels = schema["properties"]["channels"]["additionalProperties"]
    assert channels["discriminator"]["propertyName"] == "kind"
    json.dumps(schema)  # serialisable as is


def test_module_prints_the_table_and_the_schema() -> None:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    table = subprocess.run(
        [sys.executable, "-m", "config.schema", "--table"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=REPO,
    )
    assert table.stdout == channel_capability_table()
    schema = subprocess.run(
        [sys.executable, "-m", "config.schema"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=REPO,
    )
    assert json.loads(schema.stdout) == json_schema()
