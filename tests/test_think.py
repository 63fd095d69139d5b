"""``<think>`` separation (architecture §5, case C03), at every split of the content: a block is
reasoning only when it opens the answer (after optional whitespace); later it is text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.turn.think import ThinkFilter


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


def test_close_tag_split_and_leading_whitespace() -> None:
    assert run([" \n<think>dee", "p</thi", "nk>b"]) == ("b", "deep")
    assert run(["  ", "\n", "<th", "ink>", "r", "</think>", "ok"]) == ("ok", "r")


def test_think_in_the_middle_of_prose_is_text() -> None:
    """The field case: a ``<think>`` mid-answer dropped the rest (34 of 131 characters)."""
    text = (
        "To parse it, write a tag like <think> in the prompt and then close it with </think> "
        "after the plan. That is all you need to know here."
    )
    assert run([text]) == (text, "")
    assert run([text[i : i + 7] for i in range(0, len(text), 7)]) == (text, "")


def test_think_in_code_is_text() -> None:
    text = "```python\nprint('<think>')\n```\nDone."
    assert run(["```py", "thon\nprint('<thi", "nk>')\n```\nDone."]) == (text, "")


def test_only_the_first_block_is_reasoning() -> None:
    assert run(["<think>a</think>Hi <think>b</think>"]) == ("Hi <think>b</think>", "a")


def test_unclosed_opening_block_is_all_reasoning() -> None:
    assert run(["<think>plan", " more <"]) == ("", "plan more <")


def test_visible_text_is_not_held_once_the_answer_started() -> None:
    f = ThinkFilter()
    assert f.feed("Hello <") == ("Hello <", "")
    assert f.feed("think>") == ("think>", "")


def test_lookalike_is_released_at_flush() -> None:
    assert run(["<thin"]) == ("<thin", "")
    assert run([" <thin", "g>"]) == (" <thing>", "")
    assert run(["   "]) == ("   ", "")


def test_nothing_visible_while_inside() -> None:
    f = ThinkFilter()
    assert f.feed("<think>plan") == ("", "plan")
    assert f.feed(" more") == ("", " more")


_piece = st.sampled_from(
    ["<think>", "</think>", "a", "b c", "<", ">", "<th", "ink", "é", "🌍", " ", "\n"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_piece, max_size=30), st.data())
def test_any_split_gives_the_same_result(pieces: list[str], data: st.DataObject) -> None:
    text = "".join(pieces)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert run(deltas) == run([text])
    visible, reasoning = run([text])
    # What a simple reference parser finds: a block at the start (after whitespace) is
    # reasoning, everything else is visible.
    opening = re.match(r"\s*<think>(.*?)(?:</think>|\Z)", text, flags=re.S)
    if opening is None:
        assert (visible, reasoning) == (text, "")
    else:
        assert reasoning == opening[1]
        assert visible == text[opening.end() :]
    assert len(visible) + len(reasoning) <= len(text)
