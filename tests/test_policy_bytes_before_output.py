"""``bytes_before_output`` (architecture §5 "Read pacing"): how many bytes the live redaction
window and the reply policy can take and still emit nothing, the bound by which the round's
sink leaves delivery asleep. A lower bound: text shorter than it, fed in any pieces, after any
history of feeds, round ends and restarts, emits nothing; and it is not idle (text of that
length does emit, once the holdback is passed)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.policy import Redactor, ReplyPolicy
from orchestrator.policy.window import HOLDBACK_BYTES, RESCAN_BYTES, RedactionWindow
from tests.policy_samples import texts_with_secrets

REDACTOR = Redactor()


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _pieces(text: str, sizes: list[int]) -> list[str]:
    out, pos, i = [], 0, 0
    while pos < len(text):
        out.append(text[pos : pos + sizes[i % len(sizes)]])
        pos += sizes[i % len(sizes)]
        i += 1
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=texts_with_secrets(),
    more=st.text(st.characters(codec="utf-8"), min_size=1, max_size=400),
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=8),
    ops=st.lists(st.sampled_from(["feed", "end_round", "restart"]), min_size=1, max_size=6),
)
def test_text_shorter_than_the_bound_emits_nothing(
    history: tuple[str, object],
    more: str,
    sizes: list[int],
    ops: list[str],
) -> None:
    policy = ReplyPolicy()
    policy.begin_round()
    text = history[0]
    parts = _pieces(text, sizes)
    for op, part in zip(ops * (len(parts) // len(ops) + 1), parts, strict=False):
        policy.feed(part)
        if op == "end_round":
            policy.end_round()
            policy.begin_round()
        elif op == "restart":
            policy.restart()
    bound = policy.bytes_before_output()
    below = ""
    for char in more:
        if _utf8(below + char) >= bound:
            break
        below += char
    assert all(policy.feed(piece) == "" for piece in _pieces(below, sizes))


def test_the_bound_is_reached_by_text_that_does_show() -> None:
    # a fresh window: the holdback and one look's bytes; the text then shows
    window = RedactionWindow(REDACTOR)
    bound = window.bytes_before_output()
    assert bound == HOLDBACK_BYTES + 1
    assert window.feed("word " * ((bound + RESCAN_BYTES) // 5 + 1)) != ""
    # after a look: the next look's bytes, however much the holdback is passed
    window.feed("more words " * 20)
    assert 0 < window.bytes_before_output() <= RESCAN_BYTES
