"""The live window's proofs (architecture §4 "Live redaction window"; ``hits.Proof``): a look
whose ceiling lies within what an earlier look's scan proved settled cuts its output from that
proof, and a scan starts where the proof ends. The contract: after every call, what the window
has shown and what a window that scans the whole held text at every look has shown
(``reuse_proofs=False``) are one a prefix of the other, and in the end the same, for random
texts with every secret shape and every form a reader decodes, cut into random deltas, with
round ends and failed attempts. (That no state shows part of a secret is the window's own
property, run through ``ReplyPolicy``, whose window reuses proofs.)
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.policy import Redactor, SecretShape
from orchestrator.policy.hits import Hit, Proof
from orchestrator.policy.window import (
    HOLDBACK_BYTES,
    PROOF_MARGIN_CHARS,
    RESCAN_BYTES,
    SCAN_STEP_CHARS,
    RedactionWindow,
)
from tests.policy_samples import SAMPLES, texts_with_secrets

REDACTOR = Redactor()
# Forms the views read through (entities, escapes, links, emphasis, wraps), as raw text.
_FORMS = [text for _, text, _ in SAMPLES] + [
    "see https://example.org/a/b?page=2&sort=up#x and [docs](https://x.example/y) ",
    "sk_live_**51HqLyjWDarjtT1zdp7dc**",
    "    key = 'sk-ant-api03-AAAABBBBCCCC'\n        'DDDDEEEEFFFFGGGG1234'\n",
    "the key sk-ant-api0",
    "Bearer ",
    "token=",
    "ghp_",
]

Ops = list[tuple[str, str]]


@st.composite
def _scripts(draw: st.DrawFn) -> Ops:
    """Calls on a window: feeds of random sizes, round ends, failed attempts rolled back."""
    text, _ = draw(texts_with_secrets())
    forms = draw(st.lists(st.sampled_from(_FORMS), max_size=6))
    for form in forms:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + form + text[at:]
    sizes = draw(st.lists(st.integers(1, 48), min_size=1, max_size=30))
    ops: Ops = [("begin", "")]
    pos = index = 0
    while pos < len(text):
        size = sizes[index % len(sizes)]
        index += 1
        ops.append(("feed", text[pos : pos + size]))
        pos += size
        roll = draw(st.integers(0, 29))
        if roll == 0:
            ops += [("release", ""), ("begin", "")]
        elif roll == 1:
            junk, _ = draw(texts_with_secrets(max_parts=4))
            ops += [("checkpoint", ""), ("feed", junk), ("rollback", "")]
    return ops


def _replay(ops: Ops, *, reuse_proofs: bool, redactor: Redactor = REDACTOR) -> list[str]:
    """What the window has shown after each call of ``ops`` and after ``flush`` (what a
    rolled-back attempt showed is taken back with it)."""
    window = RedactionWindow(redactor, reuse_proofs=reuse_proofs)
    saved, saved_shown = window.checkpoint(), ""
    shown = ""
    states: list[str] = []
    for op, arg in ops:
        if op == "feed":
            shown += window.feed(arg)
        elif op == "release":
            shown += window.release()
        elif op == "begin":
            saved, saved_shown = window.begin_round(), shown
        elif op == "checkpoint":
            saved, saved_shown = window.checkpoint(), shown
        elif op == "rollback":
            window.rollback(saved)
            shown = saved_shown
        states.append(shown)
    states.append(shown + window.flush())
    return states


def _agree(reused: list[str], scanned: list[str]) -> None:
    """After every call one window has shown a prefix of what the other has (a proof may end
    a look at another possible secret start than a fresh scan: both are held), and at the
    end the same text."""
    for step, (a, b) in enumerate(zip(reused, scanned, strict=True)):
        assert a.startswith(b) or b.startswith(a), (step, a, b)
    assert reused[-1] == scanned[-1]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scripts())
def test_property_proofs_change_no_output(ops: Ops) -> None:
    _agree(_replay(ops, reuse_proofs=True), _replay(ops, reuse_proofs=False))


def test_long_answers_in_small_deltas_emit_as_scanning_at_every_look_does() -> None:
    """Long texts (several prunes of the window's front) in model-sized deltas: every feed
    returns the same with and without proofs, and the pieces join to the redaction."""
    rng = random.Random(35)
    parts = [*_FORMS, "plain prose, with a list:\n- one\n- two ", "日本語のテキスト。", "\n\n"]
    for _ in range(40):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(20, 300)))
        ops: Ops = [("begin", "")]
        pos = 0
        while pos < len(text):
            step = rng.randint(3, 6)
            ops.append(("feed", text[pos : pos + step]))
            pos += step
        reused = _replay(ops, reuse_proofs=True)
        _agree(reused, _replay(ops, reuse_proofs=False))
        assert reused[-1] == REDACTOR.redact(text)


def test_a_proof_ends_before_a_possible_secret_and_before_the_first_match() -> None:
    hit = Hit("openai_key", 10, 40, 10, 40)
    assert Proof.of([], None, 100) == Proof(None, 100)
    assert Proof.of([], 50, 100) == Proof(50, 50)
    assert Proof.of([hit], None, 100) == Proof(None, 10)  # a match may still grow
    assert Proof.of([hit], 5, 100) == Proof(5, 5)


def test_a_catalogue_with_keywords_far_into_a_match_scans_at_every_look() -> None:
    """A shape whose keyword may stand anywhere in its match is not recognised from its first
    character, so what a scan settled might later become part of a secret: no proof is kept,
    and the holdback guards it as before."""
    late = SecretShape("late", r"[a-z]{20,40}-KEY", ("-KEY",))
    assert not Redactor((late,)).prefix_closed
    assert Redactor().prefix_closed and Redactor((SecretShape("x", "zz[0-9]{8}"),)).prefix_closed
    text = "some words first " * 12 + "abcdefghijklmnopqrstuvwxyzabcd-KEY and after " * 3
    ops: Ops = [("feed", text[i : i + 5]) for i in range(0, len(text), 5)]
    redactor = Redactor((late,))
    reused = _replay(ops, reuse_proofs=True, redactor=redactor)
    assert reused == _replay(ops, reuse_proofs=False, redactor=redactor)
    assert reused[-1] == redactor.redact(text)
    assert not [state for state in reused if "abcdefghij" in state]


def test_a_key_whose_start_reads_as_one_only_once_more_text_arrives_is_held() -> None:
    """``sk_live_**`` at the end of a look's text is no possible secret yet (emphasis needs a
    letter after it), but ``sk_live_**51Hq…`` reads as ``sk_live_51Hq…``: a proof holds only
    up to 32 characters before the end of the text it scanned, and the next scan starts there,
    so the key is found whole."""
    head = "plain words, nothing to see here. " * 6 + "the key is sk_live_**"
    rest = "51HqLyjWDarjtT1zdp7dc** and then" + " some more words to push it out" * 8
    ops: Ops = [("feed", head)] + [("feed", rest[i : i + 3]) for i in range(0, len(rest), 3)]
    reused = _replay(ops, reuse_proofs=True)
    assert not [state for state in reused if "sk_live_" in state or "51HqLy" in state]
    assert reused[-1] == REDACTOR.redact(head + rest)


def test_a_key_split_by_emphasis_inside_an_image_url_is_masked_by_every_window() -> None:
    """The decoded view drops an image (``![alt](url)``) whole, so ``sk_live_**51…**`` inside its
    URL was read by no view of a scan from before the image: ``redact`` and a look reusing such a
    scan's proof showed it, while a scan whose views began inside the URL (no image syntax left)
    masked it (hypothesis' saved example, minimised). The tokens inside such markup are read
    through too, so every look and ``redact`` mask it alike."""
    image = "![img](data:image/png;base64,iVBORw0KGgo==sk_live_**51HqLyjWDarjtT1zdp7dc**)"
    assert REDACTOR.redact(image) == (
        "![img](data:image/png;base64,iVBORw0KGgo==[REDACTED:stripe_key]**)"
    )
    # the same for any token the markup holds, in any markup dropped whole
    link = "[x](https://h.example/?k=sk&#45;ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH) ok"
    assert REDACTOR.redact(link) == "[x](https://h.example/?k=[REDACTED:anthropic_key]) ok"
    text = "plain words, nothing to see here. " * 6 + image + " and then some more words" * 8
    for step in (3, 5, 7, 11):
        ops: Ops = [("begin", "")] + [
            ("feed", text[i : i + step]) for i in range(0, len(text), step)
        ]
        reused = _replay(ops, reuse_proofs=True)
        assert not [state for state in reused if "51HqLy" in state], step
        _agree(reused, _replay(ops, reuse_proofs=False))
        assert reused[-1] == REDACTOR.redact(text)


def test_a_delimiter_run_at_the_end_is_held_with_what_follows_it() -> None:
    """``sk-**`` at the end of the text, or before markup still open (an image whose URL has
    not closed), read as no key start: the run stayed in the views, where it breaks the key.
    Once the next word character (or the image's close) arrives the run vanishes and ``sk-``
    joins what follows; a proof kept from before showed the key (fuzzed, minimised). The run is
    held like a token begun at the end, so ``sk-`` stays a possible secret start."""
    assert REDACTOR.open_hits("hello world sk-**", 0) == ([], 12)
    assert REDACTOR.open_hits("x sk-**\u200b![a](https://x.y/bb", 0) == ([], 2)
    text = (
        "lead words " * 8
        + "[^ncccccccccccccccccccc]`%20sk-**\u200b![a](https://x.y/"
        + "b" * 30
        + ")s3cr3tVALUE1234567890 "
        + " tail words" * 8
    )
    for step in (1, 3, 5):
        ops: Ops = [("begin", "")] + [
            ("feed", text[i : i + step]) for i in range(0, len(text), step)
        ]
        reused = _replay(ops, reuse_proofs=True)
        assert not [state for state in reused if "s3cr3t" in state], step
        _agree(reused, _replay(ops, reuse_proofs=False))
        assert reused[-1] == REDACTOR.redact(text)


def _prose_fed_in_model_deltas(window: RedactionWindow, text: str) -> list[int]:
    """Feed ``text`` in deltas of 3-6 characters; how many characters were held after each."""
    rng = random.Random(7)
    held: list[int] = []
    fed = shown = 0
    while fed < len(text):
        step = rng.randint(3, 6)
        shown += len(window.feed(text[fed : fed + step]))
        fed = min(len(text), fed + step)
        held.append(fed - shown)
    return held


_PROSE = "".join(
    f"Step {i}: restart the replica, then compare the latency of both regions. " for i in range(900)
)


def test_a_look_scans_only_once_its_ceiling_passed_the_proof_by_the_scan_step() -> None:
    """A scan's cost is mostly fixed, so a look whose ceiling passed the last proof by fewer than
    SCAN_STEP_CHARS emits up to the proof instead: a scan covers the holdback less the proof's
    margin plus the step (~160 characters of prose), not the ~100 of a scan at every look past
    the proof; and the text held meanwhile grows by the step at most."""
    window = RedactionWindow(REDACTOR)
    held = _prose_fed_in_model_deltas(window, _PROSE)
    stride = HOLDBACK_BYTES - PROOF_MARGIN_CHARS + SCAN_STEP_CHARS
    assert 0 < window.scans <= len(_PROSE) // stride + 2, (window.scans, len(_PROSE) // stride)
    assert max(held) <= HOLDBACK_BYTES + SCAN_STEP_CHARS + RESCAN_BYTES + 6, max(held)
    assert max(held) > HOLDBACK_BYTES + RESCAN_BYTES + 6  # a look emitted up to a proof
    assert window.flush() == _PROSE[len(_PROSE) - held[-1] :]


def test_a_look_after_a_larger_feed_scans_at_once() -> None:
    """A write's worth of text fed in one piece (the round's sink, once per write) is shown but
    for the holdback, even where its ceiling passed the last proof by less than the scan step:
    only a caller that feeds each delta waits for the step."""
    window = RedactionWindow(REDACTOR)
    shown = window.feed(_PROSE[:300])
    step = SCAN_STEP_CHARS + 6  # every other feed's ceiling passes the proof by 2 x 6 + 32 < 64
    for end in range(300 + step, 3000, step):
        shown += window.feed(_PROSE[end - step : end])
        assert len(shown) == end - HOLDBACK_BYTES, (end, len(shown))
    assert window.scans >= (3000 - 300) // step // 2
