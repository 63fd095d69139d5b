"""What the scans that read the views remember (architecture §4 "Live redaction window"): a
view held as runs maps back as per-character lists do, the decoded check of ``held_from`` runs
exactly where ``has_tokens`` says a text holds tokens, and the live window, whose open scans
search the raw text with its memo (``SearchMemo``) when they read the views too, shows after
every call what a window that remembers no search shows, and what a window of the reference
catalogue (searched without leads) shows, one a prefix of the other and in the end the same,
for random texts mixing Markdown links, images, emphasis, HTML, entities, escapes and secrets,
cut into random deltas.
"""

from __future__ import annotations

import bisect

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.policy import Redactor
from orchestrator.policy.views import _pass, has_tokens, normalised, tokens, unwrapped
from orchestrator.policy.window import RedactionWindow
from tests.policy_samples import SAMPLES, texts_with_secrets

REDACTOR = Redactor()
REFERENCE = Redactor(prechecks=False)

# Markup and escapes a reader reads through, whole and cut apart, around and inside secrets.
_MARKUP = (
    "[the guide](https://example.org/guide/v2/migrate?from=1.4&to=2.0)",
    "![img](https://x.example/i.png)",
    "![i](data:x;sk_live_**51HqLyjWDarjtT1zdp7dc**)",
    "[x](https://h.example/?k=sk&#45;ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH)",
    "[postgres](https://db.example/docs)://admin:hunter2hunter2@db.example:5432/app",
    "?](https://x.example/q)api_key=Zx81Qw77Rt55Yu33Io11",
    "<https://grafana.example.net/d/abc123/latency?orgId=1&from=now-6h>",
    "sk-<b>ant</b>-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGG",
    "sk_live_**51HqLyjWDarjtT1zdp7dc**",
    "sk&#45;ant-api03-AAAABBBBCCCCDDDDEEEE",
    "&amp;#45;",
    "%2D",
    "\\u002d",
    "sk\\_live\\_",
    "**",
    "~~",
    "<b>",
    "</b>",
    "&shy;",
    "\u200b",
    "[^1]",
    "[",
    "](",
    "https://",
    ")",
    "`",
)
_PIECES = st.sampled_from(_MARKUP) | st.sampled_from([text for _, text, _ in SAMPLES])


@st.composite
def _marked_up_texts(draw: st.DrawFn) -> str:
    """A text with secrets and prose, with markup and escapes inserted at random places."""
    text, _ = draw(texts_with_secrets(max_parts=24))
    for piece in draw(st.lists(_PIECES, max_size=12)):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + piece + text[at:]
    return text


def _shown(text: str, sizes: list[int], redactor: Redactor, *, remember: bool = True) -> list[str]:
    """What a window has shown after each feed of ``text`` cut into ``sizes`` (cycled), and
    after ``flush`` (``remember``: its looks remember their searches)."""
    window = RedactionWindow(redactor, remember_searches=remember)
    shown = ""
    states: list[str] = []
    pos = index = 0
    while pos < len(text):
        size = sizes[index % len(sizes)]
        index += 1
        shown += window.feed(text[pos : pos + size])
        pos += size
        states.append(shown)
    states.append(shown + window.flush())
    return states


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_marked_up_texts(), st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_property_the_windows_views_show_what_the_reference_shows(
    text: str, sizes: list[int]
) -> None:
    shown = _shown(text, sizes, REDACTOR)
    assert shown == _shown(text, sizes, REDACTOR, remember=False)
    reference = _shown(text, sizes, REFERENCE, remember=False)
    for step, (a, b) in enumerate(zip(shown, reference, strict=True)):
        assert a.startswith(b) or b.startswith(a), (step, a, b)
    assert shown[-1] == reference[-1]


def test_a_secret_behind_link_syntax_is_masked_as_the_text_arrives() -> None:
    """URL-dense text whose links the decoded view drops: a credential that reads as one only
    through the dropped link syntax is masked in every delta size."""
    text = (
        "See [the guide](https://example.org/guide?from=1.4&to=2.0) for details. " * 6
        + "[postgres](https://db.example/docs)://admin:hunter2hunter2@db.example:5432/app "
        + "and more [links](https://x.example/a) after it. " * 6
    )
    for size in (1, 3, 5, 7, 32):
        states = _shown(text, [size], REDACTOR)
        assert states[-1] == REDACTOR.redact(text) == REFERENCE.redact(text)
        assert "[REDACTED:" in states[-1]
        assert not [state for state in states if "hunter2hunter2" in state], size


@settings(max_examples=500, deadline=None)
@given(_marked_up_texts(), st.data())
def test_property_a_view_held_as_runs_maps_back_as_per_character_lists_do(
    text: str, data: st.DataObject
) -> None:
    begin = data.draw(st.integers(0, len(text)))
    positions = st.integers(begin, len(text))
    breaks = sorted(set(data.draw(st.lists(positions, max_size=2))))
    whole = range(len(text)), range(1, len(text) + 1)
    expected, starts, ends = _pass(text, *whole, begin, breaks)
    if next(tokens(expected), None) is not None:
        expected, starts, ends = _pass(expected, starts, ends, 0, ())
    view = normalised(text, begin, breaks)
    assert (view.text, view.starts, view.ends) == (expected, list(starts), list(ends))
    for index in range(len(expected) + 1):
        last = ends[-1] if ends else 0
        assert view.raw_start(index) == (starts[index] if index < len(starts) else last)
        assert view.raw_end(index) == (ends[index - 1] if index else (starts[0] if starts else 0))
    for raw in range(len(text) + 2):
        assert view.view_index(raw) == bisect.bisect_left(starts, raw)
    inner = unwrapped(text, begin)
    if inner is not None:
        assert inner.view_index(len(text)) == bisect.bisect_left(inner.starts, len(text))


@settings(max_examples=500, deadline=None)
@given(_marked_up_texts(), st.data())
def test_property_has_tokens_is_whether_tokens_finds_one(text: str, data: st.DataObject) -> None:
    """``held_from`` decodes a text only where :func:`tokens` finds a token, as it did where
    ``has_tokens`` said so."""
    begin = data.draw(st.integers(0, len(text)))
    assert has_tokens(text, begin) == (next(tokens(text, begin), None) is not None)
