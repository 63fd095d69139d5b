"""``relaybot tools`` and ``check-config`` on ``agent.mcp_servers`` (architecture §5 "MCP", §7),
as a user runs them: the command line in a child process, the MCP peer of
``tests/peers/mcp_server.py`` started by it over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, agent_extra: str = "") -> Path:
    peer = json.dumps([sys.executable, "-m", "tests.peers.mcp_server"])
    path = tmp_path / "tools.yaml"
    path.write_text(
        f"""\
providers:
  main: {{kind: openai_chat, api_key: k, model: m}}
agent:
  providers: [main]
{agent_extra}  mcp_servers:
    peer: {{command: {peer}, cwd: "{REPO}"}}
channels:
  term: {{kind: console}}
""",
        encoding="utf-8",
    )
    return path


def _relaybot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        cwd=REPO,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_tools_lists_built_ins_and_mcp_tools_with_their_approval(tmp_path: Path) -> None:
    path = _config(tmp_path, "  require_approval: [lookup, peer__current_time]\n")
    result = _relaybot("tools", "--config", str(path))
    assert result.returncode == 0, result.stderr
    rows = [line.split(None, 3) for line in result.stdout.splitlines()]
    by_name = {row[0]: row[1:] for row in rows}
    assert rows[0][0] == "current_time" and by_name["current_time"][:2] == ["built-in", "-"]
    assert by_name["lookup"] == ["mcp:peer", "approval", "Look a key up."]
    assert by_name["peer__current_time"][:2] == ["mcp:peer", "approval"]
    assert by_name["slow"][:2] == ["mcp:peer", "-"]


def test_tools_exits_1_for_an_approval_name_no_tool_has(tmp_path: Path) -> None:
    result = _relaybot("tools", "--config", str(_config(tmp_path, "  require_approval: [lokup]\n")))
    assert result.returncode == 1
    assert "agent.require_approval: no tool named lokup" in result.stderr


def test_check_config_accepts_mcp_servers_and_warns_of_a_missing_program(tmp_path: Path) -> None:
    path = _config(tmp_path, "  require_approval: [anything]\n")  # checked at start instead
    assert _relaybot("check-config", str(path)).returncode == 0
    fixed = (
        _config(tmp_path, '  require_approval: "*"\n')
        .read_text("utf-8")
        .replace(
            "channels:",
            '    gone: {command: ["/nonexistent/mcp-server"]}\nchannels:',
        )
    )
    path.write_text(fixed, encoding="utf-8")
    result = _relaybot("check-config", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"{path}:8: agent.mcp_servers.gone.command[0]: warning: program not found: this MCP "
        "server would not start (the bot runs without it)"
    ]


def test_check_config_rejects_a_bad_server_entry(tmp_path: Path) -> None:
    fixed = (
        _config(tmp_path)
        .read_text("utf-8")
        .replace(
            "channels:",
            '    web: {url: "ftp://example.com/mcp"}\n    "bad name": {command: [x]}\nchannels:',
        )
    )
    path = tmp_path / "bad.yaml"
    path.write_text(fixed, encoding="utf-8")
    result = _relaybot("check-config", str(path))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{path}:7: agent.mcp_servers.web.url: must be an http:// or https:// URL",
        f'{path}:8: agent.mcp_servers["bad name"]: must match the pattern ^[a-zA-Z0-9_-]{{1,32}}$',
    ]


def test_a_server_that_fails_to_start_is_reported_with_what_it_wrote(tmp_path: Path) -> None:
    # Why a stdio server did not start is often only in its stderr (a missing module): the
    # warning carries its last lines, not just the closed connection the client saw.
    program = (
        "import sys; sys.stderr.write('starting\\n'); "
        "sys.stderr.write(\"ModuleNotFoundError: No module named 'mcp_server_fetch'\\n\"); "
        "sys.exit(1)"
    )
    path = _config(tmp_path)
    text = path.read_text("utf-8").replace(
        "channels:",
        f"    fetch: {{command: {json.dumps([sys.executable, '-c', program])}}}\nchannels:",
    )
    path.write_text(text, encoding="utf-8")
    result = _relaybot("tools", "--config", str(path))
    assert result.returncode == 1
    assert "mcp:fetch: did not start" in result.stdout
    warning = next(line for line in result.stderr.splitlines() if "MCP server fetch:" in line)
    assert warning.endswith(
        "; it wrote: starting | ModuleNotFoundError: No module named 'mcp_server_fetch'"
    ), result.stderr


_LEAKY = r"""
import sys
key = "sk-ant-api03-" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
url = "postgres://user:password123@db.example.com/x"
if sys.argv[1] == "stdout":  # not JSON-RPC: the SDK logs it with pydantic's elided input
    print("connecting to " + url + " " + "q" * 200, flush=True)
    sys.stdin.readline()
