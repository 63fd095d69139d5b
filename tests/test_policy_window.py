"""The live redaction window (architecture §4): holdback, rescans, runs, rounds, restarts, memory.

The two hypothesis properties are the contract: for random texts mixing prose, multibyte text,
negatives and every secret shape, cut into random deltas with random round ends and failed
attempts, (a) the pieces join to ``redact(full)`` and every emitted prefix is a prefix of it,
(b) no state a user could see holds any 5-character window of a planted secret.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.policy import Redactor, ReplyPolicy
from orchestrator.policy.searches import SearchMemo
from orchestrator.policy.window import (
    HOLDBACK_BYTES,
    RESCAN_BYTES,
    RUN_LIMIT_BYTES,
    RedactionWindow,
)
from tests.policy_samples import SAMPLES, Planted, texts_with_secrets, windows

REDACTOR = Redactor()
C18 = ["key: sk-ant-api03-", "AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH", "IIIIJJJJ done"]
C18_KEY = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"


def _feed_all(window: RedactionWindow, deltas: list[str]) -> list[str]:
    return [window.feed(delta) for delta in deltas]


def test_c18_the_key_split_across_deltas_never_shows() -> None:
    window = RedactionWindow(REDACTOR)
    pieces = _feed_all(window, C18)
    pieces.append(window.flush())
    shown = ""
    for piece in pieces:
        shown += piece
        assert "sk-" not in shown
        assert not any(w in shown for w in windows(C18_KEY))
    assert shown == "key: [REDACTED:anthropic_key] done"


def test_base64_padding_arriving_in_the_next_delta_is_masked_with_the_token() -> None:
    window = RedactionWindow(REDACTOR)
    deltas = ["curl -H 'Authorization: Bearer dGhpcyBpcyBhIHNlY3JldCB0b2tlbg", "==", "' now\n"]
    deltas += ["and then some more words follow here " * 6]
    pieces = [*_feed_all(window, deltas), window.flush()]
    assert all("=" not in piece and "dGhp" not in piece for piece in pieces)
    assert "".join(pieces).startswith("curl -H 'Authorization: Bearer [REDACTED:bearer]' now\n")


def test_the_last_128_bytes_are_held_back() -> None:
    window = RedactionWindow(REDACTOR)
    text = "word " * 60
    assert window.feed(text) == text[: len(text) - HOLDBACK_BYTES]
    assert window.held == text[-HOLDBACK_BYTES:]


def test_the_holdback_counts_bytes_and_never_splits_a_code_point() -> None:
    window = RedactionWindow(REDACTOR)
    text = "日本 " * 100  # 7 bytes per repetition, spaces so no run is held
    emitted = window.feed(text)
    held = window.held
    assert emitted + held == text
    assert HOLDBACK_BYTES <= len(held.encode()) < HOLDBACK_BYTES + 3


def test_the_window_looks_again_only_every_32_bytes() -> None:
    window = RedactionWindow(REDACTOR)
    fed_since = 0
    emissions = 0
    for char in "abc de " * 200:
        fed_since += len(char.encode())
        if window.feed(char):
            assert fed_since >= RESCAN_BYTES
            fed_since = 0
            emissions += 1
    assert emissions > 20


def test_a_run_without_whitespace_is_held_until_it_ends() -> None:
    window = RedactionWindow(REDACTOR)
    shown = window.feed("The path is ")
    for _ in range(20):
        shown += window.feed("segment/")
        assert "seg" not in shown  # a long token: held whole while it grows
    assert shown == "The path is "
    shown += window.feed(" and that is all there is to say about it today, friends. " * 3)
    assert shown.startswith("The path is " + "segment/" * 20 + " and")


def test_text_without_spaces_arrives_line_by_line_or_every_4_kb() -> None:
    window = RedactionWindow(REDACTOR)
    line = "日本語のテキストです。" * 10  # 330 bytes, no whitespace
    assert window.feed(line) == ""
    emitted = window.feed("\n" + "次の行も空白がありません。" * 5)
    assert emitted == line + "\n"
    # One endless line: released in blocks of about 4 KB.
    window = RedactionWindow(REDACTOR)
    outputs = [window.feed("語" * 10) for _ in range(1000)]  # 30 KB without a break
    sizes = [len(out.encode()) for out in outputs if out]
    assert len(sizes) >= 6
    assert all(RUN_LIMIT_BYTES - HOLDBACK_BYTES - 32 <= size <= RUN_LIMIT_BYTES for size in sizes)


def test_the_end_of_a_round_releases_all_but_a_possible_secret_start() -> None:
    window = RedactionWindow(REDACTOR)
    window.feed("Let me check the time:")
    assert window.release() == "Let me check the time:"
    window = RedactionWindow(REDACTOR)
    window.feed("the key is AKIAABCDEFGH")
    assert window.release() == "the key is "
    assert window.held == "AKIAABCDEFGH"
    window.feed("IJKLMNOP and more")
    assert window.flush() == "[REDACTED:aws_access_key] and more"


def test_a_long_private_key_is_held_whole_and_released_masked() -> None:
    window = RedactionWindow(REDACTOR)
    body = "\n".join(
        "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi" + str(i % 10) * 25 for i in range(80)
    )
    text = f"Here:\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\nDone. "
    text += "Now some words to push the window along. " * 10
    shown = ""
    for i in range(0, len(text), 7):
        shown += window.feed(text[i : i + 7])
        assert "BEGIN" not in shown and "MIIE" not in shown
    shown += window.flush()
    assert shown == REDACTOR.redact(text)
    assert "Here:\n[REDACTED:private_key]\nDone." in shown


def test_a_rollback_forgets_the_failed_attempt() -> None:
    window = RedactionWindow(REDACTOR)
    shown = window.feed("First round text that is long enough to pass the holdback. " * 3)
    shown += window.release()
    state = window.checkpoint()
    window.feed("a failed attempt with AKIAABCD")
    window.rollback(state)
    shown += window.feed("the second attempt")
    shown += window.flush()
    assert shown == REDACTOR.redact(
        "First round text that is long enough to pass the holdback. " * 3 + "the second attempt"
    )


def test_a_carried_key_start_is_not_shown_by_an_attempt_that_is_served_again() -> None:
    """The key start carried over a tool round is shared by every attempt at the next round:
    an attempt that makes it plain text must not show it (the next attempt may complete it)."""
    window = RedactionWindow(REDACTOR)
    window.feed("the key is AKIAABCDEFGH")
    assert window.release() == "the key is "
    state = window.begin_round()
    failed = "".join(window.feed(" and some other words " * 3) for _ in range(10))
    assert failed == ""  # held to the end of the round: it could still be a key
    window.rollback(state)
    masked = window.feed("IJKLMNOP and the rest of a long enough round. " * 4)
    assert masked.startswith("[REDACTED:aws_access_key] and the rest")  # masked: shown at once
    window.rollback(state)
    window.feed(" after all. " * 20)
    assert window.release() == "AKIAABCDEFGH" + " after all. " * 20  # committed: released


@pytest.mark.parametrize("joint", ['""', "''", ""], ids=["quotes", "apostrophes", "none"])
def test_a_second_key_start_carried_behind_a_masked_one_is_not_shown_by_an_attempt(
    joint: str,
) -> None:
    """The text carried over a tool round may hold a secret the next attempt masks and, after
    it, a second possible secret start: the attempt that masks the first must not show the
    second when its own text makes that one plain, since the next attempt may complete it."""
    window = RedactionWindow(REDACTOR)
    start = window.feed("the database is postgres://admin:11111111@db.internal" + joint)
    start += window.feed("sk-ant-api03-1111") + window.release()
    assert window.held.endswith("sk-ant-api03-1111")
    state = window.begin_round()
    failed = window.feed("the  123e4567-e89b-12d3-a456-426614174000 and")
    failed += "".join(window.feed(" more words") for _ in range(10))
    assert "sk-ant" not in failed and "admin:1" not in failed
    window.rollback(state)
    served = window.feed("1111111111111111 the rest of it " * 3) + window.flush()
    assert "[REDACTED:anthropic_key] the rest" in served
    assert "sk-ant" not in start + served and "admin:1" not in start + served


def test_memory_stays_bounded_for_a_long_answer() -> None:
    window = RedactionWindow(REDACTOR)
    chunk = "A reply line with sk-ant-api03-" + "Q" * 40 + " and 日本語 text.\n"
    text = chunk * 12_000  # about 1 MB
    shown = []
    largest = 0
    for i in range(0, len(text), 50):
        shown.append(window.feed(text[i : i + 50]))
        largest = max(largest, len(window.checkpoint().text))
    shown.append(window.flush())
    assert "".join(shown) == REDACTOR.redact(text)
    assert largest < 4096 + 64 + 4 * HOLDBACK_BYTES


# -- the properties ------------------------------------------------------------------------------


@st.composite
def _scripts(draw: st.DrawFn) -> tuple[str, list[Planted], list[tuple[str, object]]]:
    """A reply as operations on a ReplyPolicy: feeds, round ends, failed attempts."""
    text, planted = draw(texts_with_secrets())
    sizes = draw(st.lists(st.integers(1, 48), min_size=1, max_size=30))
    ops: list[tuple[str, object]] = [("begin", None)]
    pos = 0
    index = 0
    while pos < len(text):
        size = sizes[index % len(sizes)]
        index += 1
        ops.append(("feed", text[pos : pos + size]))
        pos += size
        roll = draw(st.integers(0, 19))
        if roll == 0:
            ops += [("end_round", None), ("begin", None)]
        elif roll == 1:
            junk, junk_planted = draw(texts_with_secrets(max_parts=4))
            planted += junk_planted
            ops += [("end_round", None), ("begin", None), ("junk", junk), ("restart", None)]
    return text, planted, ops


def _round_starts(ops: list[tuple[str, object]]) -> list[int]:
    """Where the rounds after the first start in the committed text (the window's breaks)."""
    pos, starts = 0, []
    for op, arg in ops:
        if op == "feed":
            assert isinstance(arg, str)
            pos += len(arg)
        elif op == "begin" and pos and (not starts or starts[-1] != pos):
            starts.append(pos)
    return starts


def _run(ops: list[tuple[str, object]]) -> tuple[list[str], list[str], list[str]]:
    """Run a script; returns (committed pieces, the states they showed, the states failed
    attempts showed while they lasted)."""
    policy = ReplyPolicy()
    pieces: list[str] = []
    states: list[str] = []
    attempts: list[str] = []
    shown = ""
    for op, arg in ops:
        piece = ""
        if op == "begin":
            policy.begin_round()
        elif op == "feed":
            assert isinstance(arg, str)
            piece = policy.feed(arg)
        elif op == "end_round":
            piece = policy.end_round()
        elif op == "junk":  # a failed attempt: shown while it lasts, then dropped
            assert isinstance(arg, str)
            attempt = shown
            for i in range(0, len(arg), 9):
                attempt += policy.feed(arg[i : i + 9])
                attempts.append(attempt)
        elif op == "restart":
            policy.restart()
        if piece:
            pieces.append(piece)
            shown += piece
            states.append(shown)
    piece = policy.finish()
    pieces.append(piece)
    states.append(shown + piece)
    return pieces, states, attempts


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scripts())
def test_property_pieces_join_to_the_redaction_of_the_whole(
    script: tuple[str, list[Planted], list[tuple[str, object]]],
) -> None:
    text, _, ops = script
    pieces, states, _ = _run(ops)
    expected = REDACTOR.redact(text, breaks=_round_starts(ops))
    assert "".join(pieces) == expected
    for state in states:  # the redacted text only ever grows
        assert expected.startswith(state)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scripts())
