"""The console's approval prompt on a real terminal (a pty read through a VT100 emulator,
architecture §5 "One round's calls"): ``y`` runs the call; no answer within
``approval_timeout_secs`` does not, and the line typed next is not lost. The real
``relaybot run`` against the provider wire server on 127.0.0.1 (served from a thread of the
test)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.peers.provider_server import ProviderServer, RecordedRequest, Reply
from tests.pipeline import text_answer, tool_call_stream
from tests.terminal import Terminal, relaybot_command

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs a pty")

REPO = Path(__file__).resolve().parents[1]
PATH = "/v1/chat/completions"


@contextmanager
def provider_in_thread(replies: list[Reply]) -> Iterator[tuple[str, list[RecordedRequest]]]:
    """A :class:`ProviderServer` scripted with ``replies``, served by an event loop of its own
    in a thread: its URL and its record of requests."""
    started = threading.Event()
    box: dict[str, object] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        box["stop"] = (asyncio.get_running_loop(), stop)
        async with ProviderServer() as server:
            server.script(PATH, replies)
            box["server"] = server
            started.set()
            await stop.wait()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert started.wait(10)
    server = box["server"]
    assert isinstance(server, ProviderServer)
    try:
        yield server.url, server.requests
    finally:
        loop, stop = box["stop"]  # type: ignore[misc]
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


def _terminal(tmp_path: Path, url: str) -> Terminal:
    config = tmp_path / "console.yaml"
    config.write_text(
        f"""\
providers:
  main: {{kind: openai_chat, base_url: "{url}/v1", api_key: k, model: m, max_retries: 0}}
agent:
  providers: [main]
  require_approval: [current_time]
  approval_timeout_secs: 2
channels:
  term: {{kind: console}}
storage:
  path: "{tmp_path / "relaybot.db"}"
server:
  listen: null
""",
        encoding="utf-8",
    )
    env = {
        "PYTHONPATH": str(REPO),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "INPUTRC": "/dev/null",
    }
    return Terminal(relaybot_command("run", "--config", str(config)), env=env, cwd=tmp_path)


def _at_prompt(t: Terminal) -> bool:
    return t.cursor_line().startswith("you>")


def _screen(t: Terminal) -> str:
    return " ".join(t.lines())


def _replies() -> list[Reply]:
    call = tool_call_stream("current_time", '{"timezone": "UTC"}', narration="Checking. ")
    return [Reply(body=call), Reply(body=text_answer("It is late."))]


def test_y_approves_the_call(tmp_path: Path) -> None:
    with provider_in_thread(_replies()) as (url, requests), _terminal(tmp_path, url) as t:
        t.wait(_at_prompt)
        t.type("time?", "enter")
        t.wait(lambda t: 'Run current_time with {"timezone": "UTC"}? (y/N, 2 s)' in _screen(t))
        t.type("y", "enter")
        t.wait(lambda t: "It is late." in _screen(t) and _at_prompt(t))
        t.settle(0.5)
        screen = _screen(t)
        t.type("ctrl-d")
        assert t.wait_exit() == 0
    result = next(m for m in requests[1].json["messages"] if m["role"] == "tool")  # type: ignore[index]
    assert '"timezone": "UTC"' in result["content"]
    # The narration was printed once, above the prompt; no status line stayed unfinished.
    assert screen.count("Checking.") == 1, screen
    assert "⏳" not in screen, screen


def test_no_answer_is_not_approved_and_the_next_line_is_kept(tmp_path: Path) -> None:
    replies = [*_replies(), Reply(body=text_answer("Second answer."))]
    with provider_in_thread(replies) as (url, requests), _terminal(tmp_path, url) as t:
        t.wait(_at_prompt)
        t.type("time?", "enter")
        t.wait(lambda t: "No answer: not approved" in _screen(t) and "It is late." in _screen(t))
        t.type("again", "enter")  # read by the prompt's pending read, then answered
        t.wait(lambda t: "Second answer." in _screen(t) and _at_prompt(t))
        t.settle(0.5)
        t.type("ctrl-d")
        assert t.wait_exit() == 0
    result = next(m for m in requests[1].json["messages"] if m["role"] == "tool")  # type: ignore[index]
    assert "nobody answered" in result["content"]
    assert requests[2].json["messages"][-1]["content"] == "again"  # type: ignore[index]
