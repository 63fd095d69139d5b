"""Every ``relaybot`` verb meets unreadable, unwritable and missing paths with one line and an
exit code, never a raw traceback; a relative ``storage.path`` lives in the state directory and
``check-config`` says when it cannot be written; ``runs`` reads only the ``storage`` section
(architecture §6, §7). Each test runs the real command in a clean environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CONFIG = """\
providers:
  main: {kind: openai_chat, api_key: "${OPENAI_API_KEY}", model: m}
agent:
  providers: [main]
channels:
  tg: {kind: telegram, token: "${TELEGRAM_BOT_TOKEN}", allowed_users: ["*"]}
server:
  listen: null
"""


def _relaybot(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        "PYTHONPATH": str(REPO),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=environ,
        cwd=tmp_path,
        timeout=90,
    )


SECRETS = {"OPENAI_API_KEY": "sk-test", "TELEGRAM_BOT_TOKEN": "123:abc"}


def _write(tmp_path: Path, storage: str) -> Path:
    path = tmp_path / "relaybot.yaml"
    path.write_text(CONFIG + storage)
    return path


def _blocker(tmp_path: Path) -> Path:
    """A regular file: nothing can be created beneath it, even by root."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return blocker


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--config", "{missing}"),
        ("run", "--config", "{directory}"),
        ("check-config", "{missing}"),
        ("check-config", "{directory}"),
        ("runs", "--config", "{missing}"),
        ("runs", "--config", "{directory}"),
        ("tools", "--config", "{missing}"),
        ("tools", "--config", "{directory}"),
    ],
)
def test_an_unreadable_or_missing_config_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    filled = [a.format(missing=tmp_path / "nope.yaml", directory=tmp_path) for a in args]
    result = _relaybot(tmp_path, *filled, **SECRETS)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "cannot read the file" in result.stderr


def test_an_unwritable_store_is_found_by_check_config_and_stops_run_with_one_line(
    tmp_path: Path,
) -> None:
    blocker = _blocker(tmp_path)
    path = _write(tmp_path, f'storage:\n  path: "{blocker}/relaybot.db"\n')
    for verb in (
        ("check-config", str(path)),
        ("run", "--config", str(path)),
        ("tools", "--config", str(path)),
    ):
        result = _relaybot(tmp_path, *verb, **SECRETS)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith(f"{path}: storage.path: {blocker} is not a directory")
    result = _relaybot(tmp_path, "runs", "--config", str(path))  # only read: one line, exit 1
    assert (result.returncode, "Traceback" in result.stderr) == (1, False)
    assert (
        result.stderr
        == f"relaybot: no store at {blocker}/relaybot.db (nothing has run with it yet)\n"
    )


def test_a_relative_store_path_is_in_the_state_directory_and_checked_there(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, "storage:\n  path: relaybot.db\n")
    state = tmp_path / "state"
    result = _relaybot(tmp_path, "check-config", str(path), STATE_DIRECTORY=str(state), **SECRETS)
    assert (result.returncode, result.stdout) == (0, f"{path}: ok\n"), result.stderr
    blocked = _blocker(tmp_path)
    result = _relaybot(tmp_path, "check-config", str(path), STATE_DIRECTORY=str(blocked), **SECRETS)
    assert result.returncode == 2
    assert f"storage.path: {blocked} is not a directory (a relative path is in {blocked}" in (
        result.stderr
    )


