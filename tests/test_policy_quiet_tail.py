"""What the live window's scans may leave out (architecture §4 "Live redaction window"): a look
takes a match or a possible secret that starts in the text's last ``PROOF_MARGIN_CHARS``
characters for none (its proof and its ceiling end before them), so its open scans
(``Redactor.open_hits(…, quiet_tail=True)``) do not search a built-in shape let through only by a
keyword's prefix at the end, unless a match reaches into the last ``TAIL_REACH`` characters.
Everything before those characters is what a scan that searches every candidate finds (the
reference): the same matches (their ends cut there) and the same possible secret start.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.policy import Redactor
from orchestrator.policy.catalogue import TAIL_REACH, Hit
from orchestrator.policy.window import PROOF_MARGIN_CHARS
from tests.policy_samples import SAMPLES, texts_with_secrets
from tests.test_policy_view_searches import _MARKUP

REDACTOR = Redactor()

# Keyword prefixes a text may end with (each lets a shape through only as a possible secret at
# the end), glued to what may precede them: a key, a word, a link, an escape.
_TAILS = ("s", "sk", "sk_", "sk_li", "e", "ey", "ghp", "AKI", "xox", "to", "token", "api_k", "1")
_GLUE = (
    "",
    "",
    "",
    " ",
    "_",
    "-",
    ".",
    "=",
    "?",
    "&",
    "A" * 130,
    "](https://x.example/",
    "**",
    "\\",
)


@st.composite
def _texts(draw: st.DrawFn) -> str:
    """Texts with secrets and markup, ending with a keyword prefix glued to what precedes it
    (a secret, cut anywhere in its last 20 characters, among others)."""
    text, _ = draw(texts_with_secrets(max_parts=12))
    for piece in draw(st.lists(st.sampled_from(_MARKUP), max_size=4)):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + piece + text[at:]
    secret = draw(st.sampled_from([""] + [sample for _, sample, _ in SAMPLES]))
    secret = secret[: draw(st.integers(max(0, len(secret) - 20), len(secret)))]
    return text + secret + draw(st.sampled_from(_GLUE)) + draw(st.sampled_from(_TAILS))


def _before_tail(found: tuple[list[Hit], int | None] | None, quiet: int) -> object:
    """What a look reads of ``open_hits``: the matches that start before ``quiet`` (their ends
    cut there) and the possible secret start if it lies before it."""
    assert found is not None
    hits, open_at = found
    return (
        [
            (hit.name, hit.start, min(hit.end, quiet), hit.secret_start, min(hit.secret_end, quiet))
            for hit in hits
            if hit.start < quiet
        ],
        open_at if open_at is not None and open_at < quiet else None,
    )


def test_the_window_reads_nothing_a_quiet_tail_leaves_out() -> None:
    assert PROOF_MARGIN_CHARS >= TAIL_REACH


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts(), st.data())
def test_property_a_quiet_tail_changes_nothing_before_it(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    breaks = sorted(set(data.draw(st.lists(st.integers(start, len(text)), max_size=2))))
    quiet = REDACTOR.open_hits(text, start, breaks=breaks, quiet_tail=True)
    reference = REDACTOR.open_hits(text, start, breaks=breaks)
    edge = len(text) - TAIL_REACH
    assert _before_tail(quiet, edge) == _before_tail(reference, edge)


_PEM_HEAD = "-----BEGIN PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nQXZJVWKY13579"


@pytest.mark.parametrize(
    ("text", "start"),
    [("xapp-1-A0123QXZJ--sk_li", 0), ("see " + _PEM_HEAD + "QXZJVWKY1357===sk_li", 4)],
)
def test_a_secret_that_ends_inside_a_trailing_keyword_prefix_stays_open(
    text: str, start: int
) -> None:
    """A secret whose last characters begin a keyword prefix the text ends with (``…--sk`` +
    ``_li``: the ``sk_live_`` of a Stripe key starts inside a Slack token; a PEM body's
    ``=`` padding + ``sk_li``): the prefix's possible secret runs past the secret's end, so the
    secret is a possible secret start, with a quiet tail too (which then searches the
    prefix's shape after all)."""
    reference = REDACTOR.open_hits(text, 0)
    assert reference == ([], start)
    assert REDACTOR.open_hits(text, 0, quiet_tail=True) == reference


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("see the docs and sk_li![i](https://x.example/abcdefghijklmnop)", 17),
        ("here is the token ghp<b></b><i></i><u></u><s></s>", 18),
    ],
)
def test_a_keyword_prefix_before_markup_the_view_drops_is_a_possible_secret(
    text: str, start: int
) -> None:
    """A keyword prefix followed by an image or inline HTML the decoded view drops: the view
    ends with the prefix, whose raw characters lie before the text's last ones, so it is
    searched there with a quiet tail too."""
    assert REDACTOR.open_hits(text, 0) == ([], start)
    assert REDACTOR.open_hits(text, 0, quiet_tail=True) == ([], start)


def test_every_sample_secret_cut_before_a_trailing_keyword_prefix_reads_as_the_reference() -> None:
    """Each sample secret cut anywhere in its last 20 characters, then a keyword prefix (glued,
    or after ``_``, ``-``, ``=``), from the start and from the secret's second character."""
    differ = []
    for _, secret, _ in SAMPLES:
        for cut in range(max(0, len(secret) - 20), len(secret) + 1):
            for glue in ("", "_", "-", "="):
                for tail in ("sk_li", "sk", "_li", "k_li", "ghp", "ey", "AKI", "tok", "1"):
                    text = "x " + secret[:cut] + glue + tail
                    edge = len(text) - TAIL_REACH
                    for start in (0, 3):
                        quiet = REDACTOR.open_hits(text, start, quiet_tail=True)
                        reference = REDACTOR.open_hits(text, start)
                        if _before_tail(quiet, edge) != _before_tail(reference, edge):
                            differ.append((text, start))
    assert not differ
