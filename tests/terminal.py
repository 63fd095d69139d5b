"""``relaybot`` in a pseudo-terminal, its screen read through a VT100 emulator (pyte).

:class:`Terminal` starts the real command with stdin, stdout and stderr on the slave side of a
pty of 80x24 cells, feeds everything the process writes to a :class:`pyte.Screen`, and lets a
test type keys and look at the screen as a person would see it.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyte

__all__ = ["KEYS", "Terminal"]

KEYS = {
    "ctrl-c": "\x03",
    "ctrl-d": "\x04",
    "ctrl-l": "\x0c",
    "ctrl-u": "\x15",
    "backspace": "\x7f",
    "enter": "\r",
    "up": "\x1b[A",
    "down": "\x1b[B",
}

COLUMNS, LINES = 80, 24


class Terminal:
    """A process on a pty; use as a context manager (the process is killed on exit if alive).

    Args:
        args: the command line.
        env: its whole environment (``TERM`` is set to ``xterm``).
        cwd: its working directory.
    """

    def __init__(self, args: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self._master = master
        self.process = subprocess.Popen(
            list(args),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm", "COLUMNS": str(COLUMNS), "LINES": str(LINES)},
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_take_controlling_terminal,
            close_fds=True,
        )
        os.close(slave)
        self.screen = pyte.Screen(COLUMNS, LINES)
        self._stream = pyte.ByteStream(self.screen)
        self.output = bytearray()

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        if self._master >= 0:
            os.close(self._master)

    def hang_up(self) -> None:
        """Close the terminal, as closing its window does: the kernel hangs up the session
        (``SIGHUP``) and the process's reads of it fail (``EIO``). Nothing is read after."""
        os.close(self._master)
        self._master = -1

    def _pump(self, timeout: float) -> bool:
        """Read what the process wrote within ``timeout`` seconds; False at end of output."""
        ready, _, _ = select.select([self._master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self._master, 65536)
        except OSError:  # EIO: the slave side is closed (the process ended)
            return False
        if not data:
            return False
        self.output += data
        self._stream.feed(data)
        return True

    def type(self, *keys: str) -> None:
        """Type text or named keys (:data:`KEYS`), one write each, a little apart."""
        for key in keys:
            os.write(self._master, KEYS.get(key, key).encode())
            self._pump(0.05)

    def local_modes(self) -> int:
        """The terminal's local modes (``c_lflag``: ``termios.ECHO``, ``ICANON``...), as the
        process left them (on Linux the master reports the slave's modes)."""
        return int(termios.tcgetattr(self._master)[3])

    def lines(self) -> list[str]:
        """The screen's lines, trailing spaces removed."""
        return [line.rstrip() for line in self.screen.display]

    def cursor_line(self) -> str:
        return self.screen.display[self.screen.cursor.y].rstrip()

    def wait(self, predicate: Callable[[Terminal], bool], *, within: float = 30.0) -> None:
        """Read output until ``predicate(self)`` holds; fail with the screen after ``within``."""
        deadline = time.monotonic() + within
        while not predicate(self):
            if time.monotonic() > deadline:
                screen = "\n".join(self.lines())
                raise AssertionError(f"timed out; the screen:\n{screen}")
            if not self._pump(0.1) and not predicate(self):
                screen = "\n".join(self.lines())
                raise AssertionError(f"the process ended; the screen:\n{screen}")

    def settle(self, quiet_secs: float = 0.3, *, within: float = 10.0) -> None:
        """Read until the process has written nothing for ``quiet_secs`` (at most ``within``
        seconds: a process that never stops writing does not hold the test)."""
        deadline = time.monotonic() + within
        before = -1
        while before != len(self.output) and time.monotonic() < deadline:
            before = len(self.output)
            self._pump(quiet_secs)

    def wait_exit(self, *, within: float = 30.0) -> int:
        """Read output until the process ends; its exit code. Fails, with the screen, when it
        still runs after ``within`` seconds."""
        deadline = time.monotonic() + within
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                screen = "\n".join(self.lines())
                raise AssertionError(f"still running after {within} s; the screen:\n{screen}")
            self._pump(0.1)
        drained = time.monotonic() + 5.0
        while self._pump(0.05) and time.monotonic() < drained:  # what it wrote last
            pass
        return self.process.returncode


def _take_controlling_terminal() -> None:
    """In the child, after ``setsid``: make the pty on stdin its controlling terminal.

    A new session has no controlling terminal, and inheriting an open pty does not give it one
    (only opening it, or ``TIOCSCTTY``, does); without one the terminal driver sends no signal
    for Ctrl-C, Ctrl-Z or Ctrl-\\, it only echoes ``^C``.
    """
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def relaybot_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator.cli", *args]
