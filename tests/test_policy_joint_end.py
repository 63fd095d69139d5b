"""Where a joint may end (architecture §4 "What the reader sees is what is checked"): the
pre-check of :func:`~orchestrator.policy.joints.joined`, led by one class of line breaks and
quotes, finds a match exactly where the alternation it stands for does (a line break and the
next line's indentation and quote prefix, or a closing quote, then a key-like run)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.policy.joints import _JOINT_END, _KEY_LIKE

_ALTERNATION = re.compile(rf"(?:[\n\r\x0b\x0c\x85\u2028\u2029][ \t>]*|[\"'`]){_KEY_LIKE}")
_PIECES = (*"\n\r\"'` \t>abcXYZ0189_+/=-.\u2028\x85", "\r\n", "AAAA1111", "abcdefghijklmnopqr")
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=24).map("".join)


@settings(max_examples=2000, deadline=None)
@given(_TEXTS, st.data())
def test_property_the_joint_end_pre_check_matches_where_the_alternation_does(
    text: str, data: st.DataObject
) -> None:
    pos = data.draw(st.integers(0, len(text)))
    found, expected = _JOINT_END.search(text, pos), _ALTERNATION.search(text, pos)
    assert (found and found.start()) == (expected and expected.start())


def test_indentation_counts_only_after_a_line_break() -> None:
    assert _JOINT_END.search("x\n  > AAAA1111") is not None
    assert _JOINT_END.search('x"AAAA1111') is not None
    assert _JOINT_END.search('x" AAAA1111') is None
    assert _JOINT_END.search("x AAAA1111") is None
