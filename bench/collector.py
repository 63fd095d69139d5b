"""The cyclic garbage collector's pauses, measured where they happen (``gc.callbacks``): the
scale bench's ``gc ms`` and ``gc max`` columns (bench/README.md "scale")."""

from __future__ import annotations

import gc
import time

__all__ = ["CollectorPauses"]


class CollectorPauses:
    """The cyclic garbage collector's pauses in this process while inside (``gc.callbacks``;
    a collection stops the loop, whichever thread runs it): ``total`` and ``longest`` (wall
    seconds) and ``full``, how many collected the oldest generation (every live object)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.longest = 0.0
        self.full = 0
        self._began = 0.0

    def __enter__(self) -> CollectorPauses:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        pause = time.perf_counter() - self._began
        self.total += pause
        self.longest = max(self.longest, pause)
        self.full += info["generation"] == 2