else:
    sys.stderr.write("\x1b]0;evil title\x07\x1b[31musing key " + key + "\x1b[0m\n")
    sys.stderr.write("y" * 1975 + " " + url + "\n")  # the line limit falls in the URL
sys.exit(1)
"""


def test_what_failing_servers_wrote_is_redacted_in_tools_output(tmp_path: Path) -> None:
    # `tools` logs the servers' failures as `run` does: redacted, one line each, no terminal
    # control; a secret in a command is redacted in its "did not start" line too.
    (tmp_path / "leaky.py").write_text(_LEAKY, encoding="utf-8")
    leaky = [sys.executable, str(tmp_path / "leaky.py")]
    servers = {
        "err": [*leaky, "stderr"],
        "out": [*leaky, "stdout"],
        "arg": [*leaky, "stderr", "postgres://user:password123@db.example.com/x"],
    }
    path = _config(tmp_path)
    entries = "".join(f"    {k}: {{command: {json.dumps(v)}}}\n" for k, v in servers.items())
    path.write_text(path.read_text("utf-8").replace("channels:", entries + "channels:"), "utf-8")
    result = _relaybot("tools", "--config", str(path))
    assert result.returncode == 1
    shown = result.stdout + result.stderr
    for secret in ("password123", "user:pass", "sk-ant-api03-abc", "evil title", "\x1b"):
        assert secret not in shown, (secret, shown)
    assert "Traceback" not in result.stderr
    assert "it wrote: using key [REDACTED:anthropic_key] | yyy" in result.stderr
    assert "…(45 more characters)" in result.stderr
    assert (
        "mcp:arg: did not start (" in result.stdout and "[REDACTED:url_password]" in result.stdout
    )


@pytest.mark.parametrize(
    ("failure", "cause"),
    [
        ("ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')", "No module named 'mcp'"),
        ("AttributeError('half installed')", "AttributeError: half installed"),
    ],
)
def test_a_broken_installation_without_the_mcp_sdk_is_named_at_the_servers_line(
    tmp_path: Path, failure: str, cause: str
) -> None:
    """The ``mcp`` SDK is a dependency; an installation that lost it (shadowed here by a module
    that fails as a missing package does, or as a half-removed one might) is told, at
    ``agent.mcp_servers``' line, what to do — by ``check-config``, ``run`` and ``tools`` alike,
    exit 2 and no traceback."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "mcp.py").write_text(f"raise {failure}\n", encoding="utf-8")
    path = _config(tmp_path)
    expected = (
        f"{path}:5: agent.mcp_servers: the MCP client cannot be imported ({cause}): relaybot's "
        "installation is incomplete. Install it again from its checkout (pip install ., or pip "
        "install -e . for an editable one: either installs what is missing), or remove "
        "agent.mcp_servers to run without MCP tools"
    )
    for args in (("check-config", str(path)), ("run", "--config", str(path)),
                 ("tools", "--config", str(path))):  # fmt: skip
        result = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", *args],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": f"{shadow}:{REPO}", "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
            cwd=REPO,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert (result.returncode, result.stderr.splitlines()) == (2, [expected]), args
