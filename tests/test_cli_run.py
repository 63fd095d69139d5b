"""``relaybot run`` as a process: the embedded default, end of input, SIGTERM, start failures
(architecture §7). Each test starts the real command with a clean environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.ops.config_checks import available_channel_kinds

REPO = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PYTHONPATH": str(REPO),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "STATE_DIRECTORY": str(tmp_path),  # a relative storage.path is in it (architecture §6)
        **extra,
    }


def _start(tmp_path: Path, *args: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path, **extra),
        cwd=tmp_path,
    )


def test_piped_input_gets_a_final_answer_from_the_demo_model(tmp_path: Path) -> None:
    process = _start(tmp_path)
    out, err = process.communicate("hello\n", timeout=60)
    assert process.returncode == 0, err
    assert "DEMO" in err  # clearly labelled as a demo
    assert 'You wrote: "hello"' in out
    assert "demo model" in out
    assert len(out.encode()) >= 500  # long enough to stream past the redaction holdback
    assert (tmp_path / "data" / "relaybot" / "relaybot.db").exists()


def test_piped_time_question_runs_the_tool(tmp_path: Path) -> None:
    process = _start(tmp_path)
    out, err = process.communicate("what time is it?\n", timeout=60)
    assert process.returncode == 0, err
    assert "current_time tool says it is" in out
    assert "(UTC)" in out


CONSOLE_CONFIG = """\
providers:
  main: {kind: openai_chat, base_url: "http://127.0.0.1:9/v1", api_key: k, model: m}
agent:
  providers: [main]
channels:
  term: {kind: console}
storage:
  path: state/bot.db
server:
  listen: null
