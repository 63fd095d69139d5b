"""``relaybot doctor`` against the wire peers (architecture §7): the Telegram Bot API peer, the
Discord peer, the provider server and a SQLite store; one ✓/✗ line per check, exit 0 only when
all passed."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from tests.peers.discord import DiscordServer
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.synapse import SynapseHomeserver
from tests.peers.telegram import TelegramBotApiServer

REPO = Path(__file__).resolve().parent.parent

CONFIG = """\
channels:
  tg:
    kind: telegram
    token: "${{TG_TOKEN}}"
    base_url: "{telegram}"
    allowed_users: ["*"]
  dc:
    kind: discord
    token: "${{DC_TOKEN}}"
    api_base_url: "{discord}"
    allowed_users: ["*"]
providers:
  openai:
    kind: openai_chat
    base_url: "{provider}/v1"
    api_key: "${{OPENAI_API_KEY}}"
    model: {model}
agent:
  providers: [openai]
storage:
  path: "{store}"
server:
  listen: "127.0.0.1:{port}"
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _doctor(tmp_path: Path, *args: str, **env: str) -> tuple[int, list[str], str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "orchestrator.cli",
        "doctor",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
        cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines(), err.decode()


async def _run(
    tmp_path: Path,
    *,
    tg_token: str | None = None,
    model: str = "m",
    store: str | None = None,
    port: int | None = None,
    **env: str,
) -> tuple[int, list[str], str]:
    async with TelegramBotApiServer() as telegram, DiscordServer() as discord:
        async with ProviderServer() as provider:
            listing = {"object": "list", "data": [{"id": "m"}, {"id": "qwen3"}]}
            provider.script("/v1/models", [Reply.json(listing)])
            config = tmp_path / "bot.yaml"
            config.write_text(
                CONFIG.format(
                    telegram=telegram.base_url,
                    discord=discord.api_base,
                    provider=provider.url,
                    model=model,
                    store=store or str(tmp_path / "relaybot.db"),
                    port=port or _free_port(),
                )
            )
            return await _doctor(
                tmp_path,
                "--config",
                str(config),
                TG_TOKEN=tg_token or telegram.token,
                DC_TOKEN=discord.token,
                OPENAI_API_KEY="sk-test",
                **env,
            )


async def test_all_checks_pass_against_the_peers(tmp_path: Path) -> None:
    code, lines, err = await _run(tmp_path)
    assert code == 0, (lines, err)
    assert len(lines) == 5 and all(line.startswith("✓ ") for line in lines), lines
    assert lines[0].startswith("✓ channel tg: bot @")
    assert lines[1].startswith("✓ channel dc: bot ")
    assert lines[2].startswith("✓ provider openai: model m is served by http://127.0.0.1:")
    assert lines[3].startswith("✓ store sqlite:///") and "written" in lines[3]
    assert lines[4].startswith("✓ ops port 127.0.0.1:")
    assert err == ""


async def test_a_bad_token_an_unknown_model_and_a_refused_store_each_say_so(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    code, lines, err = await _run(
        tmp_path,
        tg_token="123:wrong",
        model="gpt-4.1-mini",
        store=str(blocker / "relaybot.db"),
    )
    assert code == 1, (lines, err)
    assert "✗ channel tg: the token was refused (401): check channels.tg.token" in lines[0]
    assert lines[1].startswith("✓ channel dc")
    assert lines[2] == (
        '✗ provider openai: the model service does not know the model "gpt-4.1-mini"; '
        "it lists: m, qwen3 (set providers.openai.model)"
    )
    assert lines[3].startswith(f"✗ store sqlite:///{blocker}/relaybot.db: ")
    assert lines[3].endswith("(check storage.path / storage.url)")
    assert "Traceback" not in err and "123:wrong" not in "\n".join(lines) + err


async def test_an_unreachable_channel_names_only_the_channel_s_setting(tmp_path: Path) -> None:
    port = _free_port()
    async with ProviderServer() as provider:
        provider.script("/v1/models", [Reply.json({"object": "list", "data": [{"id": "m"}]})])
        config = tmp_path / "bot.yaml"
        text = CONFIG.format(
            telegram=f"http://127.0.0.1:{port}/bot",
            discord=f"http://127.0.0.1:{port}/api/v10",
            provider=provider.url,
            model="m",
            store=str(tmp_path / "relaybot.db"),
            port=_free_port(),
        )
        config.write_text(text)
        code, lines, err = await _doctor(
            tmp_path, "--config", str(config), TG_TOKEN="1:x", DC_TOKEN="y", OPENAI_API_KEY="k"
        )
    assert code == 1, (lines, err)
    refused = f"cannot reach the server: 127.0.0.1:{port} refused the connection (is it running?"
    assert lines[0] == f"✗ channel tg: {refused} check channels.tg.base_url)"
    assert lines[1] == f"✗ channel dc: {refused} check channels.dc.api_base_url)"
    assert "providers" not in lines[0] + lines[1]


async def test_a_dead_proxy_is_named_in_every_check_that_goes_through_it(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens: the proxy is down
    code, lines, err = await _run(tmp_path, HTTP_PROXY=f"http://127.0.0.1:{port}")
    assert code == 1, (lines, err)
    proxy = f"the proxy 127.0.0.1:{port} (HTTP_PROXY) refused the connection (is it running? "
    advice = "check HTTP_PROXY, or add 127.0.0.1 to NO_PROXY to reach it directly)"
    assert lines[0] == f"✗ channel tg: cannot reach the server: {proxy}{advice}"
    assert lines[1] == f"✗ channel dc: cannot reach the server: {proxy}{advice}"
    assert lines[2] == f"✗ provider openai: cannot reach the model service: {proxy}{advice}"


async def test_an_ops_port_in_use_is_a_failure(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, lines, _ = await _run(tmp_path, port=port)
    assert code == 1
    assert lines[-1] == (
        f"✗ ops port 127.0.0.1:{port}: cannot listen: Address already in use (change server.listen)"
    )


@pytest.mark.parametrize("writable", [True, False])
async def test_store_only_reads_only_the_storage_section(tmp_path: Path, writable: bool) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = tmp_path / "s.db" if writable else blocker / "s.db"
    config = tmp_path / "bot.yaml"
    # The other sections' secrets are not in the environment; only storage is read.
    config.write_text(
        CONFIG.format(
            telegram="http://127.0.0.1:9/bot",
            discord="http://127.0.0.1:9/api/v10",
            provider="http://127.0.0.1:9",
            model="m",
            store="${STORE_DIR}/" + store.name if writable else str(store),
            port=1,
        )
    )
    code, lines, err = await _doctor(
        tmp_path, "--config", str(config), "--store-only", STORE_DIR=str(tmp_path)
    )
    assert len(lines) == 1, (lines, err)
    if writable:
        done = "connected, schema up to date, written"
        assert code == 0 and lines[0] == f"✓ store sqlite:///{store}: {done}"
        assert store.exists()
    else:
        assert code == 1 and lines[0].startswith("✗ store ")
    assert "Traceback" not in err


async def test_a_refused_postgresql_server_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    port = _free_port()
    config.write_text(f'storage:\n  url: "postgresql://relaybot@127.0.0.1:{port}/relaybot"\n')
    code, lines, err = await _doctor(tmp_path, "--config", str(config), "--store-only")
    assert code == 1, (lines, err)
    assert len(lines) == 1 and lines[0].startswith(
        f"✗ store postgresql://relaybot@127.0.0.1:{port}"
    )
    assert "Traceback" not in err


PASSWORD_STORE_CONFIG = """\
channels:
  c:
    kind: console
providers:
  main:
    kind: openai_chat
    base_url: http://127.0.0.1:9/v1
    api_key: sk-test
    model: m
agent:
  providers: [main]
storage:
  url: ${DATABASE_URL}
server:
  listen: null
"""


@pytest.mark.parametrize("command", ["doctor", "doctor --store-only", "runs", "run"])
async def test_no_command_shows_the_store_url_s_password(tmp_path: Path, command: str) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(PASSWORD_STORE_CONFIG)
    port = _free_port()
    url = f"postgresql://relaybot:s3cretPW@127.0.0.1:{port}/relaybot?password=s3cretPW"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "orchestrator.cli",
        *command.split(),
        "--config",
        str(config),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={
            "PYTHONPATH": str(REPO),
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "DATABASE_URL": url,
        },
        cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    shown = out.decode() + err.decode()
    assert process.returncode == 1, shown
    assert "s3cretPW" not in shown
    if command.startswith("doctor"):
        masked = f"postgresql://relaybot:***@127.0.0.1:{port}/relaybot?password=***"
        assert f"✗ store {masked}: " in shown
    assert "Traceback" not in shown


MATRIX_CONFIG = """\
channels:
  mx:
    kind: matrix
    homeserver: "{homeserver}"
    user_id: "{user_id}"
    access_token: "${{MX_TOKEN}}"
    device_id: "{device_id}"
    allowed_users: ["*"]
providers:
  openai:
    kind: openai_chat
    base_url: "{provider}/v1"
    api_key: sk-test
    model: m
agent:
  providers: [openai]
storage:
  path: "{store}"
server:
  listen: null
"""


@pytest.mark.parametrize("good_token", [True, False])
async def test_matrix_whoami_against_synapse(
    tmp_path: Path, synapse: SynapseHomeserver, good_token: bool
) -> None:
    bot = synapse.register(f"doctor{int(good_token)}")
    async with ProviderServer() as provider:
        provider.script("/v1/models", [Reply.json({"data": [{"id": "m"}]})])
        config = tmp_path / "bot.yaml"
        config.write_text(
            MATRIX_CONFIG.format(
                homeserver=synapse.base_url,
                user_id=bot.user_id,
                device_id=bot.device_id,
                provider=provider.url,
                store=tmp_path / "relaybot.db",
            )
        )
        token = bot.access_token if good_token else "syt_wrong"
        code, lines, err = await _doctor(tmp_path, "--config", str(config), MX_TOKEN=token)
    if good_token:
        assert code == 0, (lines, err)
        assert lines[0] == f"✓ channel mx: {bot.user_id} (whoami)"
    else:
        assert code == 1
        assert lines[0] == (
            "✗ channel mx: the access token was refused (401): check channels.mx.access_token"
        )


async def test_the_embedded_default_says_its_demo_model_is_started_by_run(tmp_path: Path) -> None:
    """Without a file: the demo model runs only under ``relaybot run``, so it gets a line saying
    so (and how to use a real model), and the ops port ``:0`` one saying any free port is
    taken at start, instead of "free" for a port no one will use."""
    code, lines, err = await _doctor(tmp_path)
    assert code == 0, (lines, err)
    assert (
        "✓ model: the built-in demo model, started by relaybot run (nothing to check; set "
        "OPENAI_API_KEY or ANTHROPIC_API_KEY for a real one)"
    ) in lines
    assert lines[-1] == "✓ ops port 127.0.0.1:0: a free port, chosen at start (nothing to check)"
    # with a real model's key, the model is that provider's check, not the demo line
    code, lines, _ = await _doctor(
        tmp_path, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL="http://127.0.0.1:9/v1"
    )
    assert not [line for line in lines if "demo model" in line], lines
    assert [line for line in lines if line.startswith("✗ provider openai:")], lines
