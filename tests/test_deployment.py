"""The deployment files (README "Running as a service"): the systemd unit verifies with
``systemd-analyze verify``; the Dockerfile builds and its container answers ``/healthz`` where a
Docker daemon answers. Each is skipped, with the reason, where its tool is missing."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.peers.provider_server import ProviderServer
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_chats import free_port

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "contrib" / "relaybot.service"


def test_the_license_is_mit_as_pyproject_says() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert 'license = { text = "MIT" }' in (REPO / "pyproject.toml").read_text()


def test_the_unit_asks_what_the_operator_needs() -> None:
    lines = {line.strip() for line in UNIT.read_text().splitlines()}
    for wanted in (
        "User=relaybot",
        "Group=relaybot",
        "StateDirectory=relaybot",
        "RestartPreventExitStatus=2",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ):
        assert wanted in lines, wanted
    exec_start = next(line for line in lines if line.startswith("ExecStart="))
    assert exec_start.split("=", 1)[1].split()[1:3] == ["run", "--config"]


def test_the_unit_s_user_can_read_the_config_its_header_installs() -> None:
    # A DynamicUser is in no group the config file could be given to: the service could not
    # read a 0640 file (exit 2, restarted every 5 s before RestartPreventExitStatus).
    text = UNIT.read_text()
    settings = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and line[:1] != "#"
    )
    assert "DynamicUser" not in settings
    header = [line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")]
    install = next(line for line in header if line.endswith("/etc/relaybot/relaybot.yaml"))
    words = install.split()
    mode, group = words[words.index("-m") + 1], words[words.index("-g") + 1]
    assert mode == "0640" and group == settings["Group"]
    useradd = next(line for line in header if line.startswith("useradd"))
    assert "--user-group" in useradd and useradd.split()[-1] == settings["User"]
    # The store goes where the service may write: the state directory, which systemd names in
    # STATE_DIRECTORY, where a relative storage.path resolves (architecture §6).
    assert settings["StateDirectory"] == "relaybot"
    assert "XDG_DATA_HOME" not in settings.get("Environment", "")


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    # verify checks that ExecStart's program exists: point it at this checkout's relaybot.
    program = Path(sys.executable).with_name("relaybot")
    if not program.exists():
        pytest.skip(f"no relaybot console script next to {sys.executable} (pip install -e .)")
    unit = tmp_path / "relaybot.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/relaybot", str(program)))
    result = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=120
    )
    # verify exits 0 on settings it ignores; every such line is a defect of the unit too.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def _docker_answers() -> str | None:
    """None when a Docker daemon answers, else why not."""
    docker = shutil.which("docker")
    if docker is None:
        return "docker is not installed"
    try:
        result = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        return f"no Docker daemon answers: {lines[-1] if lines else result.returncode}"
    return None


@pytest.mark.skipif(sys.platform != "linux", reason="the container needs --network host")
async def test_the_image_builds_and_its_container_answers_healthz(tmp_path: Path) -> None:
    reason = _docker_answers()
    if reason is not None:
        pytest.skip(reason)
    tag = f"relaybot-test:{uuid.uuid4().hex[:8]}"
    name = f"relaybot-test-{uuid.uuid4().hex[:8]}"
    build = await asyncio.to_thread(
        subprocess.run, ["docker", "build", "-t", tag, str(REPO)], capture_output=True, timeout=900
    )
    assert build.returncode == 0, build.stderr.decode()[-4000:]
    port = free_port()
    try:
        async with TelegramBotApiServer() as peer, ProviderServer() as provider:
            await asyncio.to_thread(_write_config, tmp_path, peer, provider, port)
            run = [
                *("docker", "run", "-d", "--rm", "--name", name, "--network", "host"),
                *("-v", f"{tmp_path}:/config:ro", tag),
                *("run", "--config", "/config/relaybot.yaml", "--log-format", "json"),
            ]
            started = await asyncio.to_thread(subprocess.run, run, capture_output=True, timeout=120)
            assert started.returncode == 0, started.stderr.decode()
            from tests.ops_harness import get

            async with asyncio.timeout(60):
                while True:
                    try:
                        status, _, body = await get(port, "/healthz")
                    except OSError:
                        await asyncio.sleep(0.5)
                        continue
                    if status == "HTTP/1.1 200 OK":
                        break
                    await asyncio.sleep(0.5)
            assert json.loads(body)["channels"] == {"tg": {"state": "ok"}}
            stopped = await asyncio.to_thread(
                subprocess.run, ["docker", "stop", "-t", "60", name], capture_output=True
            )
            assert stopped.returncode == 0
    finally:
        await asyncio.to_thread(_remove, name, tag)


def _write_config(
    tmp_path: Path, peer: TelegramBotApiServer, provider: ProviderServer, port: int
) -> None:
    """The container's config, readable by its user (the volume is mounted read-only)."""
    (tmp_path / "relaybot.yaml").write_text(
        f"""\
providers:
  main: {{kind: openai_chat, base_url: "{provider.url}/v1", api_key: k, model: m}}
agent:
  providers: [main]
channels:
  tg: {{kind: telegram, token: "{peer.token}", base_url: "{peer.base_url}"}}
storage:
  path: /data/relaybot.db
server:
  listen: 127.0.0.1:{port}
"""
    )
    tmp_path.chmod(0o755)
    (tmp_path / "relaybot.yaml").chmod(0o644)