"""


def test_sigterm_exits_0(tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(CONSOLE_CONFIG)
    process = _start(tmp_path, "--config", str(config))
    try:
        assert process.stderr is not None
        started = ""
        while "relaybot running" not in started:  # serving: the signals are handled now
            started = process.stderr.readline()
            assert started, "the process ended before serving"
        assert (tmp_path / "state" / "bot.db").exists()  # the store is opened at start
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, started + err
    assert "Traceback" not in started + err


def test_a_channel_kind_without_an_adapter_fails_start_in_one_line(tmp_path: Path) -> None:
    snippets = {
        "matrix": '  mx: {kind: matrix, homeserver: "http://127.0.0.1:9", user_id: "@b:x",'
        " access_token: t}",
        "discord": "  mx: {kind: discord, token: t}",
    }
    missing = [kind for kind in snippets if kind not in available_channel_kinds()]
    if not missing:
        pytest.skip("every channel kind has an adapter")
    config = tmp_path / "bot.yaml"
    config.write_text(CONSOLE_CONFIG.replace("  term: {kind: console}", snippets[missing[0]]))
    process = _start(tmp_path, "--config", str(config))
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2
    lines = [line for line in err.splitlines() if line.startswith("relaybot:")]
    assert lines == [
        f"relaybot: channel mx: cannot start: channel kind {missing[0]!r} is not available yet"
    ]
    assert "Traceback" not in err


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_an_only_channel_unreachable_at_boot_is_retried_and_the_bot_keeps_running(
    tmp_path: Path,
) -> None:
    # Before, the run ended with exit 1 after the first attempt (1.9 s): a bot booted while its
    # network was down stayed down. Now it retries with capped backoff until SIGTERM.
    config = tmp_path / "bot.yaml"
    config.write_text(
        CONSOLE_CONFIG.replace(
            "  term: {kind: console}",
            '  mx: {kind: matrix, homeserver: "http://127.0.0.1:9", user_id: "@b:x",'
            " access_token: secret-token-value}",
        )
    )
    process = _start(tmp_path, "--config", str(config))
    try:
        assert process.stderr is not None
        seen: list[str] = []
        while sum("retrying in" in line for line in seen) < 3:  # three attempts: 1 s, 2 s
            line = process.stderr.readline()
            assert line, "the process ended: " + "".join(seen)
            seen.append(line)
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    err = "".join(seen) + err
    assert process.returncode == 0, err
    assert "cannot reach the homeserver at http://127.0.0.1:9" in err
    assert "secret-token-value" not in err
    assert "Traceback" not in err


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_end_of_input_waits_for_the_running_answer(tmp_path: Path) -> None:
    process = _start(tmp_path)
    out, err = process.communicate("first\nsecond\n", timeout=90)
    assert process.returncode == 0, err
    assert out.count("You wrote:") == 2
    assert out.index('"first"') < out.index('"second"')


@pytest.mark.skipif(os.name != "posix", reason="EPIPE")
@pytest.mark.parametrize("input_ends", [True, False], ids=["input-ended", "input-open"])
def test_a_reader_of_stdout_that_went_away_ends_the_run_quietly_with_1(
    tmp_path: Path, input_ends: bool
) -> None:
    # `echo hello | relaybot run | true`: the answer's write fails with EPIPE. Before, the turn
    # failed in the dispatcher with a traceback and the run waited for a signal (architecture §7
    # "Console and stdin"); now it ends as a filter whose reader went away does, also while its
    # input stays open.
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the answer is written
    with (tmp_path / "stderr").open("w+") as stderr:
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "orchestrator.cli", "run"],
                stdin=subprocess.PIPE,
                stdout=write_end,
                stderr=stderr,
                text=True,
                env=_env(tmp_path),
                cwd=tmp_path,
            )
        finally:
            os.close(write_end)
        assert process.stdin is not None
        try:
            process.stdin.write("hello\n")
            process.stdin.flush()
            if input_ends:
                process.stdin.close()
            process.wait(timeout=30)  # the demo's answer takes about 5 s
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdin.close()
        stderr.seek(0)
        err = stderr.read()
    assert process.returncode == 1, err
    assert "Traceback" not in err
    assert "Broken pipe" not in err
    assert " ERROR " not in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_stdout_on_a_full_disk_ends_the_run_with_one_line_and_1(tmp_path: Path) -> None:
    # `relaybot run > /dev/full`: every write fails with ENOSPC. It waited for a signal, as a
    # reader that went away did; now one line says why and the run ends (architecture §7).
    with open("/dev/full", "w") as full, (tmp_path / "stderr").open("w+") as stderr:
        result = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "run"],
            input="hello\n",
            stdout=full,
            stderr=stderr,
            text=True,
            env=_env(tmp_path),
            cwd=tmp_path,
            timeout=60,
        )
        stderr.seek(0)
        err = stderr.read()
    assert result.returncode == 1, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "stdout cannot be written: No space left on device" in errors[0]


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            "policy:\n  on_message_sending: no_such_module:hook\n",
            ":12: policy.on_message_sending: cannot import 'no_such_module'",
        ),
        ("", ":5: agent.tools[0]: unknown tool (available: current_time)"),
    ],
    ids=["hook-not-importable", "unknown-tool"],
)
@pytest.mark.parametrize("command", ["check-config", "run"])
def test_what_run_would_reject_fails_check_config_too(
    tmp_path: Path, section: str, expected: str, command: str
) -> None:
    text = CONSOLE_CONFIG + section
    if not section:
        text = text.replace("  providers: [main]\n", "  providers: [main]\n  tools: [shell]\n")
    config = tmp_path / "bot.yaml"
    config.write_text(text)
    args = (
        ["check-config", str(config)]
        if command == "check-config"
        else ["run", "--config", str(config)]
    )
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"{config}{expected}")


def test_metrics_endpoint_and_a_busy_port(tmp_path: Path) -> None:
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "bot.yaml"
    config.write_text(CONSOLE_CONFIG.replace("  listen: null", f"  listen: 127.0.0.1:{port}"))
    process = _start(tmp_path, "--config", str(config))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert r.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            assert b"relaybot_rounds" in r.read()
        # A second bot on the same port cannot listen: one line, exit 1.
        second = _start(tmp_path, "--config", str(config))
        _, err = second.communicate(timeout=30)
        assert second.returncode == 1
        assert [line for line in err.splitlines() if line.startswith("relaybot:")] == [
            f"relaybot: server.listen 127.0.0.1:{port}: cannot listen: Address already in use"
        ]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 0


def test_a_store_that_cannot_be_opened_exits_1_with_one_line(tmp_path: Path) -> None:
    # storage.url names a PostgreSQL server that refuses the connection (port 9: nothing there).
    config = tmp_path / "bot.yaml"
    config.write_text(
        CONSOLE_CONFIG.replace("  path: state/bot.db", "  url: postgresql://bot@127.0.0.1:9/bot")
    )
    process = _start(tmp_path, "--config", str(config))
    _, err = process.communicate(timeout=30)
    assert process.returncode == 1, err
    [line] = [line for line in err.splitlines() if line.startswith("relaybot:")]
    assert line.startswith("relaybot: storage: cannot open the store: connection failed")
    assert "Traceback" not in err


async def test_a_second_signal_interrupts_running_answers_visibly(tmp_path: Path) -> None:
    import asyncio

    from tests.peers.provider_server import ProviderServer, Reply
    from tests.pipeline import sse

    words = [{"choices": [{"index": 0, "delta": {"content": f"word{i} "}}]} for i in range(400)]
    async with ProviderServer() as server:
        # An answer that goes on for a long time: 400 words, 0.1 s apart.
        server.script(
            "/v1/chat/completions",
            [Reply(body=sse(*words), delay_secs=0.1, cuts=range(0, 40000, 60))],
        )
        config = tmp_path / "bot.yaml"
        config.write_text(CONSOLE_CONFIG.replace("http://127.0.0.1:9/v1", server.url + "/v1"))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "orchestrator.cli",
            "run",
            "--config",
            str(config),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(tmp_path),
            cwd=tmp_path,
        )
        assert process.stdin is not None
        process.stdin.write(b"tell me a long story\n")
        await process.stdin.drain()
        while not server.requests:  # noqa: ASYNC110 - the server records, it does not signal
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, err
    assert time.monotonic() - started < 15  # not the 30 s grace, not the whole answer
    text = out.decode()
    assert text.startswith("word0 ")
    assert text.rstrip().endswith("⚠️ Answer interrupted: the bot is shutting down")


def test_rejections_found_after_validation_never_echo_an_environment_value(tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(
        CONSOLE_CONFIG.replace(
            "  providers: [main]\n", '  providers: [main]\n  tools: ["${RB_SECRET}"]\n'
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "check-config", str(config)],
        capture_output=True,
        text=True,
        env=_env(tmp_path, RB_SECRET="hunter2TopSecretValue"),
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    # The line and key path say which entry is meant; the value is never shown.
    assert (
        result.stderr.strip()
        == f"{config}:5: agent.tools[0]: unknown tool (available: current_time)"
    )


TELEGRAM_CONFIG = """\
providers:
  main: {{kind: openai_chat, base_url: "{provider}/v1", api_key: k, model: m}}
