"""Process-wide settings of a running relaybot: the event loop, the cyclic garbage collector, and
SIGHUP until the daemon watches it (:func:`hold_hangups`).

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

The heap a started daemon holds for good (modules, classes, functions, the config, the channel
libraries: about 175,000 objects with python-telegram-bot, discord.py and matrix-nio imported)
was walked by every full collection: about 50-110 ms with the loop stopped, every answer's edits
late by as much, whatever the load. Once started, the daemon moves it into the collector's
permanent generation (``gc.freeze``, after a full collection), which collections do not walk
(:func:`refreeze`): a full collection then walks what the answers in flight hold. What was
frozen is still freed when its last reference goes; only garbage in reference cycles among it
(a channel restarted after a failure, the parts a reload replaced) would stay, so the heap is
thawed, collected and frozen again after every reload and every :data:`REFREEZE_SECS`
(:func:`keep_frozen`): one full collection an hour.
"""

from __future__ import annotations

import gc
import importlib.util
import signal

import anyio

__all__ = [
    "GC_YOUNG_THRESHOLD",
    "REFREEZE_SECS",
    "hold_hangups",
    "keep_frozen",
    "loop_options",
    "refreeze",
    "take_held_hangup",
    "tune_collector",
]

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


REFREEZE_SECS = 3600.0
"""Seconds between two thaws of the frozen heap (:func:`keep_frozen`): garbage in reference
cycles among what was frozen is freed within this time."""


def refreeze() -> int:
    """Thaw the permanent generation, collect every generation, and freeze what is left
    (``gc.unfreeze``, ``gc.collect``, ``gc.freeze``): one full collection's pause. Returns how
    many objects are frozen."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


async def keep_frozen(every: float = REFREEZE_SECS) -> None:
    """:func:`refreeze` now and every ``every`` seconds, until cancelled; then thaw (a daemon
    run inside another program leaves the collector as it found it)."""
    try:
        while True:
            refreeze()
            await anyio.sleep(every)
    finally:
        gc.unfreeze()


_held_hangups: list[int] = []


def hold_hangups() -> None:
    """From now until the daemon watches SIGHUP itself, a SIGHUP is kept, not the process's end
    (its default action): ``relaybot run`` calls it first (:mod:`orchestrator.entry`, before
    the program is imported), since importing, reading the config and starting take a second or
    more (a terminal closed then, a ``systemctl reload`` right after the start).
    :func:`take_held_hangup` tells the watcher whether one came. Main thread only; a second
    call while held changes nothing."""
    if signal.getsignal(signal.SIGHUP) is not _hold:
        signal.signal(signal.SIGHUP, _hold)


def _hold(signum: int, frame: object) -> None:
    _held_hangups.append(signum)


def take_held_hangup() -> bool:
    """Whether a SIGHUP came while held (:func:`hold_hangups`); forgets it."""
    came = bool(_held_hangups)
    _held_hangups.clear()
    return came
