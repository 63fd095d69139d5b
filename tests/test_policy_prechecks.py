"""The redactor's pre-checks (architecture §4 "Live redaction window"): cheap necessary
conditions tested before a costly search, each read off the pattern it guards — a shape's
``lead`` (``SecretShape.lead``: ``url_password``, ``url_credential``, ``telegram_bot_token``),
the first characters of the views' tokens (``views.tokens``), an open joint's last characters
(``joints.may_end_in_a_joint``) and the keyword prefixes a text may end with. The contract:
with them (``Redactor(prechecks=True)``, the default) every search finds exactly what it finds
without them, so a window shows the same after every call, for random texts dense with URLs,
Markdown links, percent-escapes, joints and secrets, cut into random deltas, with round ends
and failed attempts.
"""

from __future__ import annotations

import re
import sys

import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestrator.policy import Redactor
from orchestrator.policy.catalogue import TAIL_REACH
from orchestrator.policy.joints import _OPEN_JOINT, OPEN_JOINT_CHARS, may_end_in_a_joint
from orchestrator.policy.open_tokens import _PARTIAL, _decoded, _raw_start
from orchestrator.policy.searches import CompiledShape
from orchestrator.policy.shapes import BUILTIN_SHAPES, inert, may_be_inert
from orchestrator.policy.views import _TOKEN, WHITE_SPACE, _pass, tokens
from orchestrator.policy.window import RedactionWindow, after_last_space
from tests.policy_samples import texts_with_secrets

FAST = Redactor()
REFERENCE = Redactor(prechecks=False)

# Pieces of URL-dense text: schemes, users and passwords (also cut off), hosts, ports, paths with
# "@", query keys, Markdown links and images, autolinks, percent-escapes, entities, JSON escapes,
# Bot API tokens, string pieces and hard wraps.
_PIECES = (
    "https://",
    "http://",
    "postgres://",
    "redis://:",
    "//",
    ":/",
    "s:",
    "a1:",
    "admin",
    "user:",
    ":hunter2",
    "p@ss/w0rd",
    "@",
    "@db.internal:5432",
    "@localhost",
    "@example.com",
    "example.org",
    "/path/@org/pkg",
    ":8080/",
    "?",
    "&",
    "#",
    "=",
    "token=",
    "TOKEN=abc",
    "?TOK",
    "&Api_K",
    "key=",
    "api_key=sk",
    "access_tok",
    "password",
    "?page=2&sort=up#frag",
    "[docs](",
    "[the guide](https://example.org/g?x=1&y=2)",
    "![img](https://x.example/i.png)",
    "[^1]",
    "](",
    ")",
    "<https://grafana.example.net/d/1?orgId=1>",
    "<b>",
    "%3A",
    "%2F",
    "%40",
    "%5Cu00",
    "%",
    "&#58;",
    "&amp;",
    "&#x4",
    "\\u003a",
    "\\/",
    "\\",
    "123456789:",
    "bot123456:",
    "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
    "0.28.1",
    "sk-ant-api03-",
    "AbCdEfGh1234",
    "ghp_",
    '"',
    "'",
    "`",
    "f'",
    " + ",
    "&& ",
    " || ",
    ".",
    "\n",
    "\n    > ",
    " ",
    "\t",
    "x",
    "日本",
)


@st.composite
def _url_texts(draw: st.DrawFn) -> str:
    """A text dense with URLs, links, escapes and secrets (planted ones among the pieces)."""
    pieces = draw(st.lists(st.sampled_from(_PIECES), max_size=40))
    text = "".join(pieces)
    if draw(st.booleans()):
        planted, _ = draw(texts_with_secrets(max_parts=6))
        at = draw(st.integers(0, len(text)))
        text = text[:at] + planted + text[at:]
    if draw(st.booleans()):  # cut off anywhere, as a stream is: partial matches at the end
        text = text[: draw(st.integers(0, len(text)))]
    return text


Ops = list[tuple[str, str]]


@st.composite
def _scripts(draw: st.DrawFn) -> Ops:
    """Calls on a window: feeds of random sizes, round ends, failed attempts rolled back."""
    text = draw(_url_texts())
    sizes = draw(st.lists(st.integers(1, 40), min_size=1, max_size=20))
    ops: Ops = [("begin", "")]
    pos = index = 0
    while pos < len(text):
        size = sizes[index % len(sizes)]
        index += 1
        ops.append(("feed", text[pos : pos + size]))
        pos += size
        roll = draw(st.integers(0, 19))
        if roll == 0:
            ops += [("release", ""), ("begin", "")]
        elif roll == 1:
            ops += [("checkpoint", ""), ("feed", draw(_url_texts())), ("rollback", "")]
    return ops