agent:
  providers: [main]
channels:
  tg:
    kind: telegram
    token: "{token}"
    base_url: "{base_url}"
    draft_update_interval_ms: 100
    allowed_users: ["*"]
storage:
  path: state/bot.db
server:
  listen: null
"""


@pytest.mark.skipif(os.name != "posix", reason="signals")
async def test_questions_queued_at_sigterm_are_answered_once_after_a_restart(
    tmp_path: Path,
) -> None:
    """architecture §5: SIGTERM while an answer runs and two questions wait behind it; the running
    answer finishes, the process exits 0 keeping both in the store; the next start answers
    each exactly once, in order."""
    import asyncio
    import sqlite3

    from tests.peers.provider_server import ProviderServer, Reply
    from tests.peers.telegram import TelegramBotApiServer
    from tests.pipeline import sse, text_answer

    chat = 111
    db = tmp_path / "state" / "bot.db"
    words = [{"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]} for i in range(30)]
    words.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    slow = Reply(body=sse(*words, "[DONE]"), delay_secs=0.1, cuts=range(0, 4000, 40))

    def waiting() -> int:
        with sqlite3.connect(db) as connection:
            return int(connection.execute("SELECT count(*) FROM waiting").fetchone()[0])

    async def run_until(process: asyncio.subprocess.Process, done: Callable[[], bool]) -> str:
        try:
            async with asyncio.timeout(60):
                while not done():
                    assert process.returncode is None
                    await asyncio.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(process.communicate(), timeout=60)
        finally:
            if process.returncode is None:
                process.kill()
        assert process.returncode == 0, err.decode()
        return err.decode()

    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(chat)
        provider.script(
            "/v1/chat/completions",
            [slow, Reply(body=text_answer("Answer two.")), Reply(body=text_answer("Answer 3."))],
        )
        config = tmp_path / "bot.yaml"
        config.write_text(
            TELEGRAM_CONFIG.format(provider=provider.url, token=peer.token, base_url=peer.base_url)
        )

        async def start() -> asyncio.subprocess.Process:
            return await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "orchestrator.cli", "run", "--config", str(config)),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=_env(tmp_path),
                cwd=tmp_path,
            )

        first = await start()
        async with asyncio.timeout(60):
            while not peer.calls_to("getUpdates"):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        peer.inject_message(chat, "question one")
        async with asyncio.timeout(30):
            while not provider.requests:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        peer.inject_message(chat, "question two")
        peer.inject_message(chat, "question three")
        await run_until(first, lambda: db.exists() and waiting() == 2)
        assert len(provider.requests) == 1  # the queued questions did not run
        assert waiting() == 2  # ... and are kept
        assert peer.texts(chat) == [" ".join(f"w{i}" for i in range(30))]

        second = await start()
        err = await run_until(second, lambda: len(peer.texts(chat)) >= 3)
        await asyncio.sleep(0)
    assert "Traceback" not in err
    asked = [r.json["messages"][-1]["content"] for r in provider.requests]
    assert asked == ["question one", "question two", "question three"]
    assert peer.texts(chat)[1:] == ["Answer two.", "Answer 3."]
    assert waiting() == 0


def test_run_tunes_the_collector_and_picks_the_loop_before_the_loop_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `relaybot run` sets the young-generation threshold (orchestrator/ops/process.py) before
    # anyio.run; the other generations keep CPython's.
    import gc

    import orchestrator.cli as cli
    from orchestrator.ops.process import GC_YOUNG_THRESHOLD

    seen: dict[str, object] = {}

    def fake_run(*args: object, backend_options: dict[str, bool]) -> int:
        seen["threshold"] = gc.get_threshold()
        seen["options"] = backend_options
        return 0

    before = gc.get_threshold()
    monkeypatch.setattr(cli.anyio, "run", fake_run)
    monkeypatch.setattr(cli, "_setup_logging", lambda *args: None)
    try:
        assert cli.main(["run"]) == 0
    finally:
        gc.set_threshold(*before)
    assert seen["threshold"] == (GC_YOUNG_THRESHOLD, before[1], before[2])
    assert set(seen["options"]) == {"use_uvloop"}  # type: ignore[arg-type]


CONSOLE_ONLY = """\
channels:
  con:
    kind: console
