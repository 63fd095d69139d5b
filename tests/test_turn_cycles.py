"""A finished turn is freed when its last reference goes, not left to the cycle collector
(architecture §7 "Process"): none of its objects is in a reference cycle once
``TurnRunner.run`` returned, whether its rounds were served, failed or were served after a
failed attempt, nor once its caller cancelled it. A turn in a cycle waited, with its ~90
objects, for the collector's next full collection, which then walked every such turn (at 50,000
deltas/s steady, 174,000 objects besides the live ones, and a pause twice as long:
bench/README.md).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from channels.base import InboundMessage
from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.engine import DeliveryEngine
from orchestrator.policy.reply import ReplyPolicy
from orchestrator.policy.window import RedactionWindow
from orchestrator.turn.round_sink import RoundSink
from orchestrator.turn.runner import TurnRunner
from orchestrator.turn.turn_state import TurnOutcome, TurnState
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import (
    RecordingTools,
    completion,
    make_turns,
    provider_config,
    text_answer,
    tool_call_stream,
)

pytestmark = pytest.mark.usefixtures("closes_providers")

PATH = "/v1/chat/completions"
TURN_TYPES = (TurnState, DeliveryDriver, DeliveryEngine, RoundSink, ReplyPolicy, RedactionWindow)


@contextmanager
def cyclic_garbage() -> Iterator[list[object]]:
    """Collect what is garbage now, then, with the collector off, yield a list that on exit
    holds every object made inside and freed only by the cycle collector."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    found: list[object] = []
    try:
        yield found
    finally:
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            found.extend(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            if enabled:
                gc.enable()


async def answer(
    turns: TurnRunner,
    mode: str,
    text: str,
    *,
    cancel_when: Callable[[RecordingChannel], bool] | None = None,
) -> tuple[TurnOutcome | None, RecordingChannel, list[str]]:
    """``turns`` answers ``text`` in a fresh chat in ``mode``: the outcome, the channel, and the
    names of the turn's types among what only the cycle collector freed meanwhile. Logging is
    off meanwhile: pytest's log capture keeps each record, and a record's exception keeps the
    frames that held the turn alive, so a cycle through them would not be garbage here.

    With ``cancel_when``, the caller cancels the turn (a cancel scope around ``TurnRunner.run``,
    as ``move_on_after`` is) once ``cancel_when(channel)`` holds, looked at every 10 ms; the
    outcome is then ``None``."""
    channel = RecordingChannel(
        FakeChannelConfig(stream_mode=mode, draft_update_interval_ms=20)  # type: ignore[arg-type]
    )
    question = InboundMessage("fake", "c1", "u1", "user", text, "m1")
    outcome: TurnOutcome | None = None
    logging.disable(logging.CRITICAL)
    try:
        with cyclic_garbage() as garbage:
            with anyio.fail_after(20):
                if cancel_when is None:
                    outcome = await turns.run(channel, question)
                else:
                    async with anyio.create_task_group() as tg:
                        with anyio.CancelScope() as caller:
                            tg.start_soon(cancel, caller, channel, cancel_when)
                            outcome = await turns.run(channel, question)
            del question
    finally:
        logging.disable(logging.NOTSET)
    return (
        outcome,
        channel,
        sorted({type(o).__name__ for o in garbage if isinstance(o, TURN_TYPES)}),
    )


async def cancel(
    caller: anyio.CancelScope,
    channel: RecordingChannel,
    when: Callable[[RecordingChannel], bool],
) -> None:
    while not when(channel):  # noqa: ASYNC110 - the chat and the hook are polled
        await anyio.sleep(0.01)
    caller.cancel()


class HangingHook:
    """Each reply's policy (a :class:`ReplyPolicyFactory`) with a hook that never answers, run
    here instead of in a worker process; ``calls`` counts the pieces it was asked about."""

    def __init__(self) -> None:
        self.calls = 0

    def new_reply(
        self, channel: str, chat_id: str, render: Callable[[str], str] | None = None
    ) -> ReplyPolicy:
        return ReplyPolicy(hooks=self, channel=channel, chat_id=chat_id, render=render)

    async def call(self, channel: str, chat_id: str, text: str) -> str | None:
        self.calls += 1
        await anyio.sleep_forever()
        return text


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_a_finished_turn_is_in_no_reference_cycle(tmp_path: Path, mode: str) -> None:
    tools = RecordingTools()
    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply(body=tool_call_stream("current_time", '{"timezone": "UTC"}')),
                Reply(body=text_answer("It is noon in UTC.\n\nThat is all."), delay_secs=0.01),
            ],
        )
        turns, store = make_turns(tmp_path, [provider_config(server)], tools=tools.registry)
        outcome, channel, left = await answer(turns, mode, "What time is it?")
        store.close()
    assert outcome is not None and outcome.outcome == "ok" and outcome.rounds == 2, outcome
    assert tools.calls == [("current_time", {"timezone": "UTC"})]
    assert any("It is noon in UTC." in text for text in channel.chat.visible())
    assert left == []


