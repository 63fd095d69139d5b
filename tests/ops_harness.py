"""``relaybot run`` as a process for the operations tests (architecture §7): the real command
with a clean environment, its stdout and stderr read as they come (so neither pipe fills), and
the HTTP endpoints of ``server.listen`` fetched with a plain HTTP/1.1 client that shows the
status line as sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

__all__ = ["REPO", "BotProcess", "env", "get", "relaybot"]


def env(tmp_path: Path, *, source: Path = REPO) -> dict[str, str]:
    """A clean environment: no API keys, the checkout (or the tree ``source``) importable, HOME,
    XDG and the state directory (where a relative ``storage.path`` lands, architecture §6) in
    ``tmp_path``."""
    return {
        "PYTHONPATH": str(source),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "STATE_DIRECTORY": str(tmp_path),
    }


async def relaybot(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """Run ``relaybot ARGS`` to its end; (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "orchestrator.cli", *args),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**env(tmp_path), "COLUMNS": "160"},
        cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


class BotProcess:
    """``relaybot run --config FILE ARGS`` (of the tree ``source``); stdin stays open (a pipe)
    until :meth:`finish`."""

    def __init__(self, tmp_path: Path, config: Path, *args: str, source: Path = REPO) -> None:
        self._tmp_path = tmp_path
        self._source = source
        self._args = ("run", "--config", str(config), *args)
        self.process: asyncio.subprocess.Process | None = None
        self.err_lines: list[str] = []
        self.out = ""
        self._readers: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> BotProcess:
        self.process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "orchestrator.cli", *self._args),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env(self._tmp_path, source=self._source),
            cwd=self._tmp_path,
        )
        self._readers = [
            asyncio.create_task(self._read_err()),
            asyncio.create_task(self._read_out()),
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        for reader in self._readers:
            reader.cancel()

    async def _read_err(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        async for line in self.process.stderr:
            self.err_lines.append(line.decode().rstrip("\n"))

    async def _read_out(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.out += chunk.decode()

    @property
    def err(self) -> str:
        return "\n".join(self.err_lines)

    def json_lines(self) -> list[dict[str, Any]]:
        """Every stderr line as JSON (``--log-format json``: each one must be an object)."""
        return [json.loads(line) for line in self.err_lines if line.strip()]

    async def wait_for(self, predicate: Callable[[], bool], within: float = 30.0) -> None:
        """Until ``predicate()`` holds; fails when the process ended or ``within`` s passed."""
        assert self.process is not None
        async with asyncio.timeout(within):
            while not predicate():
                assert self.process.returncode is None, f"relaybot ended:\n{self.err}"
                await asyncio.sleep(0.05)

    async def wait_logged(self, text: str, within: float = 30.0) -> None:
        await self.wait_for(lambda: text in self.err, within)

    def signal(self, signum: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def finish(self, within: float = 60.0) -> int:
        """Wait for the process to end (stdin still open); its exit code."""
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), timeout=within)
        await asyncio.gather(*self._readers, return_exceptions=True)
        return code


async def get(port: int, path: str) -> tuple[str, dict[str, str], bytes]:
    """GET ``path`` from 127.0.0.1:``port`` over a fresh connection: the status line as sent,
    the headers (lower-case names) and the body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _dechunk(body)
    return status, headers, body


def _dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out
