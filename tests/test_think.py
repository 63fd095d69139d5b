"""``<think>`` separation (DESIGN §5, case C03), at every split of the content."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.think import ThinkFilter


def run(deltas: list[str]) -> tuple[str, str]:
    f = ThinkFilter()
    visible, reasoning = [], []
    for delta in deltas:
        v, r = f.feed(delta)
        visible.append(v)
        reasoning.append(r)
    v, r = f.flush()
    return "".join(visible) + v, "".join(reasoning) + r


def test_tag_split_across_deltas_c03() -> None:
    assert run(["<thi", "nk>x</think>Hi"]) == ("Hi", "x")


def test_close_tag_split_and_text_around() -> None:
    assert run(["a<think>dee", "p</thi", "nk>b"]) == ("ab", "deep")


def test_lookalike_is_released_at_flush() -> None:
    assert run(["x <thin"]) == ("x <thin", "")
    assert run(["x <thin", "g>"]) == ("x <thing>", "")


def test_nothing_visible_while_inside() -> None:
    f = ThinkFilter()
    assert f.feed("<think>plan") == ("", "plan")
    assert f.feed(" more") == ("", " more")


_piece = st.sampled_from(["<think>", "</think>", "a", "b c", "<", ">", "<th", "ink", "é", "🌍"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_piece, max_size=30), st.data())
def test_any_split_gives_the_same_result(pieces: list[str], data: st.DataObject) -> None:
    text = "".join(pieces)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert run(deltas) == run([text])
    visible, reasoning = run([text])
    # Outside-tag text, in order, is what a simple reference parser finds.
    expected_visible = "".join(re.split(r"<think>.*?(?:</think>|$)", text, flags=re.S))
    assert visible == expected_visible
    assert len(visible) + len(reasoning) <= len(text)
