"""The splitter: boundaries, limits in UTF-16 code units, code fences (architecture §3 "Limits")."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from channels.base import ChannelLimits
from orchestrator.delivery.pieces import paragraph_end
from orchestrator.delivery.splitting import (
    Fence,
    find_cut,
    fit_end,
    measure,
    opening_fence,
    scan_fence,
    split_text,
)

CHARS = ChannelLimits(40, "chars")
UTF16 = ChannelLimits(40, "utf16")
_CLOSER = re.compile(r"(`{3,}|~{3,})$")


def unsplit(messages: list[str], text: str) -> bool:
    """True when ``messages`` are ``text`` cut in order, each possibly with a fence closer
    appended and a reopening line prepended (the splitter's only additions)."""

    def match(index: int, pos: int, reopened: bool) -> bool:
        if index == len(messages):
            return pos == len(text)
        message = messages[index]
        heads = [message]
        if reopened and "\n" in message:
            heads.append(message.split("\n", 1)[1])
        for head in heads:
            bodies = [(head, False)]
            closer = _CLOSER.search(head)
            if closer:
                bare = head[: closer.start(1)]
                bodies.append((bare, True))
                if bare.endswith("\n"):
                    bodies.append((bare[:-1], True))
            for body, closed in bodies:
                if text.startswith(body, pos) and match(index + 1, pos + len(body), closed):
                    return True
        return False

    return match(0, 0, False)


def fences_balanced(message: str) -> bool:
    return scan_fence(message, 0, len(message), None) is None


# -- measuring ----------------------------------------------------------------------------


def test_measure_counts_utf16_code_units_and_tolerates_lone_surrogates() -> None:
    assert measure(UTF16, "a😀é") == 4
    assert measure(CHARS, "a😀é") == 3
    assert measure(UTF16, "\ud83d") == 1


def test_fit_end_never_exceeds_the_budget_in_utf16() -> None:
    text = "😀a😀😀b"
    for budget in range(0, 10):
        end = fit_end(UTF16, text, 0, len(text), budget)
        assert measure(UTF16, text[:end]) <= budget
        assert end == len(text) or measure(UTF16, text[: end + 1]) > budget


# -- boundaries ---------------------------------------------------------------------------


def test_prefers_a_paragraph_boundary_and_keeps_its_whitespace() -> None:
    text = "first paragraph here.\n\nsecond one, a bit longer than the limit."
    chunk = find_cut(CHARS, text, 0, len(text), None, 40)
    assert text[: chunk.cut] == "first paragraph here.\n\n"


def test_falls_back_to_a_line_then_a_word_boundary() -> None:
    text = "the first line is right here\nline two continues for quite a while"
    assert (
        text[: find_cut(CHARS, text, 0, len(text), None, 40).cut]
        == "the first line is right here\n"
    )
    words = "alpha beta gamma delta epsilon zeta eta theta iota"
    cut = find_cut(CHARS, words, 0, len(words), None, 40).cut
    assert words[:cut] == "alpha beta gamma delta epsilon zeta eta "


def test_a_boundary_too_early_loses_to_a_later_weaker_one() -> None:
    text = "tiny\n\n" + "word " * 20
    cut = find_cut(CHARS, text, 0, len(text), None, 40).cut
    assert cut > 20 and text[:cut].endswith(" ")


def test_hard_cut_never_splits_a_surrogate_pair_or_an_emoji_sequence() -> None:
    text = "😀" * 30
    messages = split_text(UTF16, text)
    assert all(measure(UTF16, m) <= 40 for m in messages)
    assert "".join(messages) == text
    family = "a" * 38 + "👩\u200d👩\u200d👧"
    first = split_text(UTF16, family)[0]
    assert first == "a" * 38
    accent = "a" * 39 + "e\u0301x"
    assert split_text(CHARS, accent)[0] == "a" * 39


# -- fences -------------------------------------------------------------------------------


def test_opening_fence_recognises_backticks_tildes_and_info_strings() -> None:
    assert opening_fence("```python") == Fence("```python", "```")
    assert opening_fence("  ~~~~") == Fence("~~~~", "~~~~")
    assert opening_fence("``` a`b") is None
    assert opening_fence("``") is None
    assert Fence("```", "```").closes("````")
    assert not Fence("````", "````").closes("```")


def test_a_cut_inside_a_fence_closes_it_and_reopens_it_with_its_info_string() -> None:
    code = "```py\n" + "".join(f"x{i} = {i}\n" for i in range(12)) + "```\nafter"
    messages = split_text(CHARS, code)
    assert len(messages) > 1
    assert all(fences_balanced(m) for m in messages)
    assert all(m.startswith("```py\n") for m in messages[1:-1])
    assert all(measure(CHARS, m) <= 40 for m in messages)
    assert unsplit(messages, code)


def test_a_message_never_ends_with_an_empty_code_block() -> None:
    text = "some words before the code.\n```py\nprint('hello world')\n```"
    messages = split_text(CHARS, text)
    assert not messages[0].rstrip().endswith("```py\n```")
    assert messages[0] == "some words before the code.\n"


def test_paragraph_end_ignores_blank_lines_inside_fences() -> None:
    text = "```\na\n\nb\n```\n\nnext"
    assert paragraph_end(text, 0, None) == (text.index("```\n\nnext") + 3, len(text) - 4)
    assert paragraph_end("no break yet\n", 0, None) is None
    assert paragraph_end("\n\n\npara\n\n", 0, None) == (7, 9)


# -- properties ---------------------------------------------------------------------------

_ALPHABET = st.sampled_from(["a", "b", " ", "\n", "\n\n", "```", "```py\n", "😀", "é", "\u0301"])


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(_ALPHABET, max_size=120),
    room=st.integers(min_value=16, max_value=60),
    unit=st.sampled_from(["utf16", "chars"]),
)
def test_split_text_fits_balances_and_rebuilds_exactly(
    parts: list[str], room: int, unit: str
) -> None:
    limits = ChannelLimits(room, unit)  # type: ignore[arg-type]
    text = "".join(parts)
    messages = split_text(limits, text)
    assert all(measure(limits, m) <= room for m in messages)
    assert all(fences_balanced(m) for m in messages[:-1])
    assert unsplit(messages, text)
    assert not text or messages
