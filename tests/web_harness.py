"""What the tests of the channels served over HTTP share (``kind: openai_api``, ``kind: web``;
architecture §8): the real daemon on a provider wire server, its ops server on a free loopback
port, and provider streams holding a secret and a tool call.

:func:`http_daemon` runs :class:`~orchestrator.ops.daemon.Daemon` with the given channels and
``server.listen`` on 127.0.0.1 (through :func:`tests.channel_harness.daemon_running`), and
yields the port once ``/healthz`` answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from tests.channel_harness import daemon_config, daemon_running
from tests.instances import free_port
from tests.peers.provider_server import Reply
from tests.pipeline import sse

__all__ = [
    "ANSWER_HEAD",
    "ANSWER_TAIL",
    "NARRATION",
    "SECRET",
    "TOKEN",
    "answer_reply",
    "http_daemon",
    "tool_call_reply",
]

TOKEN = "api-token-0123456789abcdef"
"""The bearer token the test configs accept (read from the environment as ``${API_TOKEN}``)."""
SECRET = "sk-proj-WEBSECRETwebsecret0123456789abcdef"
"""A secret the model writes in its answer (an OpenAI project key: the catalogue masks it)."""
NARRATION = "Let me check the clock first."
ANSWER_HEAD = "It is morning here. The key you asked about is "
ANSWER_TAIL = " and it must stay private. Have a good day, and keep your keys safe!"


def _stream(events: list[dict[str, Any]], *, delay_secs: float) -> Reply:
    body, cuts = b"", []
    for event in events:
        body += sse(event)
        cuts.append(len(body))
    return Reply(body=body + sse("[DONE]"), cuts=cuts, delay_secs=delay_secs)


def _delta(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


def tool_call_reply() -> Reply:
    """A round of narration and a ``current_time`` call (finish ``tool_calls``)."""
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "current_time", "arguments": "{}"},
    }
    return _stream(
        [
            _delta(NARRATION),
            {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ],
        delay_secs=0.02,
    )


def answer_reply(*, words_delay_secs: float = 0.03, repeat: int = 1, code: str = "") -> Reply:
    """The answer, a few characters a chunk, with :data:`SECRET` in it (split across chunks),
    then the usage the provider reports. ``repeat`` makes it that many times longer; ``code``
    ends it with a fenced Python code block holding that line."""
    text = (ANSWER_HEAD + SECRET + ANSWER_TAIL + "\n\n") * repeat
    if code:
        text += f"```python\n{code}\n```\n"
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    events = [_delta(piece) for piece in pieces]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events.append({"choices": [], "usage": {"prompt_tokens": 31, "completion_tokens": 29}})
    return _stream(events, delay_secs=words_delay_secs)


@asynccontextmanager
async def http_daemon(
    provider_url: str, tmp_path: Path, channels: str, *, agent: str = "", policy: str = ""
) -> AsyncIterator[int]:
    """The daemon with ``channels`` (YAML lines under ``channels:``) and the ops server on a
    free port of 127.0.0.1, ``API_TOKEN`` set to :data:`TOKEN`; yields the port. ``agent`` and
    ``policy`` are as :func:`~tests.channel_harness.daemon_config` takes them."""
    port = free_port()
    listen = f"127.0.0.1:{port}"
    text = daemon_config(
        provider_url, tmp_path, channels, listen=listen, agent=agent, policy=policy
    )
    config = load_config_text(text, source_name="web.yaml", environ={"API_TOKEN": TOKEN})
    daemon = Daemon(config, storage_path=tmp_path / "relaybot.db")

    async def ready() -> bool:
        try:
            async with httpx.AsyncClient() as client:
                answer = await client.get(f"http://127.0.0.1:{port}/healthz")
        except httpx.HTTPError:
            return False
        return answer.status_code == 200 and bool(json.loads(answer.text))

    async with daemon_running(daemon, ready):
        yield port


class WebClient:
    """The web page's API as its script calls it (``channels/web/routes.py``), over httpx: the
    browser cookie, ``X-Relaybot: 1``, a bearer token when given."""

    def __init__(self, base_url: str, *, token: str | None = None) -> None:
        headers = {"X-Relaybot": "1"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30)

    async def __aenter__(self) -> WebClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def new_conversation(self) -> str:
        """Load the session (the cookie) and start a conversation; returns its id."""
        (await self.http.get("/api/session")).raise_for_status()
        created = await self.http.post("/api/conversations")
        created.raise_for_status()
        conversation: str = created.json()["id"]
        return conversation

    async def ask(
        self,
        conversation: str,
        text: str,
        *,
        on_event: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        files: Sequence[tuple[str, bytes, str]] = (),
    ) -> list[dict[str, Any]]:
        """Send ``text`` (with ``files``: (name, bytes, MIME type) each, as the page uploads
        them) and read the conversation's events until its answer is over, each also to
        ``on_event``."""
        events: list[dict[str, Any]] = []
        path = f"/api/conversations/{conversation}/events"
        async with self.http.stream("GET", path) as stream:
            url = f"/api/conversations/{conversation}/messages"
            if files:
                uploads = [("file", file) for file in files]
                sent = await self.http.post(url, data={"text": text}, files=uploads)
            else:
                sent = await self.http.post(url, json={"text": text})
            sent.raise_for_status()
            async for line in stream.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                events.append(event)
                if on_event is not None:
                    await on_event(event)
                if event == {"type": "busy", "busy": False}:
                    return events
        raise AssertionError(f"the event stream ended: {events}")