def test_property_no_visible_state_holds_any_part_of_a_secret(
    script: tuple[str, list[Planted], list[tuple[str, object]]],
) -> None:
    _, planted, ops = script
    _, states, attempts = _run(ops)
    forbidden = set().union(*(windows(p.secret) for p in planted)) if planted else set()
    previous = ""
    for state in [*states, *attempts]:
        # a window new in this state must overlap what this state added
        common = len(previous) if state.startswith(previous) else 0
        fresh = state[max(0, common - 4) :]
        assert not [w for w in forbidden if w in fresh], state
        previous = state


@pytest.mark.parametrize(
    "cluster",
    ["👨\u200d👩\u200d👧\u200d👦", "👍🏽", "🇯🇵", "e\u0301", "❤\ufe0f"],
    ids=["zwj-family", "skin-tone", "flag", "combining", "variation"],
)
def test_a_draft_never_shows_part_of_a_user_perceived_character(cluster: str) -> None:
    from orchestrator.policy.catalogue import Redactor
    from orchestrator.policy.window import RedactionWindow

    text = (cluster * 300) + " end"
    for step in (1, 3, 7):
        window = RedactionWindow(Redactor())
        emitted = ""
        for i in range(0, len(text), step):
            emitted += window.feed(text[i : i + step])
            # what has been emitted so far ends on a whole cluster
            assert len(emitted) % len(cluster) == 0 or emitted.endswith(" end"), (
                step,
                len(emitted),
            )
        emitted += window.flush()
        assert emitted == text


