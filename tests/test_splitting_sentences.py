"""Sentence ends as cut points, after paragraph and line boundaries and before word boundaries
(architecture §3 "Limits"): ``. ! ?`` followed by a space, and ``。！？`` with no space."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from channels.base import ChannelLimits
from orchestrator.delivery.splitting import MIN_FILL, find_cut, fit_end, measure, split_text

TELEGRAM = ChannelLimits(4096, "utf16")
_CJK_ENDS = "。！？"


def chinese_text(length: int, seed: int = 7) -> str:
    """``length`` Chinese characters, a ``。`` (sometimes ``！``/``？``) every 70–90."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < length:
        sentence = [chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(rng.randrange(69, 90))]
        out.extend(sentence)
        out.append(rng.choice("。。。！？"))
    return "".join(out[:length])


def sentence_ends(text: str) -> set[int]:
    """Offsets just after a sentence end: after ``。！？``, or after ``. ! ?`` and its spaces."""
    ends = set()
    for i, ch in enumerate(text):
        if ch in _CJK_ENDS:
            j = i + 1
            while j < len(text) and text[j] == " ":
                j += 1
            ends.add(j)
        elif ch in ".!?" and i + 1 < len(text) and text[i + 1] == " ":
            j = i + 1
            while j < len(text) and text[j] == " ":
                j += 1
            ends.add(j)
    return ends


def test_six_thousand_chinese_characters_are_cut_after_a_full_stop() -> None:
    text = chinese_text(6000)
    messages = split_text(TELEGRAM, text)
    assert len(messages) == 2
    assert "".join(messages) == text
    assert all(measure(TELEGRAM, m) <= 4096 for m in messages)
    assert messages[0][-1] in _CJK_ENDS
    assert 4096 - 91 <= len(messages[0]) < 4096  # the last sentence end before the limit


def test_a_sentence_end_beats_a_word_boundary_and_loses_to_a_line() -> None:
    limits = ChannelLimits(40, "chars")
    text = "One short sentence. And a second one that runs on and on"
    cut = find_cut(limits, text, 0, len(text), None, 40).cut
    assert text[:cut] == "One short sentence. "
    text = "A line without an end\nthen. More words follow here"
    cut = find_cut(limits, text, 0, len(text), None, 40).cut
    assert text[:cut] == "A line without an end\n"
    text = "Is it? Yes! It is so true. 3.14 is pi and so on forever"
    cut = find_cut(limits, text, 0, len(text), None, 40).cut
    assert text[:cut] == "Is it? Yes! It is so true. "  # "3.14 " is no sentence end


def test_a_closing_quote_stays_with_its_sentence() -> None:
    limits = ChannelLimits(30, "chars")
    text = "他说：“好的。”然后" + "很" * 40
    cut = find_cut(limits, text, 0, len(text), None, 30).cut
    assert text[:cut] == "他说：“好的。”"


_CJK_SENTENCE = st.builds(
    lambda body, end: body + end,
    st.text(st.sampled_from("中文字句话😀"), min_size=1, max_size=30),
    st.sampled_from(["。", "！", "？", ""]),
)
_LATIN_SENTENCE = st.builds(
    lambda words, end: " ".join(words) + end,
    st.lists(st.sampled_from(["alpha", "be", "gamma", "d😀"]), min_size=1, max_size=8),
    st.sampled_from([". ", "! ", "? ", " "]),
)


def _check_split(limits: ChannelLimits, text: str, *, words: bool) -> None:
    messages = split_text(limits, text)
    assert "".join(messages) == text  # no fence, no line: exactly the text
    assert all(measure(limits, m) <= limits.max_length for m in messages)
    ends = sentence_ends(text)
    start = 0
    for message in messages[:-1]:
        cut = start + len(message)
        e_max = fit_end(limits, text, start, len(text), limits.max_length)
        window = {e for e in ends if start < e <= e_max}
        if words:  # a word boundary may win only when every sentence end is too early
            window = {e for e in window if e - start >= MIN_FILL * (e_max - start)}
        if window:
            assert cut in ends, f"cut at {cut} inside a sentence: {message[-12:]!r}"
        start = cut


@settings(max_examples=200, deadline=None)
@given(
    sentences=st.lists(_CJK_SENTENCE, min_size=1, max_size=40),
    room=st.integers(min_value=8, max_value=80),
    unit=st.sampled_from(["utf16", "chars"]),
)
def test_cjk_text_is_cut_after_a_sentence_end_whenever_the_window_holds_one(
    sentences: list[str], room: int, unit: str
) -> None:
    _check_split(ChannelLimits(room, unit), "".join(sentences), words=False)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    sentences=st.lists(st.one_of(_LATIN_SENTENCE, _CJK_SENTENCE), min_size=1, max_size=30),
    room=st.integers(min_value=12, max_value=80),
    unit=st.sampled_from(["utf16", "chars"]),
)
def test_mixed_text_prefers_sentence_ends_to_word_boundaries(
    sentences: list[str], room: int, unit: str
) -> None:
    _check_split(ChannelLimits(room, unit), "".join(sentences), words=True)  # type: ignore[arg-type]
