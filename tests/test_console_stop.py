"""Ctrl-C and ``/stop`` in the console (architecture §3 "Stop"), on a real terminal: the real
``relaybot run`` on a pty whose line discipline turns the byte ``\\x03`` into SIGINT (the pty is
the process's controlling terminal), answering from a slow provider wire server on 127.0.0.1.

Ctrl-C during an answer stops it (``⏹ Stopped.``, the provider connection closed) and the prompt
comes back; a second Ctrl-C within 2 s, or one at an empty prompt, quits with exit 0. Every wait
has a deadline (:mod:`tests.terminal`): a failure fails, with the screen, instead of hanging.
"""

from __future__ import annotations

import os
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.turn.runner import STOPPED_MARKER
from tests.peers.in_thread import serving_in_thread
from tests.peers.provider_server import ProviderServer, RecordedRequest, Reply
from tests.pipeline import sse, text_answer
from tests.terminal import Terminal, relaybot_command

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs a pty")

REPO = Path(__file__).resolve().parents[1]
PATH = "/v1/chat/completions"
CONFIG = """\
providers:
  main: {{kind: openai_chat, base_url: "{url}/v1", api_key: k, model: m}}
agent:
  providers: [main]
channels:
  term: {{kind: console}}
storage:
  path: state/bot.db
server:
  listen: null
"""

# An answer that goes on for a long time: 400 words, 0.1 s apart (40 s), never finished here.
WORDS = [{"choices": [{"index": 0, "delta": {"content": f"word{i} "}}]} for i in range(400)]
SLOW = Reply(body=sse(*WORDS, "[DONE]"), delay_secs=0.1, cuts=range(0, 40000, 60))


@pytest.fixture
def provider() -> Iterator[ProviderServer]:
    with serving_in_thread(ProviderServer()) as server:
        server.script(PATH, [SLOW, Reply(body=text_answer("Second answer here."))])
        yield server


def _terminal(tmp_path: Path, provider: ProviderServer) -> Terminal:
    config = tmp_path / "bot.yaml"
    config.write_text(CONFIG.format(url=provider.url))
    env = {
        "PYTHONPATH": str(REPO),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "INPUTRC": "/dev/null",
    }
    return Terminal(relaybot_command("run", "--config", str(config)), env=env, cwd=tmp_path)


def _at_prompt(t: Terminal) -> bool:
    return t.cursor_line().startswith("you>")


def _screen(t: Terminal) -> str:
    return "\n".join(t.lines())


def _answering(t: Terminal, provider: ProviderServer) -> RecordedRequest:
    """Ask, and wait until the answer streams (a few words on the screen)."""
    t.wait(_at_prompt)
    t.type("tell me a long story", "enter")
    t.wait(lambda t: "word5 " in _screen(t))
    [request] = provider.requests_to(PATH)
    assert request.ended_at is None  # still streaming
    return request


def _wait_closed(request: RecordedRequest, *, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while request.ended_at is None:
        assert time.monotonic() < deadline, "the provider connection is still open"
        time.sleep(0.05)
    assert request.client_closed  # closed by relaybot, not finished by the server


def test_ctrl_c_stops_the_answer_and_ctrl_c_at_the_empty_prompt_quits(
    tmp_path: Path, provider: ProviderServer
) -> None:
    with _terminal(tmp_path, provider) as t:
        request = _answering(t, provider)
        t.type("ctrl-c")
        t.wait(lambda t: STOPPED_MARKER in _screen(t) and _at_prompt(t))
        _wait_closed(request)
        t.settle(0.5)
        assert t.process.poll() is None  # still running, at the prompt
        assert _at_prompt(t)
        assert "word399" not in _screen(t)
        # The conversation goes on: the next question gets its answer.
        t.type("and now?", "enter")
        t.wait(lambda t: "Second answer here." in _screen(t) and _at_prompt(t))
        time.sleep(2.1)  # past the quit window of the first Ctrl-C: only the empty prompt counts
        assert not t.local_modes() & termios.ECHO  # readline reads the prompt
        t.type("ctrl-c")
        assert t.wait_exit(within=30) == 0
        # Quit during input(): the modes readline changed are back for the shell.
        assert t.local_modes() & termios.ECHO and t.local_modes() & termios.ICANON
    assert len(provider.requests_to(PATH)) == 2


def test_a_second_ctrl_c_within_2_s_quits_during_the_answer(
    tmp_path: Path, provider: ProviderServer
) -> None:
    with _terminal(tmp_path, provider) as t:
        request = _answering(t, provider)
        t.type("ctrl-c")
        # Taken as /stop: the provider connection closes. (Waiting for it keeps the two SIGINTs
        # apart: a signal raised while the same one is still pending is merged into it.)
        _wait_closed(request)
        t.type("ctrl-c")
        assert t.wait_exit(within=30) == 0
    shown = t.output.decode(errors="replace")
    assert "Stopped." in shown  # the first Ctrl-C stopped the answer, the second quit
    assert "interrupted" not in shown
    assert "Traceback" not in shown


def test_stop_typed_during_the_answer_stops_it_and_other_lines_wait(
    tmp_path: Path, provider: ProviderServer
) -> None:
    with _terminal(tmp_path, provider) as t:
        request = _answering(t, provider)
        t.type("and then?", "enter")  # waits for the answer's end
        t.type("/stop", "enter")  # acts at once
        _wait_closed(request)
        t.wait(lambda t: "Second answer here." in _screen(t) and _at_prompt(t))
        assert STOPPED_MARKER in t.output.decode(errors="replace")
        assert "word399" not in _screen(t)
        assert "Nothing to stop" not in _screen(t)
        # The terminal's echo of the typed lines left no stale line of the live region.
        assert _screen(t).count("word0 ") == 1, _screen(t)
        second = provider.requests_to(PATH)[1].json["messages"]
        assert [m["content"] for m in second if m["role"] == "user"] == [
            "tell me a long story",
            "and then?",
        ]
        t.type("ctrl-d")
        assert t.wait_exit(within=30) == 0


def test_ctrl_c_at_a_prompt_holding_text_keeps_it_and_a_second_one_quits(
    tmp_path: Path, provider: ProviderServer
) -> None:
    with _terminal(tmp_path, provider) as t:
        t.wait(_at_prompt)
        t.type("half a thought")
        t.wait(lambda t: t.cursor_line() == "you> half a thought")
        t.type("ctrl-c")
        t.settle(0.5)
        assert t.process.poll() is None
        assert t.cursor_line() == "you> half a thought"
        t.type(" goes on", "enter")  # the line is still there, and the bot still answers
        t.wait(lambda t: "word5 " in _screen(t))
        [request] = provider.requests_to(PATH)
        assert request.json["messages"][-1]["content"] == "half a thought goes on"
        time.sleep(2.1)  # past the quit window: this Ctrl-C is /stop, the next one quits
        t.type("ctrl-c")
        t.wait(lambda t: STOPPED_MARKER in _screen(t) and _at_prompt(t))
        t.type("ctrl-c")
        assert t.wait_exit(within=30) == 0
