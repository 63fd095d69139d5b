"""The daemon's frozen heap (orchestrator/ops/process.py, architecture §7 "Process"): what is
frozen is not walked by a collection, and garbage in reference cycles among it is freed when the
heap is thawed, collected and frozen again; ``keep_frozen`` thaws when it ends."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import anyio
import pytest

from orchestrator.ops.process import keep_frozen, refreeze


class Node:
    """An object in a reference cycle (``self.me = self``)."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def thawed() -> Iterator[None]:
    """The test process's collector as it was: nothing left frozen."""
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("thawed")
def test_a_frozen_cycle_waits_for_the_next_refreeze() -> None:
    node = Node()
    gone = weakref.ref(node)
    assert refreeze() > 0 and gc.get_freeze_count() > 0
    del node
    gc.collect()
    assert gone() is not None  # frozen: no collection walks it
    refreeze()
    assert gone() is None  # thawed and collected


@pytest.mark.usefixtures("thawed")
def test_a_cycle_made_after_the_freeze_is_collected_as_usual() -> None:
    refreeze()
    node = Node()
    gone = weakref.ref(node)
    del node
    gc.collect()
    assert gone() is None


@pytest.mark.usefixtures("thawed")
async def test_keep_frozen_freezes_at_once_again_on_time_and_thaws_at_its_end() -> None:
    node = Node()
    gone = weakref.ref(node)
    async with anyio.create_task_group() as tg:
        tg.start_soon(keep_frozen, 0.5)
        await anyio.sleep(0.1)  # the first refreeze has run: the node is frozen
        assert gc.get_freeze_count() > 0
        del node
        gc.collect()
        assert gone() is not None
        await anyio.sleep(0.8)  # the next one thawed, collected and froze again
        assert gone() is None
        tg.cancel_scope.cancel()
    assert gc.get_freeze_count() == 0
