"""The dispatcher (architecture §5 "one turn at a time"): conversations keyed by (channel, chat,
thread), kept messages forgotten when their turn starts, a held start."""

from __future__ import annotations

import anyio
import pytest

from channels.base import Channel, InboundMessage
from orchestrator.chats.dispatch import Dispatcher
from tests.fakes import FakeChannelConfig, RecordingChannel

pytestmark = pytest.mark.looptime


def _message(text: str, thread_id: str | None = None) -> InboundMessage:
    return InboundMessage("fake", "c1", "u", "u", text, thread_id=thread_id)


async def test_held_turns_start_in_order_on_release_each_forgetting_its_ticket() -> None:
    events: list[str] = []

    async def run_turn(channel: Channel, message: InboundMessage) -> None:
        events.append(f"turn {message.text}")

    async def forget(ticket: int) -> None:
        events.append(f"forget {ticket}")

    channel = RecordingChannel(FakeChannelConfig())
    async with anyio.create_task_group() as tg:
        dispatcher = Dispatcher(tg, run_turn, forget, held=True)
        assert dispatcher.submit(channel, _message("kept"), 7)
        assert dispatcher.submit(channel, _message("new"))
        await anyio.sleep(1)
        assert events == []
        dispatcher.release()
        await dispatcher.wait_idle()
    assert events == ["forget 7", "turn kept", "turn new"]


async def test_close_while_held_runs_nothing_and_is_idle() -> None:
    ran: list[str] = []

    async def run_turn(channel: Channel, message: InboundMessage) -> None:
        ran.append(message.text)

    channel = RecordingChannel(FakeChannelConfig())
    async with anyio.create_task_group() as tg:
        dispatcher = Dispatcher(tg, run_turn, held=True)
        dispatcher.submit(channel, _message("a"), 1)
        await anyio.sleep(1)  # the worker waits for the release
        dispatcher.close()
        with anyio.fail_after(1):
            await dispatcher.wait_idle()
        assert not dispatcher.submit(channel, _message("b"))
    assert ran == []


async def test_threads_of_one_chat_do_not_wait_for_each_other() -> None:
    release = anyio.Event()
    done: list[str] = []

    async def run_turn(channel: Channel, message: InboundMessage) -> None:
        if message.thread_id == "slow":
            await release.wait()
        done.append(f"{message.thread_id}:{message.text}")

    channel = RecordingChannel(FakeChannelConfig())
    async with anyio.create_task_group() as tg:
        dispatcher = Dispatcher(tg, run_turn)
        dispatcher.submit(channel, _message("1", "slow"))
        dispatcher.submit(channel, _message("2", "slow"))  # waits behind 1
        dispatcher.submit(channel, _message("3", "fast"))
        await anyio.sleep(1)
        assert done == ["fast:3"]
        release.set()
        await dispatcher.wait_idle()
    assert done == ["fast:3", "slow:1", "slow:2"]
