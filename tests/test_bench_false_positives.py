"""bench/false_positives.py's classes of a catalogue match: a placeholder, a credential named by
its URL parameter (masked by design, not a false positive), or a real false positive."""

from __future__ import annotations

import pytest

from bench.false_positives import classify
from orchestrator.policy import Redactor


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # a Codecov badge's graph token: published on purpose, still a credential by its name
        ("[![cov](https://codecov.io/gh/o/r/graph/badge.svg?token=id42cGNZ5Z)]", "named"),
        ("https://api.example.net/v1/feed?access_token=Zq81mPx04LkWd", "named"),
        # the generic key= names no credential: a match there is a false positive to mend
        ("https://maps.example.net/embed?key=Zq81mPx04LkWd9&q=Paris", "real"),
        ("https://user:password@db.internal:5432/app", "placeholder"),
    ],
)
def test_a_match_is_classified_by_what_the_text_says_of_it(text: str, kind: str) -> None:
    hits = list(Redactor().hits(text))
    assert len(hits) == 1, hits
    assert classify(text, hits[0]) == kind
