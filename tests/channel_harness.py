"""What every channel's end-to-end harness shares (architecture §8): the daemon's YAML around one
channel, a channel that counts its finished replies, a channel factory putting it in place of
the registry's adapter, and running :meth:`Daemon.run <orchestrator.ops.daemon.Daemon.run>` for the
length of a block.

A network's harness (``tests/telegram_harness.py``, ``tests/discord_harness.py``,
``tests/matrix_harness.py``, the toy kind of ``tests/test_extending.py``) adds its peer, its
channel's YAML keys and what "started" means for it: :func:`daemon_running` runs the daemon
until the block ends, once ``ready()`` holds, then stops it as SIGTERM does, also when the test
failed, and checks it exited 0. Real sockets and real time: tests keep intervals short.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from channels.base import Channel, InboundHandler
from channels.registry import build_channel
from orchestrator.ops.daemon import Daemon

__all__ = [
    "PATH",
    "SPACING_TOLERANCE_SECS",
    "STOP_WITHIN_SECS",
    "CountsReplies",
    "daemon_config",
    "daemon_running",
    "observing",
]

PATH = "/v1/chat/completions"
"""Where the ``main`` provider (``openai_chat``) posts on the provider server."""

STOP_WITHIN_SECS = 45.0
"""Shutdown lets a running turn finish for up to 30 s (architecture §7)."""

SPACING_TOLERANCE_SECS = 0.03
"""A peer stamps a write when it has read the request, a little after the client started it;
two writes' stamps may therefore be closer than their starts by the difference of their
latencies on 127.0.0.1. A write that ignored the interval would be closer by far more."""

ChannelFactory = Callable[[str, Any, InboundHandler], Channel]


class CountsReplies(Channel):
    """Mixed in before a network's adapter (``class Observed(CountsReplies, TelegramChannel)``):
    counts the daemon's :meth:`~channels.base.Channel.reply_finished` calls (once per inbound
    message, when its reply is fully delivered) and sets :attr:`started` after ``start()``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replies_finished = 0
        self._finished = anyio.Event()
        self.started = anyio.Event()

    async def start(self) -> None:
        await super().start()
        self.started.set()

    async def reply_finished(self, chat_id: str) -> None:
        await super().reply_finished(chat_id)
        self.replies_finished += 1
        self._finished.set()
        self._finished = anyio.Event()

    async def wait_replies(self, count: int) -> None:
        """Return once ``count`` replies in all have been finished."""
        while self.replies_finished < count:
            await self._finished.wait()


def observing(kind: str, observed: type[Channel]) -> ChannelFactory:
    """A ``channel_factory`` for :class:`Daemon`: ``observed`` for channels of ``kind``, the
    registry's adapter for the others."""

    def build(name: str, config: Any, on_inbound: InboundHandler) -> Channel:
        if config.kind == kind:
            return observed(name, config, on_inbound)
        return build_channel(name, config, on_inbound)

    return build


def daemon_config(
    provider_url: str,
    tmp_path: Path,
    channels: str,
    *,
    policy: str = "",
    provider: str = "",
    agent: str = "",
    tools: str = "[current_time]",
    listen: str | None = None,
    providers: str = "[main]",
) -> str:
    """The YAML of a daemon with the ``main`` ``openai_chat`` provider at ``provider_url`` and
    its store in ``tmp_path``.

    Args:
        channels: the lines under ``channels:`` (a channel's name indented 2, its keys 4).
        policy: top-level lines before ``providers:`` (a ``policy:`` section).
        provider: more keys of ``main`` (lines indented 4).
        agent: more keys of ``agent`` (lines indented 2).
        tools: the value of ``agent.tools``.
        listen: ``server.listen`` (``HOST:PORT``), ``None`` for no server.
        providers: the value of ``agent.providers`` (more providers: lines indented 2 in
            ``provider``).
    """
    return f"""\
{policy}providers:
  main:
    kind: openai_chat
    base_url: "{provider_url}/v1"
    api_key: local-test-key
    model: m
{provider}agent:
  providers: {providers}
  tools: {tools}
{agent}channels:
{channels}storage:
  path: "{tmp_path / "relaybot.db"}"
server:
  listen: {f'"{listen}"' if listen else "null"}
"""


@asynccontextmanager
async def daemon_running(
    daemon: Daemon,
    ready: Callable[[], Awaitable[bool]],
    *,
    within_secs: float = 10.0,
    poll_secs: float = 0.02,
) -> AsyncIterator[Daemon]:
    """Run ``daemon`` until the block ends; the block starts once ``ready()`` holds.

    Raises:
        AssertionError: the daemon ended before it was ready, or exited other than 0.
        TimeoutError: not ready within ``within_secs``, or not stopped within
            :data:`STOP_WITHIN_SECS`.
    """
    codes: list[int] = []
    done = anyio.Event()

    async def run() -> None:
        try:
            codes.append(await daemon.run(handle_signals=False))
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(within_secs):
            while True:
                if done.is_set() or await ready():
                    break
                await anyio.sleep(poll_secs)
        assert not done.is_set(), "the daemon did not start"
        try:
            yield daemon
        finally:  # stop as SIGTERM does, also when the test failed
            daemon.stopping.set()
            with anyio.fail_after(STOP_WITHIN_SECS):
                await done.wait()
    assert codes == [0]
