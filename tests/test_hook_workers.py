"""The hook's worker processes (architecture §4 "The hook"): verdicts, failures, the timeout the
parent enforces by killing the worker, a loop that keeps running while a hook holds the GIL, and
no worker left behind (closed, or its parent killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from orchestrator.delivery.events import GuardPiece, PieceGuarded, PieceWithheld
from orchestrator.delivery.hooks import guard_piece
from orchestrator.policy.errors import HookFailed, HookTimedOut, PolicyError
from orchestrator.policy.hook import HOOK_OUTPUT_MAX_CHARS
from orchestrator.policy.hook_pool import HookWorkers
from orchestrator.policy.reply import ReplyPolicy
from tests import policy_hooks

REPO = Path(__file__).resolve().parents[1]
CATASTROPHIC = "a" * 28 + "!"


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def test_verdicts_come_back_from_the_worker() -> None:
    async with HookWorkers("tests.policy_hooks:shout", workers=1) as hooks:
        assert await hooks.call("tg", "1", "hello") == "HELLO"
    async with HookWorkers("tests.policy_hooks:cancel", workers=1) as hooks:
        assert await hooks.call("tg", "1", "hello") is None
    async with HookWorkers("tests.policy_hooks:huge", workers=1) as hooks:
        out = await hooks.call("tg", "1", "start ")
        assert out is not None and len(out) == HOOK_OUTPUT_MAX_CHARS and out.endswith("…")


async def test_a_hook_that_raises_fails_and_its_worker_serves_on() -> None:
    async with HookWorkers("tests.policy_hooks:boom", workers=1) as hooks:
        pids = hooks.pids
        with pytest.raises(HookFailed) as caught:
            await hooks.call("tg", "1", "piece")
        assert caught.value.detail == "RuntimeError: hook failed on 'piece'"
        assert "Traceback" in caught.value.trace
        assert hooks.pids == pids and hooks.replaced == 0
    async with HookWorkers("tests.policy_hooks:number", workers=1) as hooks:
        with pytest.raises(HookFailed, match="TypeError: on_message_sending returned int"):
            await hooks.call("tg", "1", "piece")


async def test_a_hung_hook_is_killed_at_its_timeout_and_replaced() -> None:
    async with HookWorkers("tests.policy_hooks:hang", workers=1, timeout_secs=0.3) as hooks:
        [pid] = hooks.pids
        with pytest.raises(HookTimedOut):
            await hooks.call("tg", "1", "piece")
        assert not alive(pid)
        assert hooks.replaced == 1
        # The next piece gets a fresh worker; it hangs too, and is killed in its turn.
        with pytest.raises(HookTimedOut):
            await hooks.call("tg", "1", "again")
        assert hooks.replaced == 2


async def test_a_worker_that_exits_mid_call_fails_the_piece_and_is_replaced() -> None:
    async with HookWorkers("tests.policy_hooks:exit_now", workers=1) as hooks:
        [pid] = hooks.pids
        with pytest.raises(HookFailed, match="exited"):
            await hooks.call("tg", "1", "piece")
        assert not alive(pid) and hooks.replaced == 1


async def test_the_loop_runs_while_a_hook_holds_the_gil() -> None:
    """A catastrophically backtracking ``re.search`` is one C call holding the GIL for seconds;
    in a thread of this process it froze the loop (and the timeout with it). Out of process the
    loop ticks all along, and the hook is killed at its timeout."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with HookWorkers("tests.policy_hooks:backtrack", workers=1, timeout_secs=1.0) as hooks:
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            with pytest.raises(HookTimedOut):
                await hooks.call("tg", "1", CATASTROPHIC)
            tg.cancel_scope.cancel()
        assert ticks >= 10  # a frozen loop ticks at most once
        assert await hooks.call("tg", "1", "fine words") == "fine words"


async def test_one_hung_piece_leaves_the_other_worker_to_another_chat() -> None:
    async with HookWorkers("tests.policy_hooks:backtrack", workers=2, timeout_secs=30) as hooks:
        hung_done = anyio.Event()

        async def hung() -> None:
            with pytest.raises(HookTimedOut):
                await hooks.call("tg", "A", CATASTROPHIC)
            hung_done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hung)
            await anyio.sleep(0.1)
            assert await hooks.call("tg", "B", "other chat") == "other chat"
            assert not hung_done.is_set()  # B was answered while A's hook still ran
            tg.cancel_scope.cancel()  # cancelling A's call kills its worker
        assert len(hooks.pids) == 1 and hooks.replaced == 1


async def test_a_hook_that_cannot_be_imported_fails_start_with_the_reason() -> None:
    hooks = HookWorkers("no_such_module_here:hook", workers=2)
    with pytest.raises(PolicyError) as caught:
        await hooks.start()
    assert caught.value.key == "policy.on_message_sending"
    assert "cannot import 'no_such_module_here'" in caught.value.message
    assert hooks.pids == []


async def test_closing_kills_every_worker_and_later_calls_fail() -> None:
    hooks = HookWorkers("tests.policy_hooks:shout", workers=3)
    await hooks.start()
    pids = hooks.pids
    assert len(pids) == 3
    await hooks.aclose()
    assert not any(alive(pid) for pid in pids)
    with pytest.raises(HookFailed):
        await hooks.call("tg", "1", "late")


_PARENT = textwrap.dedent(
    """
    import anyio
    from orchestrator.policy.hook_pool import HookWorkers

    async def main():
        hooks = HookWorkers("tests.policy_hooks:hang", workers=2, timeout_secs=3600)
        await hooks.start()
        async with anyio.create_task_group() as tg:
            tg.start_soon(hooks.call, "tg", "1", "stuck")
            await anyio.sleep(0.2)
            print(*hooks.pids, flush=True)
            await anyio.sleep(3600)

    anyio.run(main)
    """
)


def test_workers_die_with_a_killed_parent() -> None:
    """SIGKILL the parent (no clean-up runs): its workers, one in the middle of a hung hook,
    are gone all the same."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    for _ in range(200):  # the kernel kills them at once; reaping may take a moment
        if not any(alive(pid) for pid in pids):
            break
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


async def test_the_driver_s_verdict_fails_closed_on_a_timeout_and_without_workers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Through :func:`guard_piece`, as the delivery driver asks: a hung hook's piece is withheld
    and logged; a reply policy with a hook but no running workers withholds too (the loop never
    calls the hook itself)."""
    async with HookWorkers("tests.policy_hooks:hang", workers=1, timeout_secs=0.3) as hooks:
        policy = ReplyPolicy(hooks=hooks, channel="tg", chat_id="7", hook_timeout_secs=0.3)
        verdict = await guard_piece(policy, GuardPiece(1, "hello"), where="tg:7")
    assert verdict == PieceWithheld(1)
    assert "did not answer within 0.3 s in tg:7; that piece is withheld" in caplog.text
    loopless = ReplyPolicy(hook=policy_hooks.shout)
    assert await guard_piece(loopless, GuardPiece(2, "hello"), where="tg:7") == PieceWithheld(2)
    assert loopless.hook_piece_here("hello") == "HELLO"  # a fake-clock runner's own call
    async with HookWorkers("tests.policy_hooks:shout", workers=1) as hooks:
        policy = ReplyPolicy(hooks=hooks, channel="tg", chat_id="7")
        verdict = await guard_piece(policy, GuardPiece(3, "hello"), where="tg:7")
    assert verdict == PieceGuarded(3, "HELLO")
