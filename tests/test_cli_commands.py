"""The ``relaybot`` command line as a user meets it (architecture §6, §7): version, help, pipes, the
embedded default's providers and the exit code of a piped run. Every test runs the real command
in a clean environment."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.cli_parser import build_parser
from tests.conftest import FIXTURES
from tests.peers.provider_server import ProviderServer, Reply

REPO = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PYTHONPATH": str(REPO),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        **extra,
    }


def _relaybot(
    tmp_path: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        env=_env(tmp_path, **env),
        cwd=tmp_path,
        timeout=90,
    )


def test_version(tmp_path: Path) -> None:
    from importlib import metadata

    result = _relaybot(tmp_path, "--version")
    assert result.returncode == 0
    assert result.stdout == f"relaybot {metadata.version('relaybot')}\n"


def test_bare_relaybot_prints_the_help(tmp_path: Path) -> None:
    result = _relaybot(tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("usage: relaybot")
    for command in ("run", "check-config", "schema", "--version", "exit codes"):
        assert command in result.stdout
    assert result.stdout == _relaybot(tmp_path, "--help").stdout


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_command_and_argument_has_a_help_text(tmp_path: Path) -> None:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert {c.dest for c in commands._choices_actions} == {
        "run",
        "check-config",
        "schema",
        "runs",
        "tools",
        "doctor",
        "migrate-store",
        "usage",
    }
    assert all(c.help for c in commands._choices_actions)
    for name, sub in _subparsers().items():
        assert sub.description and len(sub.description) > 60, name  # describes the command
        result = _relaybot(tmp_path, name, "--help")
        assert result.returncode == 0
        for action in sub._actions:
            assert action.help, (name, action.dest)
            assert action.help.split("%")[0].split("(")[0].strip()[:30] in " ".join(
                result.stdout.split()
            ), (name, action.dest)


def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path: Path) -> None:
    # As `relaybot schema | head -1`: the reader is gone before the command writes.
    for args in (["schema"], ["--help"], []):
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(tmp_path),
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        err = process.stderr.read()
        code = process.wait(timeout=60)
        assert err == b"", args
        assert code in (0, 1), args


# -- the embedded default's providers and piped runs -------------------------------------------


def test_piped_run_without_a_terminal_has_no_banner_and_no_prompt(tmp_path: Path) -> None:
    result = _relaybot(tmp_path, "run", stdin="hello\n")
    assert result.returncode == 0, result.stderr
    assert "you>" not in result.stdout
    assert "console channel" not in result.stdout + result.stderr
    assert result.stdout.startswith("I am the built-in demo model")


def test_the_demo_model_is_not_asked_through_the_environment_s_proxy(tmp_path: Path) -> None:
    # It is served in this process, on loopback: a proxy elsewhere would ask its own loopback,
    # and one that is down (here: nothing listens) made the README's first command fail.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = _relaybot(tmp_path, "run", stdin="hello\n", HTTP_PROXY=dead, HTTPS_PROXY=dead)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("I am the built-in demo model")


def test_the_demo_model_explains_itself_once_per_conversation(tmp_path: Path) -> None:
    result = _relaybot(tmp_path, "run", stdin="first\nsecond\n/reset\nthird\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("You wrote:") == 3
    # Explained in the first answer, not in the second; /reset starts a new conversation.
    assert out.count("I am the built-in demo model") == 2
    assert out.count("What you are watching is the real pipeline") == 2
    second = out[out.index('"second"') - 40 : out.index("Conversation cleared")]
    assert "demo model" not in second
    assert out.index("Conversation cleared") < out.rindex("I am the built-in demo model")


def test_piped_help_and_unknown_commands_never_reach_the_model(tmp_path: Path) -> None:
    result = _relaybot(tmp_path, "run", stdin="/help\n/frobnicate\n//frobnicate\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for item in ("/reset", "/stop", "Ctrl-C", "Ctrl-D"):
        assert item in out
    assert "unknown command /frobnicate" in out
    assert out.count("You wrote:") == 1  # only the escaped line was a message
    assert 'You wrote: "/frobnicate"' in out


@pytest.mark.parametrize(
    ("status", "cause"),
    [
        (
            401,
            "the model service refused the API key "
            "(check OPENAI_API_KEY / providers.openai.api_key)",
        ),
        (
            403,
            "the model service denied access with this API key "
            "(check OPENAI_API_KEY / providers.openai.api_key)",
        ),
    ],
)
async def test_a_piped_run_whose_answer_failed_exits_1_with_the_cause(
    tmp_path: Path, status: int, cause: str
) -> None:
    import asyncio

    async with ProviderServer() as server:
        error = {"error": {"message": "Incorrect API key provided", "type": "invalid_request"}}
        server.script("/v1/chat/completions", [Reply.json(error, status=status)])
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "orchestrator.cli",
            "run",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(tmp_path, OPENAI_API_KEY="sk-wrong", OPENAI_BASE_URL=server.url + "/v1"),
            cwd=tmp_path,
        )
        out, err = await asyncio.wait_for(process.communicate(b"hi\n"), timeout=60)
    assert process.returncode == 1, err
    lines = err.decode().splitlines()
    assert f"relaybot: an answer could not be produced: {cause}" in lines
    assert lines[-1] == f"relaybot: an answer could not be produced: {cause}"
    assert f"⚠️ Answer interrupted: {cause}" in out.decode()
    assert "sk-wrong" not in out.decode() + err.decode()


async def test_a_piped_run_whose_answers_all_came_exits_0(tmp_path: Path) -> None:
    result = _relaybot(tmp_path, "run", stdin="one\ntwo\n")
    assert result.returncode == 0, result.stderr
    assert "could not be produced" not in result.stderr


async def test_anthropic_api_key_alone_talks_to_anthropic(tmp_path: Path) -> None:
    import asyncio

    async with ProviderServer() as server:
        fixture = Reply.fixture(FIXTURES / "anthropic_text_with_usage.sse")
        # The SDK's convention: ANTHROPIC_BASE_URL is the root, requests go to /v1/messages.
        server.script("/v1/messages", [fixture])
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "orchestrator.cli",
            "run",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-local", ANTHROPIC_BASE_URL=server.url),
            cwd=tmp_path,
        )
        started = time.monotonic()
        out, err = await asyncio.wait_for(process.communicate(b"hello\n"), timeout=60)
    assert process.returncode == 0, err
    assert time.monotonic() - started < 60
    assert out.decode() == "hi\n"
    assert "DEMO" not in err.decode()
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.headers.get("x-api-key") == "sk-ant-local"
    assert request.json["model"] == "claude-haiku-4-5"  # type: ignore[index]


async def _piped_run(server: ProviderServer, tmp_path: Path, **env: str) -> tuple[str, str, int]:
    import asyncio

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "orchestrator.cli",
        "run",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(tmp_path, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.url + "/v1", **env),
        cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(process.communicate(b"hi\n"), timeout=60)
    assert process.returncode is not None
    return out.decode(), err.decode(), process.returncode


async def test_with_openai_base_url_and_no_model_the_first_listed_model_is_used(
    tmp_path: Path,
) -> None:
    from tests.pipeline import text_answer

    async with ProviderServer() as server:
        listing = {"object": "list", "data": [{"id": "llama3.2"}, {"id": "qwen3"}]}
        server.script("/v1/models", [Reply.json(listing)])
        server.script("/v1/chat/completions", [Reply(body=text_answer("Hello there."))])
        out, err, code = await _piped_run(server, tmp_path)
        sent = server.requests_to("/v1/chat/completions")[0].json
    assert code == 0, err
    assert sent["model"] == "llama3.2"
    assert f"relaybot: model llama3.2, the first that {server.url}/v1 lists" in err
    assert "Hello there." in out


async def test_openai_model_is_sent_and_no_models_are_asked(tmp_path: Path) -> None:
    from tests.pipeline import text_answer

    async with ProviderServer() as server:
        server.script("/v1/chat/completions", [Reply(body=text_answer("Hi."))])
        _, err, code = await _piped_run(server, tmp_path, OPENAI_MODEL="gpt-5-nano")
        sent = server.requests_to("/v1/chat/completions")[0].json
        asked = server.requests_to("/v1/models")
    assert code == 0, err
    assert sent["model"] == "gpt-5-nano" and asked == []
    assert "the first that" not in err


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"OPENAI_API_KEY": "“sk-secretvalue”"},
            "relaybot: OPENAI_API_KEY: the key holds a character an HTTP header cannot carry",
        ),
        (
            {"OPENAI_API_KEY": "sk-ok", "OPENAI_BASE_URL": "http://u:hunter2@127.0.0.1:9/v1"},
            "relaybot: OPENAI_BASE_URL: a user or password in the URL is not sent",
        ),
        (
            {"OPENAI_API_KEY": "sk-ok", "OPENAI_MODEL": "m", "OPENAI_BASE_URL": "http://h:x/v1"},
            "relaybot: OPENAI_BASE_URL: the port is not a number",
        ),
        (
            {"ANTHROPIC_API_KEY": "sk-ant-secret value"},
            "relaybot: ANTHROPIC_API_KEY: the key holds a character",
        ),
        ({"HTTP_PROXY": "http://127.0.0.1:notaport"}, "relaybot: HTTP_PROXY: Invalid port"),
        (
            {"https_proxy": "ftp://u:hunter2@127.0.0.1:1"},
            "relaybot: https_proxy: ftp:// is not a proxy's scheme",
        ),
        ({"ALL_PROXY": "http://u:secretvalue@h:bad"}, "relaybot: ALL_PROXY: not a URL"),
        (
            {"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "[::1]:80"},
            "relaybot: NO_PROXY: Invalid port",
        ),
    ],
    ids=[
        "openai-key",
        "openai-url-userinfo",
        "openai-url-port",
        "anthropic-key",
        "proxy-port",
        "proxy-scheme",
        "proxy-userinfo",
        "no-proxy-entry",
    ],
)
@pytest.mark.parametrize("command", ["run", "doctor", "tools"])
def test_a_bad_value_in_the_environment_is_one_line_naming_its_variable(
    tmp_path: Path, env: dict[str, str], line: str, command: str
) -> None:
    # without a config file the embedded default takes these variables
    result = _relaybot(tmp_path, command, stdin="hi\n", **env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(line) and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    for secret in ("secretvalue", "hunter2", "secret value"):
        assert secret not in result.stderr + result.stdout
