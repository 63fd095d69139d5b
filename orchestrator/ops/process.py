"""Process-wide settings of a running relaybot: the event loop and the cyclic garbage collector.

Theory of operation
-------------------
The loop is uvloop when it is installed (``relaybot[fast]``): a cheaper loop per received
read (bench/README.md); asyncio's own otherwise.

The collector: CPython collects its youngest generation after every 700 net allocations of
container objects, and the whole heap after ten collections of the middle one once the objects
surviving since the last full collection are a quarter of those it kept. A streaming reply
allocates a few objects per delta that die by reference counting within the read, while its
state (a few hundred objects per reply) lives as long as the reply. With hundreds of replies
streaming, the young collections come every few milliseconds and walk mostly short-lived
objects, and a full collection walks every live object with the loop stopped: 30-80 ms at 500
conversations (about 250,000 objects). :data:`GC_YOUNG_THRESHOLD` (ten times CPython's
default) makes young collections ten times rarer; in the scale benchmark at 500 conversations
the time spent collecting halved and full collections became rarer (none in most runs; one of
85-130 ms in some: bench/README.md). Garbage in reference cycles waits at most that many more
allocations.
"""

from __future__ import annotations

import gc
import importlib.util

__all__ = ["GC_YOUNG_THRESHOLD", "loop_options", "tune_collector"]

GC_YOUNG_THRESHOLD = 7000
"""Net allocations of container objects between two collections of the youngest generation
(CPython's default: 700); the older generations keep CPython's thresholds."""


def loop_options() -> dict[str, bool]:
    """anyio's ``backend_options`` for ``anyio.run``: uvloop when installed."""
    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


def tune_collector() -> None:
    """Set the collector's thresholds for a long-running, streaming process (see above)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
