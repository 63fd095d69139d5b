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
        "DynamicUser=yes",
        "StateDirectory=relaybot",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ):
        assert wanted in lines, wanted
    exec_start = next(line for line in lines if line.startswith("ExecStart="))
    assert exec_start.split("=", 1)[1].split()[1:3] == ["run", "--config"]


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
