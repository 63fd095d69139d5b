"""The incremental transcript: whatever is settled or rebased, it reads as the plain string it
models (architecture §3: delivery cost per delta flat with the answer, without changing the
text)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.delivery.planning import PARAGRAPH_BREAK, Transcript

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.text(alphabet="ab \n😀", max_size=8)),
        st.tuples(st.just("settle"), st.integers(0, 80)),
        st.tuples(st.just("rebase"), st.integers(0, 80)),
        st.tuples(st.just("end_round"), st.none()),
        st.tuples(st.just("restart"), st.none()),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_OPS, st.integers(0, 80))
def test_the_transcript_reads_as_its_model(ops: list[tuple[str, object]], probe: int) -> None:
    transcript = Transcript()
    text, round_start, due, has_separator = "", 0, False, False
    for op, arg in ops:
        if op == "append" and isinstance(arg, str) and arg:
            appended = (PARAGRAPH_BREAK if due and text else "") + arg
            due = False
            text += appended
            assert transcript.append(arg) == appended
        elif op == "settle" and isinstance(arg, int):
            transcript.settle(arg)
        elif op == "rebase" and isinstance(arg, int):
            transcript.rebase(min(arg, len(text)))
        elif op == "end_round":
            transcript.end_round()
            round_start, due, has_separator = len(text), True, True
        elif op == "restart":
            transcript.restart()
            text, due = text[:round_start], has_separator
        assert transcript.length == len(text)
        assert transcript.text == text
        assert transcript.round_start == round_start
        start = min(probe, len(text))
        assert transcript.tail(start) == text[start:]
        assert transcript.tail(max(transcript.base, start)) == text[max(transcript.base, start) :]
