"""Visible text that comes while no write could start waits before the outbound policy
(architecture §3 "Driver"): the round's sink holds it and hands it over, joined, when the
delivery driver's loop next passes. Through a real :class:`RoundSink`, :class:`ReplyPolicy` and
:class:`DeliveryDriver` on virtual time: the policy runs about once per write instead of once per
delta, every write still carries the text fed before it, and no write shows a secret the model
split across deltas, whatever the deltas' sizes and pace, in ``partial`` and ``multi_message``."""

from __future__ import annotations

import asyncio

import anyio
import looptime
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import AnswerEnded, TextEmitted, ToolStarted
from orchestrator.policy import ReplyPolicy
from orchestrator.policy.catalogue import Redactor
from orchestrator.turn.round_sink import RoundSink
from providers.events import PreExecutedToolCall, StreamChunk, TextDelta
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.policy_samples import _PROSE, planted_secrets, windows

MODES = {
    "partial": FakeChannelConfig(latency_ms=0),
    "multi_message": FakeChannelConfig(
        stream_mode="multi_message", latency_ms=0, multi_message_delay_ms=300
    ),
}


class _CountedPolicy(ReplyPolicy):
    """A real policy that counts its ``feed`` calls."""

    feeds = 0

    def feed(self, text: str) -> str:
        self.feeds += 1
        return super().feed(text)


def delta(text: str) -> TextDelta:
    return TextDelta(StreamChunk(delta=text))


async def play(
    channel: RecordingChannel, policy: ReplyPolicy, steps: list[tuple[float, object]]
) -> list[tuple[float, str]]:
    """Feed ``steps`` ((seconds to wait, text or event)) through a sink into a driver; returns
    (time, text) of every text fed, on the loop's clock."""
    driver = DeliveryDriver(channel, "chat", policy)
    fed: list[tuple[float, str]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        policy.begin_round()
        sink = RoundSink(policy, driver)
        for wait, step in steps:
            await anyio.sleep(wait)
            if isinstance(step, str):
                fed.append((anyio.current_time(), step))
                sink.event(delta(step))
            else:
                sink.event(step)  # type: ignore[arg-type]
        sink.end()
        finished = policy.finish()
        if finished:
            driver.feed(TextEmitted(finished))
        driver.feed(AnswerEnded())
    return fed


@pytest.mark.looptime
async def test_the_policy_runs_about_once_per_write_and_each_write_has_the_text_before() -> None:
    # 600 deltas 30 ms apart into a chat edited once a second: the policy is fed about once
    # per edit (it was once per delta: 600), and each edit at its due time shows all text fed
    # before it but what the redaction window holds back (its last 128 bytes at most).
    channel = RecordingChannel(FakeChannelConfig(latency_ms=0))
    policy = _CountedPolicy(channel="fake", chat_id="chat")
    words = [f"w{i} " for i in range(600)]
    fed = await play(channel, policy, [(0.03, w) for w in words])
    writes = channel.chat.chat_writes()
    assert 18 <= len(writes) <= 20
    assert policy.feeds <= 3 * len(writes) + 5, policy.feeds  # it was one per delta: 600
    for write in writes[1:-1]:
        before = "".join(text for t, text in fed if t < write.t - 1e-9)
        shown = write.text.rstrip()
        assert before.startswith(shown)
        assert len(before) - len(shown) <= 128 + len(words[-1]), (len(before), len(shown))
    assert channel.chat.visible() == ["".join(words)]


@pytest.mark.looptime
async def test_held_text_reaches_delivery_before_a_provider_run_tool_status() -> None:
    # Text held while no write could start is handed on before the status line of a tool the
    # provider runs, never after it. The narration is longer than what the redaction window
    # holds back, so the policy emits all but its end before the call.
    channel = RecordingChannel(
        FakeChannelConfig(stream_mode="multi_message", show_tool_status=True, latency_ms=0)
    )
    policy = ReplyPolicy(channel="fake", chat_id="chat")
    fed: list[object] = []
    feed = DeliveryDriver.feed

    def recorded(self: DeliveryDriver, event: object) -> None:
        fed.append(event)
        feed(self, event)  # type: ignore[arg-type]

    # A first paragraph goes out; the narration and the call come within the spacing after it.
    narration = "Let me search the web for the latest figures on this. " * 6
    steps: list[tuple[float, object]] = [(0.0, "A first paragraph, shown at once.\n\n")]
    steps += [(0.35 if i == 0 else 0.005, word + " ") for i, word in enumerate(narration.split())]
    steps += [(0.005, PreExecutedToolCall("web_search", "{}")), (0.01, "Found it.")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DeliveryDriver, "feed", recorded)
        await play(channel, policy, steps)
    started = next(i for i, e in enumerate(fed) if isinstance(e, ToolStarted))
    before = "".join(e.text for e in fed[:started] if isinstance(e, TextEmitted))
    before = before.removeprefix("A first paragraph, shown at once.\n\n")
    assert len(before) >= len(narration) - 128 - 32, before
    assert narration.startswith(before)
    assert channel.chat.chat_writes()[1].t - channel.chat.chat_writes()[0].t >= 0.99


@st.composite
def paced_scripts(draw: st.DrawFn) -> tuple[str, list[tuple[float, object]]]:
    """(secret, steps): prose, a secret, prose, cut into deltas of 1–40 characters, each after
    a pause of 0–1.5 s (a burst, a model's pace, a stall past the next due write)."""
    planted = draw(planted_secrets)
    before = " ".join(draw(st.lists(st.sampled_from(_PROSE), max_size=10)))
    after = " ".join(draw(st.lists(st.sampled_from(_PROSE), max_size=10)))
    glue = draw(st.sampled_from([" ", "\n", ": ", "\n\n"]))
    text = f"{before}{glue}{planted.text} {after}."
    steps: list[tuple[float, object]] = []
    pos = 0
    while pos < len(text):
        size = draw(st.integers(1, 40))
        pause = draw(st.sampled_from([0.0, 0.0, 0.005, 0.02, 0.2, 0.7, 1.5]))
        steps.append((pause, text[pos : pos + size]))
        pos += size
    return planted.secret, steps


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=paced_scripts())
def test_property_no_write_shows_a_secret_split_across_held_deltas(
    mode: str, script: tuple[str, list[tuple[float, object]]]
) -> None:
    secret, steps = script
    channel = RecordingChannel(MODES[mode])
    policy = ReplyPolicy(channel="fake", chat_id="chat")
    loop = looptime.new_event_loop(start=0, noop_cycles=0)
    try:
        fed = loop.run_until_complete(play(channel, policy, steps))
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    forbidden = windows(secret)
    shown = [text for _, state in channel.chat.states for text in state]
    shown += [write.text for write in channel.chat.chat_writes()]
    leaked = [(w, text) for text in shown for w in forbidden if w in text]
    assert not leaked, leaked
    whole = Redactor().redact("".join(text for _, text in fed))
    assert " ".join(channel.chat.visible()).split() == whole.split()
