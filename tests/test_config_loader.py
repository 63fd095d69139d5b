"""The config loader's messages: ``FILE:LINE: key.path: message``, never a value (architecture
§6)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from channels.telegram.kind import TelegramChannelConfig
from config.errors import ConfigError, ConfigIssue
from config.loader import format_errors, load_config, load_config_text, load_storage_config
from config.models import RelaybotConfig

VALID = """\
providers:
  main:
    kind: openai_chat
    api_key: ${OPENAI_API_KEY}
    model: gpt-4.1-mini
agent:
  providers: [main]
channels:
  tg:
    kind: telegram
    token: ${TELEGRAM_BOT_TOKEN}
    stream_mode: off
"""
ENV = {"OPENAI_API_KEY": "sk-test-key", "TELEGRAM_BOT_TOKEN": "123:abc"}


def _errors(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> list[str]:
    path = tmp_path / "relaybot.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=ENV if environ is None else environ)
    return format_errors(info.value).replace(str(path), "FILE").splitlines()


def test_valid_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "relaybot.yaml"
    path.write_text(VALID, encoding="utf-8")
    config = load_config(path, environ=ENV)
    assert isinstance(config, RelaybotConfig)
    assert config.providers["main"].api_key is not None
    assert config.providers["main"].api_key.get_secret_value() == "sk-test-key"
    channel = config.channels["tg"]
    assert isinstance(channel, TelegramChannelConfig)
    assert channel.token.get_secret_value() == "123:abc"
    assert channel.stream_mode == "off"  # not YAML 1.1's False


def test_bad_yaml(tmp_path: Path) -> None:
    text = VALID.replace("  providers: [main]", "  providers: [main\n  x: 1")
    assert _errors(tmp_path, text) == [
        "FILE:8: yaml: while parsing a flow sequence: expected ',' or ']', but got ':'"
    ]


def test_unknown_key(tmp_path: Path) -> None:
    text = VALID.replace("    stream_mode: off", "    stream_mod: off")
    assert _errors(tmp_path, text) == [
        "FILE:12: channels.tg.stream_mod: unknown key (did you mean 'stream_mode'?)"
    ]


def test_unknown_key_without_a_close_match_lists_the_keys(tmp_path: Path) -> None:
    text = VALID + "server:\n  port: 9464\n"
    assert _errors(tmp_path, text) == [
        "FILE:14: server.port: unknown key (expected one of: listen)"
    ]


def test_wrong_type(tmp_path: Path) -> None:
    text = VALID.replace(
        "    model: gpt-4.1-mini", "    model: gpt-4.1-mini\n    max_retries: many"
    )
    assert _errors(tmp_path, text) == ["FILE:6: providers.main.max_retries: expected an integer"]


def test_wrong_literal(tmp_path: Path) -> None:
    text = VALID.replace("stream_mode: off", "stream_mode: drafts")
    assert _errors(tmp_path, text) == [
        "FILE:12: channels.tg.stream_mode: expected one of 'off', 'partial' or 'multi_message'"
    ]


def test_missing_environment_variable(tmp_path: Path) -> None:
    assert _errors(tmp_path, VALID, {"OPENAI_API_KEY": "sk-test-key"}) == [
        "FILE:11: channels.tg.token: environment variable TELEGRAM_BOT_TOKEN is not set"
    ]


def test_environment_default_is_used(tmp_path: Path) -> None:
    text = VALID.replace("${TELEGRAM_BOT_TOKEN}", "${TELEGRAM_BOT_TOKEN:-000:fallback}")
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    config = load_config(path, environ={"OPENAI_API_KEY": "k"})
    channel = config.channels["tg"]
    assert isinstance(channel, TelegramChannelConfig)
    assert channel.token.get_secret_value() == "000:fallback"


def test_unknown_provider_in_agent_providers(tmp_path: Path) -> None:
    text = VALID.replace("providers: [main]", "providers:\n    - x\n    - main")
    assert _errors(tmp_path, text) == [
        "FILE:8: agent.providers[0]: unknown provider 'x' (configured: main)"
    ]


def test_unknown_provider_is_reported_beside_other_errors(tmp_path: Path) -> None:
    # pydantic's model validator does not run when a field fails; the loader's own pass does.
    text = VALID.replace("providers: [main]", "providers: [main, x]\n  max_tool_rounds: lots")
    assert _errors(tmp_path, text) == [
        "FILE:7: agent.providers[1]: unknown provider 'x' (configured: main)",
        "FILE:8: agent.max_tool_rounds: expected an integer",
    ]


def test_unknown_provider_from_the_environment_is_not_named(tmp_path: Path) -> None:
    text = VALID.replace("providers: [main]", 'providers: ["${CHAIN}"]')
    assert _errors(tmp_path, text, {**ENV, "CHAIN": "sk-live-secret"}) == [
        "FILE:7: agent.providers[0]: unknown provider (configured: main)"
    ]


def test_invalid_regex_names_the_pattern(tmp_path: Path) -> None:
    text = VALID + textwrap.dedent(
        """\
        policy:
          extra_secret_patterns:
            - name: internal_token
              regex: "itk_(abc"
        """
    )
    assert _errors(tmp_path, text) == [
        "FILE:16: policy.extra_secret_patterns[0].regex: pattern 'internal_token' does not "
        "compile: missing ), unterminated subpattern at position 4"
    ]


def test_missing_required_key(tmp_path: Path) -> None:
    text = VALID.replace("agent:\n  providers: [main]\n", "agent:\n  system_prompt: Hi.\n")
    assert _errors(tmp_path, text) == ["FILE:6: agent.providers: missing required key"]


def test_missing_required_key_in_a_channel_and_a_missing_kind(tmp_path: Path) -> None:
    text = VALID + "  mx:\n    kind: matrix\n    user_id: '@bot:example.org'\n  other: {}\n"
    assert _errors(tmp_path, text) == [
        "FILE:13: channels.mx.homeserver: missing required key",
        "FILE:16: channels.other.kind: missing required key",
    ]


def test_unknown_channel_kind(tmp_path: Path) -> None:
    text = VALID.replace("kind: telegram", "kind: telgram")
    assert _errors(tmp_path, text) == [
        "FILE:10: channels.tg.kind: unknown kind "
        "(expected one of 'telegram', 'matrix', 'discord', 'slack', 'console', 'web', 'openai_api')"
    ]


def test_api_key_required_except_for_ollama(tmp_path: Path) -> None:
    text = VALID.replace("    api_key: ${OPENAI_API_KEY}\n", "")
    assert _errors(tmp_path, text) == [
        "FILE:2: providers.main.api_key: missing required key (needed for kind openai_chat)"
    ]


def test_union_member_failures_are_joined(tmp_path: Path) -> None:
    text = VALID + "    allowed_users: [42, 1.5]\n"
    assert _errors(tmp_path, text) == [
        "FILE:13: channels.tg.allowed_users[1]: expected a string or an integer"
    ]


def test_numeric_bounds_are_named(tmp_path: Path) -> None:
    text = VALID + "    draft_update_interval_ms: 10\n"
    assert _errors(tmp_path, text) == [
        "FILE:13: channels.tg.draft_update_interval_ms: must be at least 50"
    ]


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    assert _errors(tmp_path, "- a\n- b\n") == ["FILE:1: (top level): expected a mapping"]


def test_empty_file_reports_the_required_sections(tmp_path: Path) -> None:
    assert _errors(tmp_path, "") == [
        "FILE:1: agent: missing required key",
        "FILE:1: channels: missing required key",
    ]


def test_multiple_errors_are_all_reported_sorted_by_line(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        channels:
          tg:
            kind: telegram
            token: ${TELEGRAM_BOT_TOKEN}
            colour: blue
        providers:
          main:
            kind: openai_chat
            api_key: ${MISSING_KEY}
            model: 5.5
            timeout_secs: -1
        agent:
          providers: [main, backup]
        server:
          listen: everywhere
        """
    )
    assert _errors(tmp_path, text) == [
        "FILE:5: channels.tg.colour: unknown key (expected one of: draft_update_interval_ms, "
        "allowed_users, respond_in_groups, show_reasoning, show_tool_status, admins, stream_mode, "
        "multi_message_delay_ms, kind, token, base_url, webhook, proxy, base_file_url, "
        "media_group_wait_ms)",
        "FILE:9: providers.main.api_key: environment variable MISSING_KEY is not set",
        "FILE:10: providers.main.model: expected a string",
        "FILE:11: providers.main.timeout_secs: must be greater than 0",
        "FILE:13: agent.providers[1]: unknown provider 'backup' (configured: main)",
        "FILE:15: server.listen: expected HOST:PORT, e.g. 127.0.0.1:9464",
    ]


