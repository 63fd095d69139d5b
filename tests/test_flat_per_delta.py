"""Flat per delta (architecture §4 "Live redaction window"): what one delta costs the reply's
outbound policy does not grow with the text so far. Counted as memory allocated, which does not
depend on the machine's speed: a step that copied the text so far (``emitted += part`` on an
attribute) allocates the whole text again on every release."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

from config.models import PolicyConfig
from orchestrator.policy import OutboundPolicy

_SENTENCE = "the answer is that we can run each step on its own and then compare results. "


def _peak_of(step: Callable[[], object]) -> int:
    """Bytes allocated at the peak of ``step()``, above what was allocated before it."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before


def _peak_per_release(answer_chars: int) -> int:
    """The largest allocation peak of a feed that released text, after an answer of
    ``answer_chars`` characters was fed in 64-character deltas."""
    reply = OutboundPolicy.from_config(PolicyConfig()).new_reply("test", "c1")
    text = _SENTENCE * (answer_chars // len(_SENTENCE))
    released = [reply.feed(text[at : at + 64]) for at in range(0, len(text), 64)]
    assert "".join(released), "the window released nothing: the test would measure no release"
    peaks = []
    out: list[str] = []
    for _ in range(16):
        peak = _peak_of(lambda: out.append(reply.feed(_SENTENCE)))
        if out[-1]:
            peaks.append(peak)
    assert peaks, "no feed released text"
    return max(peaks)


def test_a_release_allocates_no_more_after_a_megabyte_than_after_a_few_kilobytes() -> None:
    small, large = _peak_per_release(16 * 1024), _peak_per_release(1024 * 1024)
    assert large < 32 * 1024, f"a release allocated {large} bytes after 1 MB of text"
    assert large <= small + 4096, (small, large)