providers:
  main:
    kind: openai_chat
    base_url: http://127.0.0.1:9/v1
    api_key: k
    model: m
agent:
  providers: [main]
server:
  listen: null
"""


def _writer_of(fifo: Path, process: subprocess.Popen[str]) -> int:
    """A descriptor writing to ``fifo``, once ``process`` has it open for reading (the config
    being read; until then a non-blocking open for writing fails with ENXIO)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            assert time.monotonic() < deadline and process.poll() is None, "never read"
            time.sleep(0.01)


def test_a_sighup_while_starting_is_held_and_reloads_once_up(tmp_path: Path) -> None:
    # The config file is a FIFO: the process is held reading it, well after its start, while
    # a SIGHUP comes (as from a terminal closed at once, or a `systemctl reload` right after the
    # start). It used to end the process (SIGHUP's default action); now it is held, and read as
    # a reload once the bot runs. Started as the `relaybot` script is (orchestrator/entry.py).
    fifo = tmp_path / "bot.yaml"
    os.mkfifo(fifo)
    entry = "import sys; from orchestrator.entry import main; sys.exit(main())"
    process = subprocess.Popen(
        [sys.executable, "-c", entry, "run", "--config", str(fifo)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    lines: list[str] = []
    assert process.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(process.stderr or ()), daemon=True)
    reader.start()
    try:
        with os.fdopen(_writer_of(fifo, process), "w") as config:
            process.send_signal(signal.SIGHUP)  # while the config is being read
            config.write(CONSOLE_ONLY)
        deadline = time.monotonic() + 30
        while not any("relaybot running" in line for line in lines):  # started: read is over
            assert time.monotonic() < deadline and process.poll() is None, "".join(lines)
            time.sleep(0.01)
        with os.fdopen(_writer_of(fifo, process), "w") as config:
            config.write(CONSOLE_ONLY)  # the held SIGHUP's reload reads the file again
        while not any("reload:" in line for line in lines):
            assert time.monotonic() < deadline and process.poll() is None, "".join(lines)
            time.sleep(0.01)
        assert process.stdin is not None
        process.stdin.close()  # the console's end of input: the run ends
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=10)
    err = "".join(lines)
    assert code == 0, err
    assert "reload: nothing changed" in err, err
