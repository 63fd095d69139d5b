"""The console on a real terminal (a pty read through a VT100 emulator): the screen a person sees
after line-editing keys, ``/help``, an unknown command and Ctrl-D (architecture §7). Each test runs
the real ``relaybot run`` on the embedded default (the demo model)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.terminal import Terminal, relaybot_command

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs a pty")

REPO = Path(__file__).resolve().parents[1]


def _terminal(tmp_path: Path) -> Terminal:
    env = {
        "PYTHONPATH": str(REPO),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "INPUTRC": "/dev/null",  # readline's default bindings, whatever the machine's file says
    }
    return Terminal(relaybot_command("run"), env=env, cwd=tmp_path)


def _at_prompt(t: Terminal) -> bool:
    return t.cursor_line().startswith("you>")


def test_line_editing_keys_keep_the_prompt_in_place(tmp_path: Path) -> None:
    with _terminal(tmp_path) as t:
        t.wait(_at_prompt)
        assert any("/help lists commands" in line for line in t.lines())  # the banner
        t.type("abc")
        t.wait(lambda t: t.cursor_line() == "you> abc")
        t.type("ctrl-u")  # kill the line
        t.wait(lambda t: "abc" not in t.cursor_line())
        t.settle(0.5)
        assert t.cursor_line() == "you>"
        assert t.screen.cursor.x == len("you> ")
        t.type("backspace", "backspace")  # Backspace at the start of the line
        t.settle(0.5)
        assert t.cursor_line() == "you>"
        assert t.screen.cursor.x == len("you> ")
        t.type("hello", "enter")
        t.wait(lambda t: "second model round" in " ".join(t.lines()) and _at_prompt(t))
        t.type("up")  # history recall
        t.wait(lambda t: t.cursor_line() == "you> hello")
        t.type("ctrl-u", "ctrl-l")  # clear the screen
        t.wait(lambda t: "second model round" not in " ".join(t.lines()))
        t.settle(0.5)
        assert t.lines()[0] == "you>"
        assert not any(t.lines()[1:])
        t.type("ctrl-d")
        assert t.wait_exit() == 0


def test_help_unknown_commands_and_ctrl_d(tmp_path: Path) -> None:
    with _terminal(tmp_path) as t:
        t.wait(_at_prompt)
        t.type("/help", "enter")
        t.wait(lambda t: "//" in " ".join(t.lines()) and _at_prompt(t))
        screen = "\n".join(t.lines())
        for item in ("/help", "/reset", "/stop", "Ctrl-C", "Ctrl-D"):
            assert item in screen, item
        t.type("/frobnicate now", "enter")
        t.wait(lambda t: "unknown command /frobnicate" in " ".join(t.lines()) and _at_prompt(t))
        assert "You wrote" not in " ".join(t.lines())  # it never reached the model
        t.type("ctrl-d")
        assert t.wait_exit() == 0
        # A newline after Ctrl-D: the shell's prompt does not start after "you> ".
        assert t.output.endswith(b"\n")
        assert t.cursor_line() == ""


def test_closing_the_terminal_ends_the_bot(tmp_path: Path) -> None:
    # The hangup reads as a config reload (SIGHUP) and every read of the closed terminal fails
    # with EIO: the console channel was started again and again, every 2, 4, 8 … s, for good.
    # Now the failed read is the end of input: the bot stops as after Ctrl-D, with status 0 (it
    # was the hangup's, SIGHUP's default action, when it came before the reload watcher was
    # installed or after it was removed; or 120 when the last flush of the closed terminal
    # failed).
    with _terminal(tmp_path) as t:
        t.wait(_at_prompt)
        t.hang_up()
        assert t.process.wait(timeout=20) == 0  # TimeoutExpired: it starts the channel again
