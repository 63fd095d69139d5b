"""Edges of the stream-open admission (providers/open_admission.py, architecture §2 "Transport"):
an open granted a pass but cancelled before it resumes, waits cancelled by anyio's cancel scopes
and task groups, failures after admission, bursts of thousands, uvloop, repeated bursts (counts
and log lines), and the scraped counter across a reload and a chat's model alias; through a real
provider against a real HTTP server where the sockets matter."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from orchestrator.metrics import Metrics
from orchestrator.turn.provider_chain import ProviderChain
from providers.base import ChatMessage, ChatRequest, ModelProvider
from providers.errors import ProviderError
from providers.events import TextDelta
from providers.open_admission import OPENS_PER_PASS, OpenAdmission
from providers.openai_chat import OpenAIChatProvider
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import chain_config, provider_config, text_answer
from tests.test_open_admission import _Passes
from tests.test_transport_bounds import _scraped

PATH = "/v1/chat/completions"
REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))


async def _text(provider: ModelProvider) -> str:
    return "".join(
        [e.chunk.delta async for e in provider.stream(REQUEST) if isinstance(e, TextDelta)]
    )


async def _burst_of(n: int, stream: Callable[[], Coroutine[Any, Any, str]]) -> list[str]:
    results: list[str] = []

    async def one() -> None:
        results.append(await stream())

    with anyio.fail_after(10):  # an open never admitted fails, not hangs
        async with anyio.create_task_group() as group:
            for _ in range(n):
                group.start_soon(one)
    return results


# -- the admission alone ------------------------------------------------------------------------


async def _granted_then_cancelled(per_pass: int) -> tuple[OpenAdmission, list[int], list[int]]:
    """4 × ``per_pass`` opens at once: ``per_pass`` take the pass, the rest wait. In the pass that
    grants the first waiting batch, before those resume, every one of the batch is cancelled.
    Returns the admission, the numbers admitted and the numbers cancelled."""
    admission = OpenAdmission("p", per_pass=per_pass)
    admitted: list[int] = []

    async def one(number: int) -> None:
        await admission.admitted()
        admitted.append(number)

    tasks = [asyncio.ensure_future(one(n)) for n in range(4 * per_pass)]
    await asyncio.sleep(0)  # the first batch went on, the rest wait now
    assert admission.waiting == 3 * per_pass
    loop = asyncio.get_running_loop()
    cancelled: list[int] = []

    def cancel_granted() -> None:
        # Runs each pass until the first waiting batch is granted, then cancels the batch
        # before its tasks resume (they resume in the pass after the grant).
        if admission.waiting == 3 * per_pass and len(admission._waiters) == 2 * per_pass:
            for number in range(per_pass, 2 * per_pass):
                tasks[number].cancel()
                cancelled.append(number)
        elif not cancelled:
            loop.call_soon(cancel_granted)

    loop.call_soon(cancel_granted)
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=5)
    return admission, admitted, cancelled


def test_an_open_granted_then_cancelled_before_it_resumes_loses_nothing() -> None:
    admission, admitted, cancelled = asyncio.run(_granted_then_cancelled(OPENS_PER_PASS))
    n = OPENS_PER_PASS
    assert cancelled == list(range(n, 2 * n))
    assert admitted == [*range(n), *range(2 * n, 4 * n)]  # the rest, in order
    assert admission.waiting == 0 and admission.deferred == 3 * n

    async def later() -> list[int]:  # the next burst on a new loop is admitted as usual
        passes = _Passes()
        seen: list[int] = []

        async def one() -> None:
            await admission.admitted()
            seen.append(passes.now)

        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(9))), timeout=5)
        passes.stop()
        return seen

    assert list(Counter(asyncio.run(later())).values()) == [4, 4, 1]


def test_opens_still_waiting_when_their_loop_closed_block_no_later_loop() -> None:
    # A loop closed with opens still waiting (its tasks never cancelled, never resumed): the
    # next loop admits its own opens as usual, none waits for good behind the dead ones.
    admission = OpenAdmission("p", per_pass=2)
    loop = asyncio.new_event_loop()

    async def first() -> None:
        # Two go on, six wait; the loop's last pass grants two of them, four stay queued.
        tasks = [asyncio.ensure_future(admission.admitted()) for _ in range(8)]
        await asyncio.sleep(0)
        assert sum(task.done() for task in tasks) == 2
        assert admission.waiting == 6

    try:
        loop.run_until_complete(first())
    finally:
        loop.close()

    async def later() -> None:
        await asyncio.wait_for(asyncio.gather(*(admission.admitted() for _ in range(5))), 5)

    asyncio.run(later())
    assert admission.deferred == 6 + 3
    gc.collect()  # the dead loop's tasks go now (their "destroyed but pending" logged here)


async def _many(n: int, per_pass: int) -> tuple[OpenAdmission, Counter[int]]:
    admission = OpenAdmission("p", per_pass=per_pass)
    passes = _Passes()
    at: list[int] = []

    async def one() -> None:
        await admission.admitted()
        at.append(passes.now)

    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), timeout=20)
    passes.stop()
    return admission, Counter(at)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_ten_thousand_opens_at_once_take_n_over_per_pass_passes(loop: str) -> None:
    # Each pass admits exactly per_pass (none stuck, none skipped); run on uvloop too (the loop
    # `relaybot run` uses when installed), whose passes are asyncio's.
    run = asyncio.run if loop == "asyncio" else pytest.importorskip("uvloop").run
    admission, per_pass = run(_many(10_000, OPENS_PER_PASS))
    assert len(per_pass) == 10_000 // OPENS_PER_PASS
    assert set(per_pass.values()) == {OPENS_PER_PASS}
    assert admission.waiting == 0 and admission.deferred == 10_000 - OPENS_PER_PASS
    assert not admission._waiters


def test_cancelled_waits_of_thousands_leave_no_waiters_behind() -> None:
    # Thousands wait, all but the last are cancelled at once: the last is admitted a pass later,
    # and what is left of the queue afterwards is nothing.
    async def main() -> tuple[OpenAdmission, int]:
        admission = OpenAdmission("p", per_pass=2)
        passes = _Passes()
        went_on: list[int] = []

        async def last() -> None:
            await admission.admitted()
            went_on.append(passes.now)

        tasks = [asyncio.ensure_future(admission.admitted()) for _ in range(5_000)]
        tasks.append(asyncio.ensure_future(last()))
        await asyncio.sleep(0)
        assert admission.waiting == 4_999  # two went on in the first pass
        start = passes.now
        for task in tasks[:-1]:
            task.cancel()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=10)
        passes.stop()
        return admission, went_on[0] - start

    admission, passes = asyncio.run(main())
    assert passes <= 3
    assert admission.waiting == 0 and not admission._waiters


async def test_each_burst_is_logged_with_its_own_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="providers.open_admission")
    admission = OpenAdmission("p", per_pass=2)
    for size in (5, 3, 2, 7):  # 3, 1, 0 and 5 wait
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                for _ in range(size):
                    group.start_soon(admission.admitted)
        await anyio.lowlevel.checkpoint()  # the pass's count is over
    lines = [r.getMessage() for r in caplog.records if r.name == "providers.open_admission"]
    assert [line for line in lines if line.endswith("waited")] == [
        "provider p: 3 stream opens waited",
        "provider p: 1 stream opens waited",
        "provider p: 5 stream opens waited",
    ]
    assert len(lines) == 6 and admission.deferred == 9 and admission.waiting == 0


# -- through a real provider over real sockets --------------------------------------------------


async def test_waits_cancelled_by_cancel_scopes_lose_nothing_and_a_later_burst_opens() -> None:
    body = text_answer("one two")
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body))
        provider = OpenAIChatProvider("small", provider_config(server))
        admission = provider.open_admission
        assert admission is not None
        results: list[str] = []
        try:
            # Half the burst cancelled while waiting (move_on_after at once), half not.
            async def maybe(number: int) -> None:
                with anyio.move_on_after(0 if number % 2 else 10):
                    results.append(await _text(provider))

            async with anyio.create_task_group() as group:
                for number in range(4 * OPENS_PER_PASS):
                    group.start_soon(maybe, number)
            # A whole task group cancelled while its opens wait.
            async with anyio.create_task_group() as group:
                for _ in range(4 * OPENS_PER_PASS):
                    group.start_soon(_text, provider)
                await anyio.lowlevel.checkpoint()
                assert admission.waiting == 3 * OPENS_PER_PASS
                group.cancel_scope.cancel()
            assert admission.waiting == 0
            with anyio.fail_after(10):
                later = await _burst_of(3 * OPENS_PER_PASS, lambda: _text(provider))
        finally:
            await provider.aclose()
    assert results == ["one two"] * (2 * OPENS_PER_PASS)
    assert later == ["one two"] * (3 * OPENS_PER_PASS)
    assert admission.waiting == 0


async def test_opens_that_fail_after_admission_hold_nothing() -> None:
    # A burst against a server that answers 500, then one against a closed port: every open
    # fails after it was admitted, and the next burst opens as usual.
    body = text_answer("one two")
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=b'{"error": {"message": "boom"}}', status=500))
        provider = OpenAIChatProvider("small", provider_config(server, max_retries=0))
        admission = provider.open_admission
        assert admission is not None
        failures: list[type[BaseException]] = []

        async def failing() -> str:
            try:
                return await _text(provider)
            except ProviderError as exc:
                failures.append(type(exc))
                return ""

        try:
            with anyio.fail_after(10):
                await _burst_of(3 * OPENS_PER_PASS, failing)
            server.script(PATH, Reply(body=body))
            with anyio.fail_after(10):
                later = await _burst_of(3 * OPENS_PER_PASS, lambda: _text(provider))
        finally:
            await provider.aclose()
    assert len(failures) == 3 * OPENS_PER_PASS
    assert later == ["one two"] * (3 * OPENS_PER_PASS)
    assert admission.waiting == 0 and admission.deferred == 2 * (3 * OPENS_PER_PASS - 4)


async def test_the_scraped_counter_never_goes_back_across_a_reload() -> None:
    # A burst on "small", then a reload that changes its config (a new provider, a new
    # admission), then another burst: the counter of the opens that waited only grows.
    body = text_answer("one two")
    burst = OPENS_PER_PASS + 3
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body))
        old = chain_config(server)
        new = chain_config(server, timeout_secs=77)
        metrics = Metrics()
        chain = ProviderChain(old, metrics)
        scraped: list[float] = []
        try:
            first = chain.rounds.chain[0].provider
            await _burst_of(burst, lambda: _text(first))
            scraped.append(_scraped(metrics, "relaybot_provider_opens_deferred_total"))
            chain.reconfigure(old, new)
            second = chain.rounds.chain[0].provider
            assert second is not first
            scraped.append(_scraped(metrics, "relaybot_provider_opens_deferred_total"))
            await _burst_of(burst, lambda: _text(second))
            scraped.append(_scraped(metrics, "relaybot_provider_opens_deferred_total"))
        finally:
            await chain.aclose()
    assert scraped == [3, 3, 6]


async def test_opens_of_a_chat_on_a_model_alias_are_counted() -> None:
    # A chat on a model alias is served by a provider of its own (its own client): the opens
    # that waited there are scraped under the provider's name with the chain's.
    body = text_answer("one two")
    burst = OPENS_PER_PASS + 3
    async with ProviderServer() as server:
        server.script(PATH, Reply(body=body))
        config = chain_config(server, {"models": {"big": {"provider": "small", "model": "m2"}}})
        metrics = Metrics()
        chain = ProviderChain(config, metrics)
        try:
            aliased = chain.rounds_for(config, "big").chain[0].provider
            assert aliased is not chain.rounds.chain[0].provider
            results = await _burst_of(burst, lambda: _text(aliased))
        finally:
            await chain.aclose()
    assert results == ["one two"] * burst
    assert _scraped(metrics, "relaybot_provider_opens_deferred_total") == 3


@pytest.mark.parametrize(
    "scenario",
    [
        test_waits_cancelled_by_cancel_scopes_lose_nothing_and_a_later_burst_opens,
        test_opens_that_fail_after_admission_hold_nothing,
    ],
)
def test_the_same_over_real_sockets_on_uvloop(
    scenario: Callable[[], Coroutine[Any, Any, None]],
) -> None:
    pytest.importorskip("uvloop")
    anyio.run(scenario, backend_options={"use_uvloop": True})


def test_a_new_loop_starts_its_own_waiting_count_and_burst_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A loop closed with opens still queued, their tasks kept (never resumed): the next loop's
    # waiting count is its own (back to 0 once its burst has passed), and its burst is logged.
    caplog.set_level("INFO", logger="providers.open_admission")
    admission = OpenAdmission("p", per_pass=2)
    kept: list[asyncio.Future[None]] = []
    loop = asyncio.new_event_loop()

    async def first() -> None:
        kept.extend(asyncio.ensure_future(admission.admitted()) for _ in range(8))
        await asyncio.sleep(0)

    try:
        loop.run_until_complete(first())
    finally:
        loop.close()
    caplog.clear()

    async def later() -> None:
        await asyncio.wait_for(asyncio.gather(*(admission.admitted() for _ in range(7))), 5)

    asyncio.run(later())
    waiting = admission.waiting
    lines = [r.getMessage() for r in caplog.records if r.name == "providers.open_admission"]
    kept.clear()
    gc.collect()  # the dead loop's tasks go now: they change nothing of the live count
    assert waiting == 0 and admission.waiting == 0
    assert lines[0].startswith("provider p: more than 2 streams opening at once")
    assert lines[1:] == ["provider p: 5 stream opens waited"]