def _replay(ops: Ops, redactor: Redactor, reuse_proofs: bool) -> list[str]:
    """What each call of ``ops`` returned, then what ``flush`` returned."""
    window = RedactionWindow(redactor, reuse_proofs=reuse_proofs)
    saved = window.checkpoint()
    out: list[str] = []
    for op, arg in ops:
        if op == "feed":
            out.append(window.feed(arg))
        elif op == "release":
            out.append(window.release())
        elif op == "begin":
            saved = window.begin_round()
        elif op == "checkpoint":
            saved = window.checkpoint()
        else:
            window.rollback(saved)
    out.append(window.flush())
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scripts(), st.booleans())
@example(  # CI found a longer one: without pre-checks, spaces after "ok" held at a round's end
    [("begin", ""), ("feed", "the ok"), ("feed", " "), ("release", ""), ("begin", "")], False
)
def test_property_prechecks_change_no_output_of_a_window(ops: Ops, reuse_proofs: bool) -> None:
    assert _replay(ops, FAST, reuse_proofs) == _replay(ops, REFERENCE, reuse_proofs)


@settings(max_examples=300, deadline=None)
@given(_url_texts(), st.data())
def test_property_prechecks_change_no_open_scan(text: str, data: st.DataObject) -> None:
    """An open scan from any position, and the one-shot redaction, are the same with and
    without pre-checks, and so is the keyword prefilter (a text may end in a keyword's
    prefix)."""
    start = data.draw(st.integers(0, len(text)))
    breaks = tuple(sorted(data.draw(st.sets(st.integers(start, len(text)), max_size=2))))
    for open_end in (True, False):
        fast = FAST.scan(text, start, len(text), open_end=open_end, breaks=breaks)
        assert fast == REFERENCE.scan(text, start, len(text), open_end=open_end, breaks=breaks)
        assert FAST.candidates(text, open_end=open_end) == REFERENCE.candidates(
            text, open_end=open_end
        )
    assert FAST.redact(text) == REFERENCE.redact(text)


_LED = [shape for shape in BUILTIN_SHAPES if shape.lead is not None]


def _found(match: regex.Match[str] | None) -> object:
    if match is None:
        return None
    groups = [match.span(g) for g in range(1, (match.re.groups or 0) + 1)]
    return match.span(), match.partial, groups


@settings(max_examples=500, deadline=None)
@given(_url_texts(), st.data())
def test_property_a_lead_finds_what_the_pattern_alone_finds(text: str, data: st.DataObject) -> None:
    """Each shape's search from any position, full and partial, finds the same match (its
    span, whether partial, its groups) with its lead as without."""
    pos = data.draw(st.integers(0, len(text)))
    for shape in _LED:
        fast, reference = CompiledShape(shape), CompiledShape(shape, leads=False)
        for partial in (True, False):
            expected = _found(reference.search(text, pos, partial))
            assert _found(fast.search(text, pos, partial)) == expected, (shape.name, partial)


def test_the_shapes_with_a_lead() -> None:
    assert [shape.name for shape in _LED] == [
        "url_credential",
        "url_password",
        "telegram_bot_token",
    ]


@settings(max_examples=500, deadline=None)
@given(_url_texts(), st.data())
def test_property_tokens_are_the_token_patterns_matches(text: str, data: st.DataObject) -> None:
    begin = data.draw(st.integers(0, len(text)))
    expected = [(m.span(), m.group()) for m in _TOKEN.finditer(text, begin)]
    assert [(m.span(), m.group()) for m in tokens(text, begin)] == expected


# What joints are made of: token runs, quotes, operators, spaces, line breaks, quote prefixes,
# string prefixes.
_JOINT_PIECES = ("AbCd1234", "x", '"', "'", "`", " ", "\t", "\n", "\r\n", "\u2028", "> ", "\\")
_JOINT_PIECES += ("+", "++", ".", "..", "&", "&&", "|", "||", "f", "rb", "-", "=", ":")


@settings(max_examples=1000, deadline=None)
@given(st.one_of(_url_texts(), st.lists(st.sampled_from(_JOINT_PIECES), max_size=14).map("".join)))
def test_property_an_open_joint_needs_what_may_end_in_a_joint_checks(text: str) -> None:
    """Where the pre-check says no open joint can end the text, the search finds none."""
    if not may_end_in_a_joint(text):
        assert _OPEN_JOINT.search(text, max(0, len(text) - OPEN_JOINT_CHARS)) is None


