"""The delivery driver on a real event loop, against a RecordingChannel, in virtual time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from itertools import pairwise

import anyio
import looptime
import pytest

from channels.base import MessageRef, Rendering
from channels.errors import (
    ChannelRateLimited,
    ChannelTimeout,
    ChannelWriteFailed,
    MessageGone,
    MessageTooLong,
)
from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import (
    AnswerEnded,
    RoundEnded,
    TextEmitted,
    ToolFinished,
    ToolStarted,
)
from tests.fakes import (
    Fail,
    FakeChannelConfig,
    GuardStub,
    RecordingChannel,
    rate_limited,
)

STATUS = "⏳ current_time…"
DONE = "✓ current_time 0.4 s"


class _FormattingChannel(RecordingChannel):
    """Renders formatted text differently, so the final edit is always sent."""

    def render(self, text: str) -> Rendering:
        return Rendering(f"<p>{text}</p>", self.limits.measure(text))


async def stream(driver: DeliveryDriver, words: int, every: float) -> None:
    for i in range(words):
        driver.feed(TextEmitted(f"w{i} "))
        await anyio.sleep(every)


@pytest.mark.looptime
async def test_streams_a_reply_through_the_channel_and_returns_its_stats() -> None:
    channel = _FormattingChannel(FakeChannelConfig(latency_ms=100))
    driver = DeliveryDriver(channel, "chat", GuardStub(), reply_to="in-7")
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        await stream(driver, 30, 0.2)
        driver.feed(AnswerEnded())
    chat = channel.chat
    text = "".join(f"w{i} " for i in range(30))
    assert chat.visible() == [text]
    assert chat.writes[-1].formatted
    starts = [w.t for w in chat.chat_writes()]
    assert all(b - a >= 1.0 - 1e-9 for a, b in pairwise(starts))
    assert driver.writes_sent == len(chat.chat_writes()) == driver.stats.writes_sent
    assert driver.stats.messages_created == 1
    assert channel.replies == {"1": "in-7"}


@pytest.mark.looptime
async def test_run_returns_the_stats_when_the_engine_is_finished() -> None:
    channel = RecordingChannel(FakeChannelConfig(stream_mode="off"))
    driver = DeliveryDriver(channel, "chat", GuardStub())
    driver.feed(TextEmitted("One message."))
    driver.feed(AnswerEnded())
    stats = await driver.run()
    assert stats.writes_sent == 1 and stats.messages_created == 1
    assert channel.chat.visible() == ["One message."]


@pytest.mark.looptime
async def test_c15_flood_wait_is_honoured_from_the_429_answer() -> None:
    config = FakeChannelConfig(draft_update_interval_ms=800, latency_ms=50)
    channel = _FormattingChannel(config, fail=[Fail("edit", 3, rate_limited(9))])
    driver = DeliveryDriver(channel, "chat", GuardStub())
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        await stream(driver, 9, 0.3)
        await stream(driver, 20, 0.25)
        driver.feed(AnswerEnded())
    chat = channel.chat
    writes = chat.chat_writes()
    limited = next(w for w in writes if w.outcome == "ChannelRateLimited")
    after = writes[writes.index(limited) + 1 :]
    assert chat.early_writes == []
    assert len(after) == 1 and after[0].t >= limited.t + 9
    assert after[0].formatted and after[0].text == driver.engine.text
    assert driver.stats.rate_limited == 1
    assert anyio.current_time() < limited.t + 10  # no needless wait afterwards


@pytest.mark.looptime
async def test_drain_waits_until_the_narration_and_status_are_shown() -> None:
    channel = RecordingChannel(FakeChannelConfig(latency_ms=30))
    driver = DeliveryDriver(channel, "chat", GuardStub())
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        driver.feed(TextEmitted("Let me check."))
        await anyio.sleep(0.1)
        driver.feed(RoundEnded())
        driver.feed(ToolStarted(1, STATUS))
        await driver.drain()
        assert channel.chat.visible() == [f"Let me check.\n\n{STATUS}"]
        # The send took 30 ms, the edit waited an interval after it and took 30 ms.
        assert anyio.current_time() == pytest.approx(1.06, abs=0.005)
        driver.feed(ToolFinished(1, DONE))
        driver.feed(TextEmitted("It is noon."))
        driver.feed(AnswerEnded())
    await driver.drain()  # run has ended: returns at once
    assert channel.chat.visible() == ["Let me check.\n\nIt is noon."]


@pytest.mark.looptime
async def test_drain_waits_out_a_rate_limit() -> None:
    channel = RecordingChannel(FakeChannelConfig(), fail=[Fail("edit", 1, rate_limited(5))])
    driver = DeliveryDriver(channel, "chat", GuardStub())
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        driver.feed(TextEmitted("a"))
        await anyio.sleep(1.5)
        driver.feed(TextEmitted("b"))
        await driver.drain()
        assert channel.chat.visible() == ["ab"]
        assert anyio.current_time() >= 6.5
        driver.feed(AnswerEnded())


@pytest.mark.looptime
async def test_typing_is_sent_while_nothing_shows_and_its_failures_are_ignored() -> None:
    class BrokenTyping(RecordingChannel):
        async def _send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
            await super()._send_typing(chat_id, thread_id=thread_id)
            raise ChannelRateLimited(30)

    channel = BrokenTyping(FakeChannelConfig(stream_mode="off"))
    driver = DeliveryDriver(channel, "chat", GuardStub())
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        driver.feed(TextEmitted("Thinking hard."))
        await anyio.sleep(9)
        driver.feed(AnswerEnded())
    assert channel.chat.typing == [0.0, 4.0, 8.0]
    assert channel.chat.visible() == ["Thinking hard."]


class _Raising(RecordingChannel):
    """Raises ``error`` on the first edit, then behaves."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(FakeChannelConfig())
        self.error: BaseException | None = error

    def render(self, text: str) -> Rendering:
        return Rendering(f"<p>{text}</p>", self.limits.measure(text))

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            if isinstance(error, MessageGone):
                self.chat.user_deletes(ref.message_id)
            raise error
        await super()._edit_message(ref, text, formatted=formatted)


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("error", "visible", "stat", "value"),
    [
        (ChannelWriteFailed("can't parse entities"), ["Hello world"], "plain_fallbacks", 1),
        (RuntimeError("adapter bug"), ["Hello world"], "plain_fallbacks", 1),
        (ChannelTimeout("read timeout"), ["Hello world"], "edits_sent", 2),
        (MessageGone("message to edit not found"), ["Hello world"], "messages_created", 2),
        # 11 characters with a quarter less room is too little to split: given up.
        (MessageTooLong(10, 20), ["Hello"], "writes_given_up", 1),
    ],
)
async def test_channel_errors_become_write_outcomes(
    error: BaseException,
    visible: list[str],
    stat: str,
    value: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    channel = _Raising(error)
    driver = DeliveryDriver(channel, "chat", GuardStub())
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        driver.feed(TextEmitted("Hello"))
        await anyio.sleep(0.5)
        driver.feed(TextEmitted(" world"))
        driver.feed(AnswerEnded())  # the final edit at 1 s meets the error
    assert channel.chat.visible() == visible
    assert getattr(driver.stats, stat) == value
    assert str(error) in caplog.text
    if isinstance(error, RuntimeError):
        assert "Traceback" in caplog.text


@pytest.mark.looptime
async def test_input_after_the_end_is_logged_and_dropped(caplog: pytest.LogCaptureFixture) -> None:
    channel = RecordingChannel(FakeChannelConfig())
    driver = DeliveryDriver(channel, "chat", GuardStub())
    driver.feed(TextEmitted("Done."))
    driver.feed(AnswerEnded())
    driver.feed(TextEmitted("late"))
    await driver.run()
    assert channel.chat.visible() == ["Done."]
    assert "TextEmitted after the answer ended" in caplog.text


@pytest.mark.looptime
async def test_settings_come_from_the_channel() -> None:
    config = FakeChannelConfig(
        stream_mode="multi_message",
        draft_update_interval_ms=1500,
        multi_message_delay_ms=900,
        max_edits_per_message=100,
        show_tool_status=True,
        max_length=2000,
        unit="chars",
        multi_message_unit="turn",
    )
    settings = DeliveryDriver(RecordingChannel(config), "chat", GuardStub()).engine.settings
    assert (settings.mode, settings.draft_update_interval_ms, settings.multi_message_delay_ms) == (
        "multi_message",
        1500,
        900,
    )
    assert settings.limits.max_length == 2000 and settings.limits.unit == "chars"
    assert settings.multi_message_unit == "turn" and settings.max_edits_per_message == 100
    assert settings.show_tool_status


class _CountingPolls:
    """Counts the engine's polls: one per turn of the driver's loop."""

    def __init__(self, driver: DeliveryDriver) -> None:
        self.count = 0
        poll = driver.engine.poll

        def counted(now: float) -> list:
            self.count += 1
            return poll(now)

        driver.engine.poll = counted  # type: ignore[method-assign]


@pytest.mark.looptime
async def test_text_waits_for_the_next_edit_instead_of_waking_the_loop_per_delta() -> None:
    # 600 deltas 30 ms apart into a chat edited once a second: the loop turns about once per
    # edit, not once per delta, and every edit still carries the newest text when it is due.
    channel = RecordingChannel(FakeChannelConfig(latency_ms=0))
    driver = DeliveryDriver(channel, "chat", GuardStub())
    polls = _CountingPolls(driver)
    fed: list[tuple[float, int]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        for i in range(600):
            driver.feed(TextEmitted(f"w{i} "))
            fed.append((anyio.current_time(), i))
            await anyio.sleep(0.03)
        driver.feed(AnswerEnded())
    writes = channel.chat.chat_writes()
    assert 18 <= len(writes) <= 20
    assert polls.count <= 3 * len(writes) + 5, polls.count  # it was one per delta: 600
    for a, b in pairwise(writes):
        assert b.t - a.t >= 1.0 - 1e-9
    for write in writes[1:]:  # each edit at its due time shows all text fed before it
        newest = max(i for t, i in fed if t < write.t - 1e-9)
        assert write.text.rstrip().endswith(f"w{newest}")
    assert channel.chat.visible() == ["".join(f"w{i} " for i in range(600))]


@pytest.mark.looptime
async def test_text_after_everything_was_shown_is_edited_in_when_spacing_allows() -> None:
    # After an edit that showed all text, the loop waits for the typing deadline (4 s); text
    # arriving then shortens that wait to the spacing, so it shows one interval after the
    # last write, not at the typing deadline.
    channel = RecordingChannel(FakeChannelConfig(latency_ms=0))
    driver = DeliveryDriver(channel, "chat", GuardStub())
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        driver.feed(TextEmitted("first "))
        await anyio.sleep(0.2)  # the first draft went out at once
        start = anyio.current_time()
        await anyio.sleep(0.3)
        driver.feed(TextEmitted("second "))
        await anyio.sleep(2.0)
        driver.feed(AnswerEnded())
    writes = channel.chat.chat_writes()
    assert writes[0].text.strip() == "first" and writes[0].t < start
    assert writes[1].text.strip() == "first second"
    assert writes[1].t == pytest.approx(writes[0].t + 1.0, abs=0.01)


def _built_in_one_loop_run_in_another(
    make_first: Callable[[], asyncio.AbstractEventLoop],
) -> list[str]:
    """A driver built in one loop (then closed) and run in a looptime loop: 20 words 0.25 s
    apart. Its clock must be the running loop's: the first loop's virtual clock stood still."""

    async def build() -> tuple[RecordingChannel, DeliveryDriver]:
        channel = RecordingChannel(FakeChannelConfig(latency_ms=10))
        return channel, DeliveryDriver(channel, "chat", GuardStub())

    async def play() -> list[str]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(driver.run)
            await stream(driver, 20, 0.25)
            driver.feed(AnswerEnded())
        return channel.chat.visible()

    first = make_first()
    try:
        channel, driver = first.run_until_complete(build())
    finally:
        first.close()
    second = looptime.new_event_loop(start=0)
    try:
        return second.run_until_complete(asyncio.wait_for(play(), 600))
    finally:
        second.close()
        asyncio.set_event_loop(None)


@pytest.mark.parametrize(
    "make_first",
    [lambda: looptime.new_event_loop(start=0), asyncio.new_event_loop],
    ids=["looptime", "asyncio"],
)
def test_a_driver_built_in_another_loop_runs_on_the_clock_of_the_loop_running_it(
    make_first: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    assert _built_in_one_loop_run_in_another(make_first) == ["".join(f"w{i} " for i in range(20))]