def test_a_secret_never_appears_in_error_output(tmp_path: Path) -> None:
    file_secret = "sk-proj-FILESECRETfilesecret0123456789"
    env_secret = "sk-ant-ENVSECRETenvsecret0123456789"
    text = textwrap.dedent(
        f"""\
        providers:
          main:
            kind: openai_chat
            api_key: [{file_secret}]
            model: m
          env:
            kind: anthropic
            api_key: {{nested: "${{ANTHROPIC_API_KEY}}"}}
            model: ${{ANTHROPIC_API_KEY}}
            timeout_secs: ${{ANTHROPIC_API_KEY}}
            reasoning_effort: "{file_secret}"
        agent:
          providers: [main, "${{ANTHROPIC_API_KEY}}"]
          max_tool_rounds: "{file_secret}"
        channels:
          tg:
            kind: telegram
            token: 12345
            stream_mode: ${{ANTHROPIC_API_KEY}}
            webhook: {{url: x, secret_token: [{file_secret}], listen: "${{ANTHROPIC_API_KEY}}"}}
          dc:
            kind: ${{ANTHROPIC_API_KEY}}
          x:
            kind: "{file_secret}"
        policy:
          on_message_sending: ${{ANTHROPIC_API_KEY}}
          extra_secret_patterns:
            - {{name: "{file_secret}", regex: "${{ANTHROPIC_API_KEY}}("}}
        storage:
          path: [{file_secret}]
        server:
          listen: ${{ANTHROPIC_API_KEY}}
        """
    )
    lines = _errors(tmp_path, text, {"ANTHROPIC_API_KEY": env_secret})
    output = "\n".join(lines)
    assert len(lines) >= 12  # every planted value produced an error
    for secret in (file_secret, env_secret):
        for fragment in (secret, secret[:12], secret[-12:]):
            assert fragment not in output