def test_the_pre_checks_pass_over_ordinary_urls_and_prose() -> None:
    """What they are for: an ordinary URL or word at the end is no possible secret start and
    no open joint, so the costly searches are not run (and a cut-off one still is)."""
    password = CompiledShape(next(s for s in BUILTIN_SHAPES if s.name == "url_password"))
    assert password.lead is not None
    assert password.lead.search("see https://docs.python.org/3/library and") is None
    assert password.lead.search("see https://docs.python") is not None
    assert password.lead.search("postgres://admin:hunter2@db") is not None
    assert not may_end_in_a_joint("the service answe")
    assert not may_end_in_a_joint("httpx-0.28.1.tar.gz. ")
    assert may_end_in_a_joint('key = "sk-ant-api03-AbC" "dEf')
    assert may_end_in_a_joint("AAAA1111BBBB\n    > CCCC")
    for between in (" +", " ++ ", ".", " ..", " &", "&& ", " |", " || ", " + f", "+\n  rb"):
        text = '"sk-ant-api03-AbC"' + between
        assert _OPEN_JOINT.search(text) is not None and may_end_in_a_joint(text), between


@settings(max_examples=500, deadline=None)
@given(_url_texts(), st.data())
def test_property_a_decoded_text_maps_back_as_the_views_lists_do(
    text: str, data: st.DataObject
) -> None:
    """``held_from`` decodes without per-character lists: the same text, and each character
    maps back to the raw start ``_pass`` gives it."""
    begin = data.draw(st.integers(0, len(text)))
    once, pieces = _decoded(text, begin)
    expected, starts, _ = _pass(text, range(len(text)), range(1, len(text) + 1), begin, ())
    assert once == expected
    assert [_raw_start(pieces, index) for index in range(len(once))] == starts


