"""The tokens of an ASCII text found by one pattern (architecture §4 "Leak catalogue"): in ASCII
text, :func:`~orchestrator.policy.views.tokens`, :func:`~orchestrator.policy.views.has_tokens` and
the first test of :func:`~orchestrator.policy.views.unwrapped` search one standard-engine pattern
whose alternatives each begin with their first character; they find what trying each token's
patterns where its first character stands finds (the reference below, how they searched before).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.policy.views import (
    _ASCII_INNER_TOKENS,
    _ASCII_TOKEN_LEAD,
    _INNER_DELIMITERS,
    _INNER_LEAD,
    _TOKEN,
    _TOKEN_AT,
    has_tokens,
    tokens,
    unwrapped,
)

# Token syntax whole and cut apart, with the characters around it that decide whether it is one.
_PIECES = (
    *"&\\%![]*~`<>()^#;:/-_ \n\tabcxyzAZ09u",
    "&amp;",
    "&#45;",
    "&#x2d",
    "&lt",
    "&shy;",
    "\\u002d",
    "\\n",
    "%2D",
    "%7",
    "<b>",
    "</b>",
    "<!-- x -->",
    '<a href="x">',
    "](https://x.example/q?a=1&b=2)",
    "![a](b)",
    "[^1]",
    "[x][ref]",
    "**",
    "~~",
    "REDACTED:",
    "[REDACTED:openai_key]",
)
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


def _reference_tokens(text: str, begin: int) -> Iterator[re.Match[str] | regex.Match[str]]:
    """Each token's patterns tried where its first character stands (``_TOKEN_AT``)."""
    lead = _ASCII_TOKEN_LEAD.search(text, begin)
    while lead is not None:
        found = _TOKEN_AT.get(text[lead.start()], _TOKEN).match(text, lead.start())
        if found is None:
            lead = _ASCII_TOKEN_LEAD.search(text, lead.start() + 1)
        else:
            yield found
            lead = _ASCII_TOKEN_LEAD.search(text, found.end())


def _reference_has_tokens(text: str, start: int) -> bool:
    """A character that may begin a token, then a token from there, or emphasis in a word."""
    found = re.compile(r"[&\\%\[\]<]").search(text, start)
    if found is not None and next(_reference_tokens(text, found.start()), None) is not None:
        return True
    return _INNER_DELIMITERS.search(text, start) is not None


@settings(max_examples=1500, deadline=None)
@given(_TEXTS, st.data())
def test_property_an_ascii_texts_tokens_are_those_each_lead_finds(
    text: str, data: st.DataObject
) -> None:
    begin = data.draw(st.integers(0, len(text)))
    expected = [(m.span(), m.group()) for m in _reference_tokens(text, begin)]
    assert [(m.span(), m.group()) for m in tokens(text, begin)] == expected
    assert has_tokens(text, begin) == _reference_has_tokens(text, begin)
    leads = _INNER_LEAD[1].finditer(text, begin)
    inner = any(_TOKEN_AT.get(m[0], _TOKEN).match(text, m.start()) for m in leads)
    assert (_ASCII_INNER_TOKENS.search(text, begin) is not None) == inner
    if not inner:
        assert unwrapped(text, begin) is None


def test_emphasis_html_and_links_are_tokens_where_each_lead_finds_them() -> None:
    text = "sk_live_**51Hq** <b>x</b> a<i>b ![i](u) [t](https://x.example/?a=1&b=2) &amp; %2D"
    expected = [m.group() for m in _reference_tokens(text, 0)]
    assert [m.group() for m in tokens(text, 0)] == expected
    assert "**" in expected and "<i>" in expected and "](https://x.example/?a=1&b=2)" in expected