@pytest.mark.parametrize(
    "reply",
    [
        Reply(
            body=b'{"error": {"message": "overloaded"}}',
            status=500,
            content_type="application/json",
        ),
        Reply(body=text_answer("The answer begins and then the connection")[:120], abort=True),
    ],
    ids=["refused", "cut"],
)
async def test_a_failed_turn_is_in_no_reference_cycle(tmp_path: Path, reply: Reply) -> None:
    # The round keeps its last error (for the user's words): not its traceback, whose frames
    # hold the round, its sink and so the driver.
    async with ProviderServer() as server:
        server.script(PATH, [reply] * 4)
        turns, store = make_turns(tmp_path, [provider_config(server, max_retries=0)])
        outcome, channel, left = await answer(turns, "partial", "Hello?")
        store.close()
    assert outcome is not None and outcome.outcome == "interrupted", outcome
    assert any("Answer interrupted" in text for text in channel.chat.visible())
    assert left == []


@pytest.mark.parametrize("served_by", ["retry", "next provider"])
async def test_a_turn_served_after_a_failed_attempt_is_in_no_reference_cycle(
    tmp_path: Path, served_by: str
) -> None:
    refused = Reply.json({"error": {"message": "overloaded"}}, status=500)
    slept: list[float] = []

    async def no_wait(seconds: float) -> None:
        slept.append(seconds)

    async with ProviderServer() as server:
        if served_by == "retry":  # the blocking call after the refused stream
            server.script(PATH, [refused, completion("Here it is.")])
            providers = [provider_config(server, max_retries=1)]
        else:
            server.script("/a" + PATH, [refused])
            server.script("/b" + PATH, [Reply(body=text_answer("Here it is."))])
            providers = [
                provider_config(server, "/a/v1", max_retries=0),
                provider_config(server, "/b/v1"),
            ]
        turns, store = make_turns(tmp_path, providers, sleep=no_wait)
        outcome, channel, left = await answer(turns, "partial", "Hello?")
        store.close()
    assert outcome is not None and outcome.outcome == "ok", outcome
    assert slept == ([0.5] if served_by == "retry" else [])
    assert any("Here it is." in text for text in channel.chat.visible())
    assert left == []


@pytest.mark.parametrize("at", ["streaming", "hook"])
async def test_a_cancelled_turn_is_in_no_reference_cycle(tmp_path: Path, at: str) -> None:
    # A cancelled task's error holds the frames it left (the driver's, a hook call's), and
    # anyio's task group keeps that error in a cycle of its own.
    body = text_answer("The answer begins here. " * 12 + "\n\nAnd it goes on.")
    hook = HangingHook()
    async with ProviderServer() as server:
        if at == "streaming":  # cancelled with text shown, the stream still open
            opening = body[: body.index(b'"finish_reason"')]
            server.script(PATH, [Reply(body=opening, hold_open=True)])
            turns, store = make_turns(tmp_path, [provider_config(server)])
            outcome, channel, left = await answer(
                turns, "partial", "Hello?", cancel_when=lambda ch: bool(ch.chat.visible())
            )
            assert channel.chat.visible()
        else:  # cancelled while the hook judges the first piece
            server.script(PATH, [Reply(body=body)])
            turns, store = make_turns(tmp_path, [provider_config(server)], policies=hook)
            outcome, _, left = await answer(
                turns, "multi_message", "Hello?", cancel_when=lambda _: hook.calls > 0
            )
            assert hook.calls >= 1
        store.close()
    assert outcome is None
    assert left == []
