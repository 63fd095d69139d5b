"""``TurnRunner.stop`` (architecture §3 "Stop") through the real pipeline: a local provider server,
the round runner, policy and delivery into a recording channel."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from channels.base import InboundMessage
from orchestrator.tools.registry import Tool, ToolRegistry, builtin_tools
from orchestrator.turn.runner import STOPPED_MARKER, conversation_key
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import make_turns, provider_config, sse, text_answer, tool_call_stream

pytestmark = pytest.mark.usefixtures("closes_providers")

PATH = "/v1/chat/completions"


def _inbound(text: str, thread_id: str | None = None) -> InboundMessage:
    return InboundMessage("fake", "c1", "u1", "user", text, "m1", thread_id=thread_id)


def _channel() -> RecordingChannel:
    return RecordingChannel(FakeChannelConfig(stream_mode="partial", draft_update_interval_ms=100))


async def test_stop_while_a_tool_runs_keeps_the_history_whole(tmp_path: Path) -> None:
    """Stopped while a tool runs: the reply ends with the marker, and the history never holds
    a tool call without its result (the next request would be rejected)."""
    started = anyio.Event()

    async def hang(arguments: Mapping[str, Any]) -> str:
        started.set()
        await anyio.sleep_forever()
        return "{}"

    clock = builtin_tools()["current_time"]
    tools = ToolRegistry({"current_time": Tool(clock.spec, hang)})
    narration = "Let me look at the clock for you, it takes a moment. " * 4
    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply(body=tool_call_stream("current_time", "{}", narration=narration)),
                Reply(body=text_answer("Fine, then not.")),
            ],
        )
        turns, store = make_turns(tmp_path, [provider_config(server)], tools=tools)
        ch = _channel()
        message = _inbound("what time is it?", thread_id="9")
        async with anyio.create_task_group() as tg:
            outcomes = []

            async def run() -> None:
                outcomes.append(await turns.run(ch, message))

            tg.start_soon(run)
            with anyio.fail_after(10):
                await started.wait()
            assert not turns.stop(conversation_key("fake", _inbound("x")))  # other thread
            assert turns.stop(conversation_key("fake", message))
            assert not turns.stop(conversation_key("fake", message))  # already stopping
        with anyio.fail_after(10):
            again = await turns.run(ch, _inbound("never mind", thread_id="9"))
    [outcome] = outcomes
    assert outcome.outcome == "stopped" and again.outcome == "ok"
    shown = ch.chat.visible()
    assert shown[0].endswith(f"\n\n{STOPPED_MARKER}")
    assert shown[0].startswith("Let me look at the clock")
    assert "⏳" not in shown[0]  # the status line of the cut tool is gone
    roles = [m["role"] for m in server.requests[1].json["messages"]]
    assert roles == ["system", "user", "assistant", "user"]  # the narration, not the cut call
    assert "tool_calls" not in server.requests[1].json["messages"][2]
    assert [r.outcome for r in store.rounds()] == ["tool_calls", "ok"]
    assert ch.threads and set(ch.threads) == {"9"}


async def test_stop_mid_stream_records_the_round_as_stopped(tmp_path: Path) -> None:
    words = [{"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]} for i in range(300)]
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=sse(*words), delay_secs=0.02, cuts=range(0, 30000, 50))])
        turns, store = make_turns(tmp_path, [provider_config(server)])
        ch = _channel()
        message = _inbound("go")
        async with anyio.create_task_group() as tg:
            outcomes = []

            async def run() -> None:
                outcomes.append(await turns.run(ch, message))

            tg.start_soon(run)
            with anyio.fail_after(10):
                while not ch.chat.visible():  # noqa: ASYNC110 - the fake records, no signal
                    await anyio.sleep(0.01)
            turns.stop(conversation_key("fake", message))
        with anyio.fail_after(5):
            await server.requests[0].wait_ended()
    assert server.requests[0].client_closed
    assert outcomes[0].outcome == "stopped"
    [record] = store.rounds()
    assert record.outcome == "stopped" and record.attempts == 1 and record.writes_sent >= 1
    history = store.history("fake", "c1")
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[1].content.startswith("w0 w1 ")
    assert ch.chat.visible()[-1].endswith(STOPPED_MARKER)