# Every keyword of the catalogue, in its case variants and cut anywhere, and what gates them.
_KEYWORDS = sorted({k for shape in BUILTIN_SHAPES for k in shape.keywords})
_KEYWORD_PIECES = st.sampled_from(_KEYWORDS).flatmap(
    lambda k: st.sampled_from((k, k.upper(), k.title(), k[: len(k) // 2], k[1:], k[:-1]))
)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(
        st.lists(st.one_of(_KEYWORD_PIECES, st.sampled_from(_PIECES)), max_size=12).map("".join),
        texts_with_secrets(max_parts=6).map(lambda found: found[0]),
    ),
    st.data(),
)
def test_property_one_probe_per_shape_lets_through_what_every_keyword_does(
    text: str, data: st.DataObject
) -> None:
    """The pre-checked prefilter tests each shape's keywords at once (their alternation) and
    the prefixes a text may end with per shape: the same shapes as a probe per keyword, from
    any start, for every keyword of every shape (a text of keywords, whole, cut or in another
    case)."""
    start = data.draw(st.integers(0, len(text)))
    for open_end in (True, False):
        fast = [shape.name for shape, _ in FAST._candidates(text, start, open_end)]
        assert fast == [shape.name for shape, _ in REFERENCE._candidates(text, start, open_end)]


_LAST_SPACE = re.compile(r".*\s", re.DOTALL)  # how the window found the held run before


def _space_end(text: str) -> int | None:
    found = _LAST_SPACE.match(text)
    return None if found is None else found.end()


def test_str_isspace_is_what_backslash_s_matches_at_every_code_point() -> None:
    """``after_last_space`` reads whitespace as ``str`` does; ``re`` reads ``\\s`` so too."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    assert [c for c in every if c.isspace()] == re.findall(r"\s", every)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.lists(st.sampled_from(("a", "日本", " ", "\n", "\u3000", "\x1c", "\x85", "\u2028"))).map(
            "".join
        ),
        _url_texts(),
    )
)
def test_property_the_last_space_is_found_as_the_pattern_found_it(text: str) -> None:
    assert after_last_space(text) == _space_end(text)


_FILLER = ("the service answered within the expected time, ", "日本語のテキストです。", "\n")


@st.composite
def _long_url_scripts(draw: st.DrawFn) -> Ops:
    """A long answer (beyond the holdback: the window's looks search what it holds, and each
    search begins where the last one stopped) of URL pieces, secrets and prose, in small
    deltas, one round."""
    parts = draw(
        st.lists(
            st.one_of(st.sampled_from(_PIECES), st.sampled_from(_FILLER), _url_texts()),
            min_size=20,
            max_size=120,
        )
    )
    text = "".join(parts)
    sizes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=8))
    ops: Ops = [("begin", "")]
    pos = index = 0
    while pos < len(text):
        size = sizes[index % len(sizes)]
        index += 1
        ops.append(("feed", text[pos : pos + size]))
        pos += size
    return ops


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_long_url_scripts())
def test_property_prechecks_change_no_output_of_a_long_answer(ops: Ops) -> None:
    """Every feed of a long answer returns the same with and without pre-checks (the searches
    a look resumes where the last one stopped, a lead not found there, the held run)."""
    assert _replay(ops, FAST, True) == _replay(ops, REFERENCE, True)


_TOKEN_PIECES = ("&", "#", "x", "X", ";", "amp", "AMP", "nbsp", "shy", "quot", "lt", "%", "2F")
_TOKEN_PIECES += ("7", "\\", "u", "00ad", "n", "/", '"', "*", "**", "~", "`", "_", "-", "a", "Z")
_TOKEN_PIECES += ("0", "9", " ", "\n", "[", "]", "(", ")", "<b>", "!", "\u00ad", "ｓ", "日")


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(_TOKEN_PIECES), max_size=30).map("".join), st.data())
def test_property_tokens_led_by_ascii_are_the_token_patterns_matches(
    text: str, data: st.DataObject
) -> None:
    """The tokens led by ``&``, ``\\``, ``%`` and the emphasis delimiters are matched by the
    standard engine: the same tokens as the one pattern of the ``regex`` module, from any
    position (entities with and without ``;``, JSON escapes, percent-escapes, delimiters
    inside and outside words)."""
    begin = data.draw(st.integers(0, len(text)))
    expected = [(m.span(), m.group()) for m in _TOKEN.finditer(text, begin)]
    assert [(m.span(), m.group()) for m in tokens(text, begin)] == expected


def test_tokens_led_by_ascii_at_their_edges() -> None:
    """Each such token at its limits (runs of one to four delimiters inside and at the edge of
    a word, entities at their longest and cut short, escapes cut short), from every position."""
    texts = [
        left + run + right
        for run in ("*", "**", "***", "****", "~", "~~~", "`", "``", "*~`", "**~~")
        for left in ("", "a", " ", "_", "-", "Z9")
        for right in ("", "b", " ", "-", "_")
    ]
    texts += ["&#" + "1" * n + ";" for n in range(9)] + ["&#x" + "F" * n for n in range(9)]
    texts += ["&" + "a" * n + ";" for n in range(34)] + ["&amp", "&AMP;", "&nbs", "&shy", "&quot"]
    texts += [
        "\\u00a",
        "\\u00AD",
        "\\n",
        "\\f",
        "\\t",
        "\\q",
        "\\\\",
        "\\/",
        "%2",
        "%2F",
        "%8F",
        "%%41",
    ]
    for text in texts:
        for begin in range(len(text) + 1):
            expected = [(m.span(), m.group()) for m in _TOKEN.finditer(text, begin)]
            assert [(m.span(), m.group()) for m in tokens(text, begin)] == expected, text


# The pattern as the ``regex`` module ran it before.
_PARTIAL_REGEX = regex.compile(
    r"(?:&(?:#[0-9]{0,7}|#[xX][0-9a-fA-F]{0,6}|[A-Za-z][A-Za-z0-9]{0,31})?"
    r"|\\(?:u[0-9a-fA-F]{0,3})?|%[0-7]?)\Z"
)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(_url_texts(), st.lists(st.sampled_from(_TOKEN_PIECES), max_size=30).map("".join)),
    st.data(),
)
def test_property_a_token_begun_at_the_end_is_found_as_the_regex_module_finds_it(
    text: str, data: st.DataObject
) -> None:
    """The pattern of a token cut off at the end (``&#11``, ``\\u00``, ``%2``) runs in the
    standard engine: the same match as the ``regex`` module's, from any position."""
    pos = data.draw(st.integers(0, len(text)))
    found = _PARTIAL.search(text, pos)
    expected = _PARTIAL_REGEX.search(text, pos)
    assert (found and found.span()) == (expected and expected.span())


def test_a_token_begun_at_the_end_at_its_limits() -> None:
    texts = ["x&" + "a" * n for n in range(34)] + ["&#" + "1" * n for n in range(9)]
    texts += ["&#x" + "F" * n for n in range(8)] + ["&X" + "9" * n for n in range(33)]
    texts += ["\\", "\\u", "\\u0", "\\u00", "\\u00a", "\\x", "%", "%2", "%8", "%%", "&&", "a&1"]
    for text in texts:
        for pos in range(len(text) + 1):
            found, expected = _PARTIAL.search(text, pos), _PARTIAL_REGEX.search(text, pos)
            assert (found and found.span()) == (expected and expected.span()), (text, pos)


_MARKER_PIECES = ("[REDACTED:aws_access_key]", "[REDACTED:url_password]", "[REDACTED:", "]")
_MARKER_PIECES += ("[REDACTED:x]", "AKIAIOSFODNN7EXAMPLE", "sk-ant-api03-", "AbCdEfGh1234" * 2)
_MARKER_PIECES += ("postgres://admin:", "@db.internal", " ", "\n", "x", "ghp_", "=", "?token=")


@st.composite
def _marker_texts(draw: st.DrawFn) -> str:
    """Text with markers (a model may echo them) beside secrets and URL pieces."""
    pieces = draw(st.lists(st.sampled_from(_MARKER_PIECES + _PIECES[:24]), max_size=30))
    return "".join(pieces) + " " * draw(st.integers(0, 80))


@settings(max_examples=1000, deadline=None)
@given(_marker_texts(), st.data())
def test_property_no_span_is_inert_where_no_marker_opens_near_it(
    text: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(text)))
    begin = data.draw(st.integers(start, len(text)))
    end = data.draw(st.integers(begin, len(text)))
    if not may_be_inert(text, start):
        assert not inert(text, begin, end)


@settings(max_examples=500, deadline=None)
@given(_marker_texts(), st.data())
def test_property_prechecks_change_no_scan_of_text_with_markers(
    text: str, data: st.DataObject
) -> None:
    """A marker is looked for near the scan only: the same scans as a search of the whole
    text, from any position, open and closed, and in a window."""
    start = data.draw(st.integers(0, len(text)))
    for open_end in (True, False):
        fast = FAST.scan(text, start, len(text), open_end=open_end)
        assert fast == REFERENCE.scan(text, start, len(text), open_end=open_end)
    ops: Ops = [("begin", ""), *(("feed", text[i : i + 5]) for i in range(0, len(text), 5))]
    assert _replay(ops, FAST, True) == _replay(ops, REFERENCE, True)


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.one_of(_KEYWORD_PIECES, st.sampled_from(_PIECES), st.sampled_from(("123", "9" * 13))),
        max_size=12,
    ).map("".join),
    st.data(),
)
def test_property_a_shape_without_a_keyword_matches_only_in_the_last_characters(
    text: str, data: st.DataObject
) -> None:
    """Where a built-in shape's keywords do not occur from ``start`` on, its search (full and
    partial, the pattern alone) finds what a search of the last ``TAIL_REACH`` characters
    finds: the pre-checked scans search such a shape (let through by a keyword's prefix at the
    end) there only."""
    start = data.draw(st.integers(0, len(text)))
    for shape in BUILTIN_SHAPES:
        region = text[start:].lower() if shape.ignore_case else text[start:]
        if any(k.lower() in region if shape.ignore_case else k in region for k in shape.keywords):
            continue
        alone = CompiledShape(shape, leads=False)
        late = max(start, len(text) - TAIL_REACH)
        for partial in (True, False):
            expected = _found(alone.search(text, start, partial))
            assert _found(alone.search(text, late, partial)) == expected, shape.name


