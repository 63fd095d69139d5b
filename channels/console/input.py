"""The console channel's terminal input (architecture §7, "Console and stdin"): typed lines
read in daemon threads, the terminal's echo switched off while an answer streams, and the
question an approval prompt waits on.

Daemon threads, not anyio's worker threads: a thread blocked in ``input()`` or ``read()`` must
not keep the process alive after the daemon stopped.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from typing import IO, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = [
    "TYPED_POLL_SECS",
    "Question",
    "in_daemon_thread",
    "isatty",
    "line_buffer",
    "no_echo",
    "read_typed_line",
    "start_daemon_thread",
]

TYPED_POLL_SECS = 0.1
"""How often a read of typed lines looks whether it was asked to stop, in seconds."""

_T = TypeVar("_T")


class Question:
    """An approval question waiting for the next typed line."""

    def __init__(self) -> None:
        self.answered = anyio.Event()
        self.text: str | None = None

    def answer(self, text: str) -> None:
        if not self.answered.is_set():
            self.text = text
            self.answered.set()


def start_daemon_thread(func: Callable[[], None]) -> anyio.Event:
    """Run ``func`` in a daemon thread; the returned event is set (on the event loop) when it
    returned. Unlike anyio's worker threads, a daemon thread blocked in ``input()`` does not
    keep the process alive after the daemon stopped."""
    token = anyio.lowlevel.current_token()
    done = anyio.Event()

    def run() -> None:
        try:
            func()
        finally:
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except RuntimeError:  # the event loop is gone: nobody waits
                pass

    threading.Thread(target=run, name="console input", daemon=True).start()
    return done


async def in_daemon_thread(func: Callable[[], _T]) -> _T:
    """``func()`` in a daemon thread of its own (:func:`start_daemon_thread`); cancelling the
    wait abandons the thread. Exceptions are raised here."""
    box: list[tuple[_T | None, BaseException | None]] = []

    def run() -> None:
        try:
            box.append((func(), None))
        except BaseException as exc:
            box.append((None, exc))

    await start_daemon_thread(run).wait()
    result, error = box[0]
    if error is not None:
        raise error
    return result  # type: ignore[return-value]


def read_typed_line(fd: int, stop: threading.Event) -> str | None:
    """A line from terminal ``fd`` in canonical mode (one ``read`` returns one line, or what
    Ctrl-D pushed), or None at end of input — the terminal gone too (``EIO`` once it was hung
    up, closed) — and once ``stop`` is set."""
    try:
        while not stop.is_set():
            ready, _, _ = select.select([fd], [], [], TYPED_POLL_SECS)
            if ready:
                data = os.read(fd, 4096)
                return data.decode(errors="replace") if data else None
    except OSError:
        return None
    return None


def line_buffer() -> str:
    """What is typed at readline's prompt so far (empty when readline is not loaded)."""
    readline = sys.modules.get("readline")
    if readline is None:
        return ""
    return str(readline.get_line_buffer())


def isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or closed
        return False


@contextlib.contextmanager
def no_echo(fd: int) -> Iterator[None]:
    """The terminal on ``fd`` does not echo typed characters inside (its line editing stays);
    nothing changes when ``fd`` is not a terminal."""
    try:
        modes = termios.tcgetattr(fd)
    except (OSError, ValueError, termios.error):
        yield
        return
    quiet = list(modes)
    quiet[3] &= ~termios.ECHO
    try:
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
    except (OSError, ValueError, termios.error):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, modes)