def test_a_secret_never_appears_in_a_yaml_error(tmp_path: Path) -> None:
    secret = "sk-proj-YAMLSECRETyamlsecret0123456789"
    lines = _errors(tmp_path, f"providers:\n  main: {{api_key: {secret}: x}}\n")
    assert len(lines) == 1
    assert lines[0].startswith("FILE:2: yaml: ")
    assert secret[:12] not in lines[0]


def test_a_relative_storage_path_is_in_the_state_directory_not_beside_the_file(
    tmp_path: Path,
) -> None:
    # The config lives where a service may only read (/etc/relaybot, a read-only /config).
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    path = conf_dir / "relaybot.yaml"
    path.write_text(VALID + "storage:\n  path: data/bot.db\n", encoding="utf-8")
    state = {**ENV, "STATE_DIRECTORY": "/var/lib/relaybot:/var/lib/other"}
    assert load_config(path, environ=state).storage.path == "/var/lib/relaybot/data/bot.db"
    xdg = {**ENV, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert Path(load_config(path, environ=xdg).storage.path) == (
        tmp_path / "xdg" / "relaybot" / "data" / "bot.db"
    )
    home = {**ENV, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": "relative"}
    assert Path(load_config(path, environ=home).storage.path) == (
        tmp_path / "home" / ".local" / "share" / "relaybot" / "data" / "bot.db"
    )
    path.write_text(VALID + "storage:\n  url: sqlite:///bot.db\n", encoding="utf-8")
    assert load_config(path, environ=state).storage.url == "sqlite:////var/lib/relaybot/bot.db"


def test_default_storage_path_and_absolute_path(tmp_path: Path) -> None:
    path = tmp_path / "relaybot.yaml"
    path.write_text(VALID, encoding="utf-8")
    state = {**ENV, "STATE_DIRECTORY": str(tmp_path / "state")}
    assert Path(load_config(path, environ=state).storage.path) == tmp_path / "state" / "relaybot.db"
    path.write_text(VALID + "storage:\n  path: /var/lib/relaybot/x.db\n", encoding="utf-8")
    assert load_config(path, environ=state).storage.path == "/var/lib/relaybot/x.db"


def test_load_config_text_leaves_storage_path_relative_without_base_dir() -> None:
    config = load_config_text(VALID, source_name="inline", environ=ENV)
    assert config.storage.path == "relaybot.db"
    assert config.storage.resolved_path("/srv") == Path("/srv/relaybot.db")


def test_load_config_text_names_its_source() -> None:
    with pytest.raises(ConfigError) as info:
        load_config_text("agent: 1\nchannels: {}\n", source_name="inline.yaml", environ={})
    assert format_errors(info.value).splitlines() == [
        "inline.yaml:1: agent: expected a mapping",
        "inline.yaml:2: channels: needs at least 1 entry",
    ]


def test_unreadable_and_undecodable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.yaml", environ={})
    assert format_errors(info.value) == (
        f"{tmp_path / 'absent.yaml'}: cannot read the file: No such file or directory"
    )
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"agent:\n  system_prompt: caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert format_errors(info.value) == f"{path}:2: the file is not valid UTF-8"


def test_config_error_carries_the_issues(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("providers: {a: {kind: ollama, model: m}}\nagent: {providers: [a]}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    [issue] = info.value.errors
    assert (issue.source, issue.line, issue.path) == (str(path), 1, "channels")
    assert str(info.value) == format_errors(info.value)


def test_a_value_from_the_environment_quoted_by_a_validator_is_masked(tmp_path: Path) -> None:
    # The pattern name is valid, so the regex error quotes it; it came from the environment.
    text = VALID + textwrap.dedent(
        """\
        policy:
          extra_secret_patterns:
            - {name: "${PATTERN_NAME}", regex: "("}
        """
    )
    environ = {**ENV, "PATTERN_NAME": "token_abcdef0123456789"}
    assert _errors(tmp_path, text, environ) == [
        "FILE:15: policy.extra_secret_patterns[0].regex: pattern '***' does not compile: "
        "missing ), unterminated subpattern at position 0"
    ]


def test_require_approval_names_an_offered_tool(tmp_path: Path) -> None:
    text = VALID.replace(
        "  providers: [main]", "  providers: [main]\n  require_approval: [curent_time]"
    )
    assert _errors(tmp_path, text) == ["FILE:8: agent.require_approval[0]: not one of agent.tools"]


def test_provider_base_url_is_an_http_url(tmp_path: Path) -> None:
    text = VALID.replace(
        "    model: gpt-4.1-mini", "    model: gpt-4.1-mini\n    base_url: ${OPENAI_API_KEY}"
    )
    errors = _errors(tmp_path, text)
    assert errors == ["FILE:6: providers.main.base_url: expected an http:// or https:// URL"]
    assert "sk-test-key" not in "\n".join(errors)


@pytest.mark.parametrize(
    "url", ["http://user:pw@127.0.0.1:8000/v1", "https://:sk-x@api.example/v1"]
)
def test_provider_base_url_carries_no_user_or_password(tmp_path: Path, url: str) -> None:
    # httpx would send it as Basic auth and aiohttp refuse it beside that header: a clear error
    text = VALID.replace("    model: gpt-4.1-mini", f"    model: gpt-4.1-mini\n    base_url: {url}")
    errors = _errors(tmp_path, text)
    assert errors == [
        "FILE:6: providers.main.base_url: a user or password in the URL is not sent: put the "
        "key in api_key and write the URL without user:password@"
    ]
    assert "pw" not in errors[0] and "sk-x" not in errors[0]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://api.example.com/v1?x=a@b", "the API root takes no ?query or #fragment"),
        ("https://api.example.com/v1#top", "the API root takes no ?query or #fragment"),
        ('"https://api.example.com/v1 "', "the URL holds a space or a line break"),
        ("http://127.0.0.1:abc/v1", "the port is not a number from 0 to 65535"),
        ("http:///v1", "the URL names no host"),
    ],
)
def test_provider_base_url_is_an_api_root(tmp_path: Path, url: str, message: str) -> None:
    # each failed every request: the endpoint's path after the query (a 404), "%20/chat", an
    # InvalidURL traceback, a connection to ":80"
    text = VALID.replace("    model: gpt-4.1-mini", f"    model: gpt-4.1-mini\n    base_url: {url}")
    errors = _errors(tmp_path, text)
    assert len(errors) == 1 and errors[0].startswith(f"FILE:6: providers.main.base_url: {message}")


@pytest.mark.parametrize(
    "url", ["HTTP://127.0.0.1:8000/v1", "https://api.example.com/v1/", "http://[::1]:8000/v1"]
)
def test_a_provider_base_url_as_written_in_the_wild_loads(tmp_path: Path, url: str) -> None:
    path = tmp_path / "relaybot.yaml"
    text = VALID.replace("    model: gpt-4.1-mini", f"    model: gpt-4.1-mini\n    base_url: {url}")
    path.write_text(text, encoding="utf-8")
    assert load_config(path, environ=ENV).providers["main"].base_url == url


def test_an_empty_provider_key_is_an_error(tmp_path: Path) -> None:
    errors = _errors(tmp_path, VALID, {**ENV, "OPENAI_API_KEY": ""})
    assert errors == [
        "FILE:4: providers.main.api_key: the key is empty (needed for kind openai_chat): set it"
    ]


@pytest.mark.parametrize("key", ["sk-“abc”", "sk-abc def", "sk-abc\n", "sk-é"])
def test_a_provider_key_an_http_header_cannot_carry_is_an_error(tmp_path: Path, key: str) -> None:
    errors = _errors(tmp_path, VALID, {**ENV, "OPENAI_API_KEY": key})
    assert errors == [
        "FILE:4: providers.main.api_key: the key holds a character an HTTP header cannot carry "
        "(a space, a line break, or a non-ASCII character such as a typographic quote): copy "
        "the key again"
    ]
    assert key.strip() not in errors[0]


def test_storage_url_a_relative_sqlite_path_joins_the_state_directory(tmp_path: Path) -> None:
    path = tmp_path / "relaybot.yaml"
    path.write_text(VALID + "storage:\n  url: sqlite:///data/bot.db\n", encoding="utf-8")
    storage = load_config(path, environ={**ENV, "STATE_DIRECTORY": str(tmp_path)}).storage
    assert storage.url == f"sqlite:///{tmp_path / 'data' / 'bot.db'}" and not storage.shared
    path.write_text(VALID + "storage:\n  url: postgresql://bot@db/bot\n", encoding="utf-8")
    storage = load_config(path, environ=ENV).storage
    assert storage.url == "postgresql://bot@db/bot" and storage.shared
    assert storage.takeover_secs == 30 and storage.retain_days is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("url: mysql://db/bot", "storage.url: expected a sqlite:/// or postgresql:// URL"),
        ("url: postgresql://bot:hunter2@db/bot", "storage.url: a password in the URL is not"),
        ("retain_days: 0", "storage.retain_days: "),
        ("takeover_secs: -1", "storage.takeover_secs: "),
    ],
)
def test_storage_errors_are_located_and_never_show_a_password(
    tmp_path: Path, value: str, message: str
) -> None:
    path = tmp_path / "relaybot.yaml"
    path.write_text(VALID + f"storage:\n  {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=ENV)
    text = format_errors(info.value)
    assert message in text and "hunter2" not in text


def test_context_budget_keys(tmp_path: Path) -> None:
    text = VALID.replace(
        "    model: gpt-4.1-mini\n", "    model: gpt-4.1-mini\n    context_window: 4000\n"
    )
    text = text.replace(
        "  providers: [main]\n",
        "  providers: [main]\n  max_tool_result_chars: 5000\n"
        "  history:\n    compaction: summarize\n",
    )
    path = tmp_path / "relaybot.yaml"
    path.write_text(text, encoding="utf-8")
    config = load_config(path, environ=ENV)
    assert config.providers["main"].context_window == 4000
    assert config.agent.max_tool_result_chars == 5000
    assert config.agent.history.compaction == "summarize"
    bad = text.replace("context_window: 4000", "context_window: 100").replace(
        "compaction: summarize", "compaction: shrink"
    )
    errors = _errors(tmp_path, bad)
    assert len(errors) == 2
    assert errors[0].startswith("FILE:6: providers.main.context_window: ")
    assert errors[1].startswith("FILE:11: agent.history.compaction: ")


MANAGED_URL = "postgresql://bot:s3cret-Managed-Pw@db.example:5432/bot?sslmode=require"


@pytest.mark.parametrize(
    "written", ["${DATABASE_URL}", "postgresql://bot:${DB_PASSWORD}@db.example:5432/bot"]
)
def test_a_password_from_the_environment_is_accepted_in_storage_url(
    tmp_path: Path, written: str
) -> None:
    path = tmp_path / "relaybot.yaml"
    path.write_text(VALID + f"storage:\n  url: {written}\n", encoding="utf-8")
    env = {**ENV, "DATABASE_URL": MANAGED_URL, "DB_PASSWORD": "s3cret-Managed-Pw"}
    storage = load_config(path, environ=env).storage
    assert storage.shared and "s3cret-Managed-Pw" in storage.store_url()


def test_a_password_written_in_storage_url_is_still_refused_even_beside_a_reference(
    tmp_path: Path,
) -> None:
    lines = _errors(
        tmp_path,
        VALID + "storage:\n  url: postgresql://bot:hunter2@${DB_HOST}/bot\n",
        {**ENV, "DB_HOST": "db.example"},
    )
    assert len(lines) == 1 and "storage.url: a password in the URL is not accepted" in lines[0]
    assert "hunter2" not in lines[0]


def test_load_storage_config_reads_the_storage_section_alone(tmp_path: Path) -> None:
    path = tmp_path / "relaybot.yaml"
    # Every other section is broken or needs secrets that are not set.
    path.write_text(
        VALID + "agent: {max_tool_rounds: lots}\nstorage:\n  path: bot.db\n", encoding="utf-8"
    )
    storage = load_storage_config(path, environ={"STATE_DIRECTORY": str(tmp_path / "s")})
    assert Path(storage.path) == tmp_path / "s" / "bot.db"
    path.write_text(VALID + "storage:\n  url: ${DATABASE_URL}\n", encoding="utf-8")
    assert load_storage_config(path, environ={"DATABASE_URL": MANAGED_URL}).shared
    with pytest.raises(ConfigError) as info:
        load_storage_config(path, environ={})
    assert [str(i).replace(str(path), "FILE") for i in info.value.errors] == [
        "FILE:14: storage.url: environment variable DATABASE_URL is not set"
    ]
    path.write_text(VALID + "storage:\n  retain_days: 0\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_storage_config(path, environ={})
    assert [i.path for i in info.value.errors] == ["storage.retain_days"]


def test_a_dollar_name_without_braces_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "relaybot.yaml"
    text = VALID.replace("${OPENAI_API_KEY}", "$OPENAI_API_KEY")
    path.write_text(text + "policy:\n  guardrails: []\n", encoding="utf-8")
    warnings: list[ConfigIssue] = []
    load_config(path, environ=ENV, warnings=warnings)
    assert [(w.line, w.path, w.warning) for w in warnings] == [(4, "providers.main.api_key", True)]
    assert "${NAME}" in warnings[0].message and "$$ for a literal $" in warnings[0].message
    # $$ is a literal $ (as docker compose writes it): loaded as one $, not warned about.
    path.write_text(VALID.replace("gpt-4.1-mini", "'prices in $$USD'"), encoding="utf-8")
    warnings = []
    assert load_config(path, environ=ENV, warnings=warnings).providers["main"].model == (
        "prices in $USD"
    )
    assert warnings == []
    # ${VAR}, $${ and a lone $ are not warned about.
    path.write_text(VALID.replace("gpt-4.1-mini", "'$${x} costs $5'"), encoding="utf-8")
    warnings = []
    load_config(path, environ=ENV, warnings=warnings)
    assert warnings == []