def _remove(name: str, tag: str) -> None:
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120)
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)


README = REPO / "README.md"
COMPOSE = REPO / "compose.yaml"
EXAMPLE = REPO / "config" / "telegram.yaml"
"""The config the README, compose.yaml, the Dockerfile and the unit install."""


def _readme_docker_run() -> str:
    """The README's ``docker run`` command, its continuation lines joined."""
    text = README.read_text()
    start = text.index("docker run -d --name relaybot")
    lines = []
    for line in text[start:].splitlines():
        lines.append(line.rstrip("\\").strip())
        if not line.endswith("\\"):
            break
    return " ".join(lines)


def _example_variables() -> set[str]:
    import re

    values = [line.split(" #")[0] for line in EXAMPLE.read_text().splitlines()]
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", "\n".join(values)))


def test_every_variable_the_readme_and_compose_pass_is_one_the_example_reads() -> None:
    import shlex

    import yaml

    words = shlex.split(_readme_docker_run())
    passed = {words[i + 1] for i, word in enumerate(words) if word == "-e"}
    service = yaml.safe_load(COMPOSE.read_text())["services"]["relaybot"]
    composed = {entry.split("=", 1)[0] for entry in service["environment"]}
    assert passed and passed == composed
    assert passed <= _example_variables(), passed - _example_variables()