def test_a_key_right_after_a_pem_body_the_match_read_into_is_masked_whole() -> None:
    """A PEM block still open when a key follows on the next line: the block's match reads the
    key's first letters as body and ends inside the key; the key's own match runs past it, so
    both are one secret and no part of the key is shown."""
    body = "\n".join(["1" * 16] * 5)
    text = f"the -----BEGIN RSA PRIVATE KEY-----\n{body}\nsk-ant-api03-{'1' * 20} the end "
    for size in (9, 25):
        window = RedactionWindow(Redactor())
        out = "".join(window.feed(text[i : i + size]) for i in range(0, len(text), size))
        out += window.flush()
        assert "ant-api03" not in out and "1111" not in out, out
    assert "ant-api03" not in Redactor().redact(text)


def test_searches_remembered_across_scans_change_no_answer() -> None:
    """:class:`SearchMemo` lets each scan of a growing text search a shape from where the last
    scan's search stopped; every scan must answer as one that searches from its start."""
    rng = random.Random(35)
    parts = [text for _, text, _ in SAMPLES] + [
        "plain prose, with a list:\n- one\n- two ",
        "see https://example.org/a/b?page=2&sort=up#x and [docs](https://x.example/y) ",
        "the key sk-ant-api0",
        "Bearer ",
        "token=",
        "ghp_",
    ]
    for _ in range(200):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(2, 12)))
        memo = SearchMemo()
        start = end = 0
        while end < len(text):
            end = min(len(text), end + rng.randint(1, 40))
            stop = rng.randint(start, end)
            remembered = REDACTOR.scan(text[:end], start, stop, open_end=True, memo=memo)
            assert remembered == REDACTOR.scan(text[:end], start, stop, open_end=True)
            start = remembered.cut