@pytest.mark.parametrize("state", ["/proc/relaybot-nope", "{tmp}/" + "n" * 300])
def test_a_state_directory_that_cannot_be_made_is_exit_2_for_check_config_and_run(
    tmp_path: Path, state: str
) -> None:
    """``/proc/…``: no entry can be made there, even by root (``os.access`` says yes); a name
    longer than the file system allows: finding the nearest directory raises."""
    if state.startswith("/proc") and not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    state = state.format(tmp=tmp_path)
    path = _write(tmp_path, "storage:\n  path: relaybot.db\n")
    for verb in (("check-config", str(path)), ("run", "--config", str(path))):
        result = _relaybot(tmp_path, *verb, STATE_DIRECTORY=state, **SECRETS)
        assert result.returncode == 2, (verb, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
        assert result.stderr.startswith(f"{path}: storage.path: cannot ")
        assert f"(a relative path is in {state}: $STATE_DIRECTORY" in result.stderr


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root enters all")
def test_a_state_directory_the_user_cannot_enter_is_exit_2(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    (locked / "state").mkdir(parents=True)
    locked.chmod(0)
    try:
        path = _write(tmp_path, "storage:\n  path: relaybot.db\n")
        result = _relaybot(
            tmp_path, "check-config", str(path), STATE_DIRECTORY=str(locked / "state"), **SECRETS
        )
    finally:
        locked.chmod(0o700)
    assert result.returncode == 2, result.stderr
    assert "permission denied (a directory on the way cannot be entered)" in result.stderr


def test_runs_needs_only_the_storage_section(tmp_path: Path) -> None:
    # No secret of the file is set: runs reads the store's location and nothing else.
    path = _write(tmp_path, "storage:\n  path: relaybot.db\n")
    result = _relaybot(tmp_path, "runs", "--config", str(path), STATE_DIRECTORY=str(tmp_path))
    assert result.returncode == 1
    assert (
        result.stderr
        == f"relaybot: no store at {tmp_path / 'relaybot.db'} (nothing has run with it yet)\n"
    )
    (tmp_path / "relaybot.db").write_text("not a database, just text " * 100)
    result = _relaybot(tmp_path, "runs", "--config", str(path), STATE_DIRECTORY=str(tmp_path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(
        f"relaybot: cannot read the store at {tmp_path / 'relaybot.db'}"
    )


def test_schema_into_a_full_disk_is_one_line(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "schema"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            timeout=90,
        )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert result.stderr.strip().splitlines() == ["relaybot: No space left on device"]


@pytest.mark.parametrize("where", ["missing", "blocked"])
def test_migrate_store_with_a_bad_path_is_one_line(tmp_path: Path, where: str) -> None:
    source = tmp_path / "none.db" if where == "missing" else _blocker(tmp_path) / "x.db"
    result = _relaybot(
        tmp_path,
        "migrate-store",
        "--from",
        f"sqlite:///{source}",
        "--to",
        f"sqlite:///{tmp_path}/to.db",
    )
    assert result.returncode in (1, 2)
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_readme_s_migrate_store_source_is_absolute_from_any_directory(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    [source] = re.findall(r"migrate-store --from (sqlite:\S+)", readme)
    assert source == "sqlite:////var/lib/relaybot/relaybot.db"
    from config.store_url import parse_store_url

    assert parse_store_url(source).target == "/var/lib/relaybot/relaybot.db"
    # Three slashes and an absolute-looking path: relative, and the message says how to write it.
    store = tmp_path / "x.db"
    store.write_text("")
    three = f"sqlite://{store}"  # sqlite:///tmp/... : relative to the current directory
    result = _relaybot(tmp_path, "migrate-store", "--from", three, "--to", f"sqlite:///{store}2")
    assert result.returncode == 1
    assert f"for {store} write sqlite:///{store}" in result.stderr


def test_migrate_store_refuses_a_password_on_the_command_line(tmp_path: Path) -> None:
    result = _relaybot(
        tmp_path,
        "migrate-store",
        "--from",
        f"sqlite:///{tmp_path}/a.db",
        "--to",
        "postgresql://bot:hunter2@127.0.0.1:1/bot",
    )
    assert result.returncode == 2 and "hunter2" not in result.stderr
    assert "PGPASSWORD" in result.stderr


def test_check_config_warns_of_an_empty_or_absent_allowed_users_and_a_bare_dollar(
    tmp_path: Path,
) -> None:
    path = tmp_path / "relaybot.yaml"
    path.write_text(
        CONFIG.replace(', allowed_users: ["*"]', "")
        .replace('"${OPENAI_API_KEY}"', "$OPENAI_API_KEY")
        .replace("channels:\n", "channels:\n  dc: {kind: discord, token: t, allowed_users: []}\n")
        + f'storage:\n  path: "{tmp_path}/bot.db"\n'
    )
    result = _relaybot(tmp_path, "check-config", str(path), **SECRETS)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{path}: valid, with 3 warnings\n"
    lines = result.stderr.replace(str(path), "FILE").splitlines()
    assert lines[0].startswith("FILE:2: providers.main.api_key: warning: a $NAME without braces")
    absent = "allowed_users: warning: allowed_users is absent or empty: nobody may talk"
    assert lines[1].startswith(f"FILE:6: channels.dc.{absent}")
    assert lines[2].startswith(f"FILE:7: channels.tg.{absent}")