def test_the_deploy_config_passes_check_config_with_only_the_documented_variables(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    for path in (README, COMPOSE, REPO / "Dockerfile", REPO / "contrib" / "relaybot.service"):
        assert "config/telegram.yaml" in path.read_text(), path
    env = {
        "PYTHONPATH": str(REPO),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "STATE_DIRECTORY": str(tmp_path / "state"),
        "OPENAI_API_KEY": "sk-test",
        "TELEGRAM_BOT_TOKEN": "123:abc",
    }
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "check-config", str(EXAMPLE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    # The one warning is the allowed_users the operator is told to edit.
    assert [line.split(": ")[1] for line in result.stderr.splitlines()] == [
        "channels.tg.allowed_users"
    ]


def test_the_readme_and_compose_keep_the_bot_running_and_let_it_drain() -> None:
    import shlex

    import yaml

    from orchestrator.ops.daemon import DELIVERY_GRACE_SECS, SHUTDOWN_GRACE_SECS

    drain = SHUTDOWN_GRACE_SECS + DELIVERY_GRACE_SECS
    words = shlex.split(_readme_docker_run())
    assert words[words.index("--restart") + 1] == "unless-stopped"
    assert int(words[words.index("--stop-timeout") + 1]) > drain
    assert "relaybot-data:/data" in words
    service = yaml.safe_load(COMPOSE.read_text())["services"]["relaybot"]
    assert service["restart"] == "unless-stopped"
    assert int(service["stop_grace_period"].removesuffix("s")) > drain
    assert "relaybot-data:/data" in service["volumes"]
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "HEALTHCHECK" in dockerfile and "STATE_DIRECTORY=/data" in dockerfile


@pytest.mark.skipif(sys.platform != "linux", reason="the container needs --network host")
async def test_the_readme_docker_run_line_runs_as_written(tmp_path: Path) -> None:
    """The README's line itself, through a shell, with only the image and name made unique and
    --network host added (the peers listen on this host's 127.0.0.1)."""
    import os
    import shlex

    reason = _docker_answers()
    if reason is not None:
        pytest.skip(reason)
    tag = f"relaybot-test:{uuid.uuid4().hex[:8]}"
    name = f"relaybot-test-{uuid.uuid4().hex[:8]}"
    build = await asyncio.to_thread(
        subprocess.run, ["docker", "build", "-t", tag, str(REPO)], capture_output=True, timeout=900
    )
    assert build.returncode == 0, build.stderr.decode()[-4000:]
    line = _readme_docker_run()
    line = line.replace("--name relaybot", f"--name {name} --network host")
    line = line.replace("relaybot-data:/data", f"{name}-data:/data")
    line = line.replace(" -p 127.0.0.1:9464:9464", "")
    assert line.endswith(" relaybot")
    line = line.removesuffix(" relaybot") + f" {shlex.quote(tag)}"
    port = free_port()
    try:
        async with TelegramBotApiServer() as peer, ProviderServer() as provider:
            await asyncio.to_thread(_write_config, tmp_path, peer, provider, port)
            config = (tmp_path / "relaybot.yaml").read_text()
            config = config.replace("k, model", '"${OPENAI_API_KEY}", model')
            config = config.replace(f'"{peer.token}"', '"${TELEGRAM_BOT_TOKEN}"')
            config = config.replace("  path: /data/relaybot.db\n", "  path: relaybot.db\n")
            (tmp_path / "relaybot.yaml").write_text(config)
            env = {**os.environ, "OPENAI_API_KEY": "k", "TELEGRAM_BOT_TOKEN": peer.token}
            started = await asyncio.to_thread(
                subprocess.run, ["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True
            )
            assert started.returncode == 0, started.stderr.decode()
            from tests.ops_harness import get

            async with asyncio.timeout(60):
                while True:
                    try:
                        status, _, _body = await get(port, "/healthz")
                    except OSError:
                        await asyncio.sleep(0.5)
                        continue
                    if status == "HTTP/1.1 200 OK":
                        break
                    await asyncio.sleep(0.5)
            inspect = await asyncio.to_thread(
                subprocess.run,
                [
                    "docker",
                    "inspect",
                    "--format",
                    "{{json .Config.StopTimeout}} {{json .HostConfig.RestartPolicy.Name}}",
                    name,
                ],
                capture_output=True,
                text=True,
            )
            assert inspect.stdout.split() == ["45", '"unless-stopped"']
            listed = await asyncio.to_thread(
                subprocess.run,
                ["docker", "exec", name, "ls", "/data"],
                capture_output=True,
                text=True,
            )
            assert "relaybot.db" in listed.stdout.split()
    finally:
        await asyncio.to_thread(_remove, name, tag)
        volume = ["docker", "volume", "rm", "-f", f"{name}-data"]
        await asyncio.to_thread(subprocess.run, volume, capture_output=True)


def test_the_compose_file_is_valid_for_docker_compose(tmp_path: Path) -> None:
    reason = _docker_answers()
    if reason is not None:
        pytest.skip(reason)
    shutil.copy(COMPOSE, tmp_path / "compose.yaml")
    (tmp_path / "relaybot.yaml").write_text("")
    result = subprocess.run(
        ["docker", "compose", "-f", str(tmp_path / "compose.yaml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            "OPENAI_API_KEY": "k",
            "TELEGRAM_BOT_TOKEN": "t",
        },
        timeout=120,
    )
    if "unknown command" in result.stderr or "is not a docker command" in result.stderr:
        pytest.skip("the docker compose plugin is not installed")
    assert result.returncode == 0, result.stderr