def test_white_space_is_what_the_regex_module_reads_as_backslash_s() -> None:
    """The token patterns run in the standard engine with the ``regex`` module's ``\\s``
    written out: the same characters, at every code point."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    assert re.findall(f"[{WHITE_SPACE}]", every) == regex.findall(r"\s", every)
    assert re.findall(f"[^{WHITE_SPACE}]", every) == regex.findall(r"\S", every)


_SPACES = (" ", "\t", "\n", "\x1c", "\x1f", "\x85", "\xa0", "\u2007", "\u3000", "\u200b")
_MARKUP_PIECES = ("[", "]", "(", ")", "![", "](", "[^", "<b>", "</b>", "<a href=x>", "<!--c-->")
_MARKUP_PIECES += ("<", ">", "x", "Z9", "https://e.org/p?q=1", "REDACTED:", "[REDACTED:x]", "/")


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(st.sampled_from(_MARKUP_PIECES + _SPACES), max_size=24).map("".join),
    st.data(),
)
def test_property_markup_tokens_are_the_token_patterns_matches(
    text: str, data: st.DataObject
) -> None:
    """Links, images, footnotes and inline HTML beside every kind of space (U+001C is one for
    ``str`` and not for the ``regex`` module): the same tokens from any position."""
    begin = data.draw(st.integers(0, len(text)))
    expected = [(m.span(), m.group()) for m in _TOKEN.finditer(text, begin)]
    assert [(m.span(), m.group()) for m in tokens(text, begin)] == expected
