"""Several ``relaybot run`` processes serving one Telegram bot in webhook mode on one PostgreSQL
store (architecture §9), for the tests and ``bench/instances.py``.

:class:`Fleet` writes one config per instance — the same bot, the same store
(``storage.url``, the password in ``PGPASSWORD``), each its own webhook port and its own model
name (``inst-N``, so :class:`~tests.peers.echo_model.EchoModel` tells which instance asked) —
starts the processes, waits until each logs that it runs, and points the Telegram peer's
round-robin delivery (each update to two different instances) at their webhook ports.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import anyio

from tests.peers.echo_model import EchoModel
from tests.peers.postgres import PASSWORD
from tests.peers.telegram import TelegramBotApiServer

__all__ = ["Fleet", "free_port"]

REPO = Path(__file__).resolve().parents[1]
HOOK_PATH = "tg-hook"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Fleet:
    """``count`` instances; use as ``async with``. ``logs[i]`` is instance i's stderr file."""

    def __init__(
        self,
        directory: Path,
        peer: TelegramBotApiServer,
        model: EchoModel,
        store_url: str,
        count: int,
        *,
        takeover_secs: float = 2.0,
        draft_update_interval_ms: int = 300,
        copies: int = 2,
    ) -> None:
        self.directory = directory
        self.peer = peer
        self.model = model
        self.store_url = store_url
        self.count = count
        self.takeover_secs = takeover_secs
        self.interval_ms = draft_update_interval_ms
        self.copies = copies
        self.ports = [free_port() for _ in range(count)]
        self.logs = [directory / f"instance-{i}.log" for i in range(count)]
        self.processes: list[subprocess.Popen[bytes]] = []

    def config(self, index: int) -> str:
        return f"""\
providers:
  main:
    kind: openai_chat
    base_url: "{self.model.url}/v1"
    api_key: local-test-key
    model: inst-{index}
agent:
  providers: [main]
  tools: []
channels:
  tg:
    kind: telegram
    token: "{self.peer.token}"
    base_url: "{self.peer.base_url}"
    stream_mode: partial
    draft_update_interval_ms: {self.interval_ms}
    allowed_users: ["*"]
    webhook:
      url: "http://127.0.0.1:{self.ports[0]}/{HOOK_PATH}"
      listen: "127.0.0.1:{self.ports[index]}"
storage:
  url: "{self.store_url}"
  takeover_secs: {self.takeover_secs}
server:
  listen: null
"""

    async def __aenter__(self) -> Fleet:
        env = {
            "PYTHONPATH": str(REPO),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.directory),
            "PGPASSWORD": PASSWORD,
        }
        for index in range(self.count):
            path = self.directory / f"instance-{index}.yaml"
            path.write_text(self.config(index))
            with self.logs[index].open("wb") as log:
                self.processes.append(
                    subprocess.Popen(  # noqa: ASYNC220 - Popen returns at once
                        [sys.executable, "-m", "orchestrator.cli", "run", "--config", str(path)],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=log,
                        env=env,
                        cwd=self.directory,
                    )
                )
        deadline = time.monotonic() + 90
        while not all("relaybot running" in self.log(i) for i in range(self.count)):
            for index, process in enumerate(self.processes):
                if process.poll() is not None:
                    raise RuntimeError(f"instance {index} exited:\n{self.log(index)}")
            if time.monotonic() > deadline:
                raise TimeoutError("the instances did not start:\n" + self.log(0))
            await anyio.sleep(0.1)
        self.peer.webhook_copies = self.copies
        self.peer.webhook_targets = [f"http://127.0.0.1:{p}/{HOOK_PATH}" for p in self.ports]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.peer.webhook_targets = []
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 40
        for process in self.processes:
            while process.poll() is None and time.monotonic() < deadline:  # noqa: ASYNC110
                await anyio.sleep(0.1)  # a process's end is polled
            if process.poll() is None:
                process.kill()
                process.wait()

    def log(self, index: int) -> str:
        return self.logs[index].read_text(errors="replace")

    def kill(self, index: int) -> None:
        """SIGKILL instance ``index`` (no cleanup of any kind)."""
        self.processes[index].send_signal(signal.SIGKILL)
        self.processes[index].wait()

    def instance_of(self, question: str) -> int | None:
        """The instance whose model was asked ``question`` (the first one, if several)."""
        for model, asked in self.model.asked:
            if asked == question:
                return int(model.removeprefix("inst-"))
        return None
