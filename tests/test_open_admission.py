"""Stream opens admitted a batch per pass of the event loop (providers/open_admission.py,
architecture §2 "Transport"): never more than ``per_pass`` in one pass, in the order they came,
none lost (cancelled waits included), no pass spent when there is room; and through a real
provider against a real HTTP server, a burst of streams opened at once is counted, scraped and
logged, every stream's text intact."""

from __future__ import annotations

import asyncio
from collections import Counter

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.metrics import Metrics
from orchestrator.turn.provider_chain import ProviderChain
from providers.base import ChatMessage, ChatRequest
from providers.events import TextDelta
from providers.open_admission import OPENS_PER_PASS, OpenAdmission
from providers.openai_chat import OpenAIChatProvider
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import chain_config, text_answer

PATH = "/v1/chat/completions"


class _Passes:
    """Counts the passes of the running loop: a callback that schedules itself each pass."""

    def __init__(self) -> None:
        self.now = 0
        self._on = True
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.now += 1
        if self._on:
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._on = False


async def _burst(
    admission: OpenAdmission, arrivals: list[tuple[int, bool]]
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Opens arriving at the given passes (offsets from the first), each flagged one cancelled
    once it has waited a pass. Returns (pass admitted, arrival number) of each admission in
    admission order; the arrival numbers in the order they asked, those cancelled while
    waiting left out; and those cancelled."""
    passes = _Passes()
    admitted: list[tuple[int, int]] = []
    cancelled: list[int] = []
    waiting: dict[int, int] = {}  # arrival number -> the pass its wait began
    asked: list[int] = []

    async def one(number: int, at: int) -> None:
        while passes.now < at:  # noqa: ASYNC110 -- waits passes of the loop, not an event
            await asyncio.sleep(0)
        waiting[number] = passes.now
        asked.append(number)
        await admission.admitted()
        del waiting[number]
        admitted.append((passes.now, number))

    tasks = [asyncio.ensure_future(one(n, at)) for n, (at, _) in enumerate(arrivals)]
    deadline = passes.now + 10_000  # a wait that is never admitted fails, not hangs
    while not all(task.done() for task in tasks):
        assert passes.now < deadline, "an open was never admitted"
        for number, since in list(waiting.items()):
            if arrivals[number][1] and passes.now > since:
                tasks[number].cancel()
                del waiting[number]
                cancelled.append(number)
        await asyncio.sleep(0)
    passes.stop()
    return admitted, [n for n in asked if n not in cancelled], cancelled


def test_a_burst_is_admitted_per_pass_in_order() -> None:
    admission = OpenAdmission("p", per_pass=8)
    admitted, _, _ = asyncio.run(_burst(admission, [(0, False)] * 50))
    per_pass = Counter(at for at, _ in admitted)
    assert max(per_pass.values()) == 8 and len(per_pass) == 7  # 50 = 6 × 8 + 2
    assert [n for _, n in admitted] == list(range(50))
    assert admission.deferred == 42 and admission.waiting == 0


def test_an_open_with_room_spends_no_pass() -> None:
    async def main() -> list[int]:
        admission = OpenAdmission("p", per_pass=4)
        passes = _Passes()
        seen = []
        for _ in range(4):  # room for four in this pass: no wait at all
            await admission.admitted()
            seen.append(passes.now)
        await admission.admitted()  # the fifth waits for the next pass
        seen.append(passes.now)
        passes.stop()
        return seen

    seen = asyncio.run(main())
    assert seen[:4] == [seen[0]] * 4 and seen[4] > seen[0]


@settings(max_examples=150, deadline=None)
@given(
    per_pass=st.integers(1, 6),
    arrivals=st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=40),
)
def test_property_admissions_bounded_ordered_none_lost(
    per_pass: int, arrivals: list[tuple[int, bool]]
) -> None:
    admission = OpenAdmission("p", per_pass=per_pass)
    admitted, asked, cancelled = asyncio.run(_burst(admission, arrivals))
    # Bounded: per_pass begin in a pass, and those woken from a wait go on in the pass after
    # the one that admitted them, beside up to per_pass admitted there.
    assert all(count <= 2 * per_pass for count in Counter(at for at, _ in admitted).values())
    # Every open not cancelled while waiting is admitted, exactly once.
    numbers = [n for _, n in admitted]
    assert sorted(numbers + cancelled) == list(range(len(arrivals)))
    # In the order they asked: one that waited goes on in the pass after the one that admitted
    # it, so one that asked later, found room and went on at once may be a pass ahead of it,
    # never more.
    went_on = {n: at for at, n in admitted}
    for i, earlier in enumerate(asked):
        assert all(went_on[earlier] <= went_on[later] + 1 for later in asked[i + 1 :])
    assert admission.waiting == 0
    assert admission.deferred <= len(arrivals)


def test_a_new_event_loop_starts_a_new_count() -> None:
    # The first loop ends before its next pass, the pass's count still open: the next loop
    # admits as many at once, and the one beyond them a pass later (none waits for good).
    admission = OpenAdmission("p", per_pass=2)

    async def opens(n: int) -> None:
        for _ in range(n):
            await admission.admitted()

    asyncio.run(opens(2))
    asyncio.run(asyncio.wait_for(opens(3), timeout=5))
    assert admission.deferred == 1 and admission.waiting == 0


def test_per_pass_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        OpenAdmission("p", per_pass=0)


async def _text(provider: OpenAIChatProvider) -> str:
    request = ChatRequest(messages=(ChatMessage("user", "hi"),))
    return "".join(
        [e.chunk.delta async for e in provider.stream(request) if isinstance(e, TextDelta)]
    )


async def test_a_burst_of_streams_opens_per_pass_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    burst = OPENS_PER_PASS + 8
    body = text_answer("one two")
    caplog.set_level("INFO", logger="providers.open_admission")
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body))
        config = chain_config(server)
        metrics = Metrics()
        chain = ProviderChain(config, metrics)
        provider = chain.rounds.chain[0].provider
        assert isinstance(provider, OpenAIChatProvider)
        results: list[str] = []

        async def one() -> None:
            results.append(await _text(provider))

        try:
            async with anyio.create_task_group() as group:
                for _ in range(burst):
                    group.start_soon(one)
        finally:
            await chain.aclose()
    assert results == ["one two"] * burst
    admission = provider.open_admission
    assert admission is not None and admission.deferred == 8 and admission.waiting == 0
    from tests.test_transport_bounds import _scraped

    assert _scraped(metrics, "relaybot_provider_opens_deferred_total") == 8
    lines = [r.getMessage() for r in caplog.records if r.name == "providers.open_admission"]
    assert lines[0].startswith(f"provider small: more than {OPENS_PER_PASS} streams opening")
    assert lines[-1] == "provider small: 8 stream opens waited", lines