@pytest.mark.parametrize(
    "markup",
    [
        "](https://example.com/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)",  # found: a link's URL
        "](https://example.com/" + "a" * 300 + ")",
        "![alt text here](https://example.com/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)",
        '<span title="aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">',
        "[^aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]",
        "&shy;" * 5,
        "\u200b" * 20,
    ],
)
@pytest.mark.parametrize("prechecks", [True, False])
@pytest.mark.parametrize("reuse", [True, False])
def test_markup_read_as_nothing_before_a_key_keeps_its_look_behind(
    markup: str, prechecks: bool, reuse: bool
) -> None:
    # Found by comparing the window with redact(): "?" + a link + "api_key=…" is a URL
    # credential, but a scan that started after the link (at a settled position, or where a
    # proof ended) read its look-behind in 16 raw characters, inside the URL, without the "?".
    text = f"See the docs ?{markup}token=s3cr3tvalue123456 " + "and more words " * 12
    window = RedactionWindow(Redactor(prechecks=prechecks), reuse_proofs=reuse)
    shown = "".join(window.feed(char) for char in text) + window.flush()
    assert shown == REDACTOR.redact(text)
    assert "s3cr3t" not in shown


@pytest.mark.parametrize("tags", ["<b>", "<b></b", "<i></i>"])
def test_inline_html_after_a_space_at_a_round_end_is_held(tags: str) -> None:
    # Found by tests/test_policy_forms.py: "Bearer " + "<b></b" ended a round and was emitted
    # (inline HTML after a space was not held as markup that may still vanish); the next round's
    # ">7111…" made it vanish, and "Bearer 7111…" was never masked.
    window = RedactionWindow(REDACTOR)
    window.begin_round()
    shown = window.feed("Bearer " + tags) + window.release()
    window.begin_round()
    rest = ">711111111111111111111 ." if tags.endswith("</b") else "711111111111111111111 ."
    shown += window.feed(rest) + window.flush()
    assert shown == REDACTOR.redact("Bearer " + tags + rest)
    assert "7111" not in shown
