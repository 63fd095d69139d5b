"""Redaction removes the secret, not the answer (architecture §4 "Leak catalogue", "What the
reader sees is what is checked"): a marker matches no shape, redaction is idempotent, the
rendered-form check keeps every line that holds no secret, and the forms a reader still reads
(a key hard-wrapped over two lines, adjacent string pieces, space and dash variants, look-alike
letters, a key glued to the word before it) are masked."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from channels.telegram.format import markdown_to_telegram
from orchestrator.policy import ReplyPolicy
from orchestrator.policy.catalogue import BUILTIN_SHAPES, Redactor, compile_shape, marker
from orchestrator.policy.rendered import redact_rendered
from orchestrator.policy.shapes import SecretShape
from orchestrator.policy.window import RedactionWindow
from tests.policy_samples import SAMPLES, windows
from tests.test_policy_c18 import MODES, deliver

REDACTOR = Redactor()
NAMES = sorted({shape.name for shape in BUILTIN_SHAPES} | {"term", "nokw", "a", "x_1"})
ANT = "sk-ant-api03-QXZJVWKY13579QXZJVWKY13579QXZJ"

URL_FORMS = (
    "postgres://admin:QXZhunter2@db.internal:5432/app",
    "https://deploy:QXZhunter2@git.example.org/repo.git",
    "redis://:QXZhunter2@cache:6379/0",
    "mongodb+srv://app:QXZ%40hunter2@cluster0.mongodb.net/db?retryWrites=true",
)


def _render(text: str) -> str:
    return markdown_to_telegram(text).text


# -- marker inertness and idempotence ---------------------------------------------------------

_CONTEXT = st.sampled_from(
    ["", " ", "\n", "x", "1", "//", "x://", "postgres://", "scheme://u:", ":", "@", "@host",
     "@db.internal:5432/app", "Bearer ", "?token=", "&key=", "#access_token=", "_", "*", "`",
     '"', "'", "(", ")", "](https://e.org)", "[", "]", "\\", "&#45;", "%2D", "\u00a0", "\u2011",
     "sk-", "sk-ant-", "AKIA", "ghp_", "> "]
)  # fmt: skip


@st.composite
def _marker_contexts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(_CONTEXT, st.sampled_from(NAMES).map(marker)), max_size=8))
    return "".join(parts) + marker(draw(st.sampled_from(NAMES))) + draw(_CONTEXT)


@settings(max_examples=600, deadline=None)
@given(text=_marker_contexts())
def test_property_no_shape_matches_a_marker_in_any_context(text: str) -> None:
    spans = [m.span() for m in re.finditer(r"\[REDACTED:[a-z0-9_]+\]", text)]
    for hit in REDACTOR.hits(text):
        for begin, end in spans:  # no hit's secret touches a character of a marker
            assert hit.secret_end <= begin or end <= hit.secret_start, (text, hit)


def test_no_builtin_pattern_matches_a_marker_where_a_password_stands() -> None:
    for shape in BUILTIN_SHAPES:
        pattern = compile_shape(shape)
        for name in NAMES:
            for around in ("{}", "x://{}@host", "postgres://{}@db.internal:5432/app", "?token={}"):
                text = around.format(marker(name))
                found = pattern.search(text)
                assert found is None or marker(name) not in found.group(), (shape.name, text)


_PIECES = st.one_of(
    st.sampled_from([text for _, text, _ in SAMPLES]),
    st.sampled_from(URL_FORMS),
    _CONTEXT,
    st.sampled_from(["Connect with this URL:", "KEEPWORD stays.", "\n\n", " and ", "id1"]),
    st.text(st.sampled_from("AKIQXZJ13579abc-_:/@.\n \"'+"), max_size=12),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_PIECES, max_size=10))
def test_property_redaction_is_idempotent(parts: list[str]) -> None:
    once = REDACTOR.redact("".join(parts))
    assert REDACTOR.redact(once) == once
    assert list(REDACTOR.hits(once)) == []


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_PIECES, max_size=8))
def test_property_the_rendered_check_converges_on_the_redacted_text(parts: list[str]) -> None:
    """What the window emits (``redact``) is already clean as rendered: the rendered-form
    check returns it unchanged, so no line is lost to a last resort."""
    redactor = Redactor()
    told: list[tuple[str, str]] = []
    redactor.overmask_observer = lambda shape, scope: told.append((shape, scope))
    once = redactor.redact("".join(parts))
    if list(redactor.hits(_render(once))):
        return  # a form only the renderer shows: covered by the tests of redact_rendered
    assert redact_rendered(redactor, once, _render) == once
    assert told == []


# -- the URL-password answer keeps every other line --------------------------------------------


@pytest.mark.parametrize("url", URL_FORMS)
@pytest.mark.parametrize("position", ["alone", "start", "middle", "end"])
def test_a_url_password_masks_the_password_and_keeps_every_line(url: str, position: str) -> None:
    lines = {
        "alone": [url],
        "start": [f"{url} is the URL.", "KEEPWORD stays."],
        "middle": ["Connect with this URL:", url, "KEEPWORD stays."],
        "end": ["Connect with this URL:", f"Use {url}"],
    }[position]
    text = "\n".join(lines)
    once = REDACTOR.redact(text)
    final = redact_rendered(REDACTOR, once, _render)
    assert final == once
    assert "QXZ" not in final and "hunter2" not in final
    assert "[REDACTED:url_password]@" in final
    host = url.split("@", 1)[1]
    assert host in final
    for line in lines:
        if url not in line:
            assert line in final.split("\n")


# -- forms a reader still reads ----------------------------------------------------------------

_KEY = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"
READER_FORMS = {
    "hard_wrapped": f"key: {_KEY[:30]}\n{_KEY[30:]} done",
    "hard_wrapped_indented": f"    {_KEY[:26]}\n    {_KEY[26:]}\nThat is all.",
    "hard_wrapped_quoted": f"> {_KEY[:30]}\n> {_KEY[30:]}\n\nThat is all.",
    "string_pieces": f'key = "{_KEY[:16]}" "{_KEY[16:]}"',
    "string_pieces_plus": f"key = '{_KEY[:16]}' +\n      '{_KEY[16:]}'",
    "json_wrapped": '{"k": "' + _KEY[:30] + "\\n" + _KEY[30:] + '"}',
    "nbsp_pem": "-----BEGIN\u00a0RSA\u00a0PRIVATE\u00a0KEY-----\n"
    "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nQXZJVWKY13579QXZJVWKY1357==\n"
    "-----END\u00a0RSA\u00a0PRIVATE\u00a0KEY-----",
    "dash_variant": "sk\u2011ant\u2010api03-AAAABBBBCCCCDDDDEEEEFFFF ok",
    "narrow_space_bearer": "Authorization: Bearer\u202fQXZJVWKY13579QXZJVWKY ok",
    "cyrillic_s": "key \u0455k-ant-api03-AAAABBBBCCCCDDDDEEEEFFFF ok",
    "cyrillic_aws": "id \u0410\u041a\u0406\u0410IOSFODNN7QXZJ135 ok",
    "glued": "id1sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFF ok",
}
READER_SECRETS = {
    "nbsp_pem": "MIIEpAIBAAKCAQEA",
    "narrow_space_bearer": "QXZJVWKY13579",
    "cyrillic_aws": "IOSFODNN7QXZJ135",
}


def _secret_of(form: str) -> str:
    return READER_SECRETS.get(form, "AAAABBBBCCCCDDDD" if form != "dash_variant" else "AAAABBBB")


@pytest.mark.parametrize("form", sorted(READER_FORMS))
def test_each_reader_form_is_masked_whole(form: str) -> None:
    text = READER_FORMS[form]
    out = REDACTOR.redact(text)
    leaked = [w for w in windows(_secret_of(form)) if w in out]
    assert not leaked, (form, out)
    for tail in ("IIIIJJJJ", "GGGGHHHH"):
        assert tail not in out, (form, out)
    assert "[REDACTED:" in out


@pytest.mark.parametrize("form", sorted(READER_FORMS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_each_reader_form_is_masked_in_every_state_of_the_window(
    form: str, data: st.DataObject
) -> None:
    text = READER_FORMS[form] + "\n\nThe rest of the answer follows here, long enough to flow."
    for shown in _states(text, data):
        leaked = [w for w in windows(_secret_of(form)) if w in shown]
        assert not leaked and "IIIIJJJJ" not in shown, (form, shown)
    assert shown == REDACTOR.redact(text)


def _states(text: str, data: st.DataObject) -> list[str]:
    """Every text the window shows while ``text`` streams in deltas of 1-9 characters; the
    last is the whole output after the flush."""
    window = RedactionWindow(REDACTOR)
    shown = [""]
    pos = 0
    while pos < len(text):
        size = data.draw(st.integers(1, 9))
        shown.append(shown[-1] + window.feed(text[pos : pos + size]))
        pos += size
    shown.append(shown[-1] + window.flush())
    return shown


# More spellings of the same forms: other line breaks, deeper quotes, a Markdown hard break,
# string pieces of other languages, a dash outside the Basic Multilingual Plane, ASCII and
# capital look-alikes of a prefix, and PEM headers as a reader still reads them.
_TAIL = "579QXZJVWKY13579QXZJ"
MORE_FORMS = {
    "wrap_u2028": f"Key: {ANT[:28]}\u2028{ANT[28:]} ok",
    "wrap_cr": f"Key: {ANT[:28]}\r{ANT[28:]} ok",
    "wrap_nel": f"Key: {ANT[:28]}\x85{ANT[28:]} ok",
    "wrap_vertical_tab": f"Key: {ANT[:28]}\x0b{ANT[28:]} ok",
    "wrap_five_quotes": f"> > > > > Key: {ANT[:28]}\n> > > > > {ANT[28:]} ok",
    "wrap_hard_break": f"Key: {ANT[:28]}\\\n{ANT[28:]} ok",
    "wrap_nbsp_indent": f"Key: {ANT[:28]}\n\u00a0\u00a0{ANT[28:]} ok",
    "pieces_f_string": f'k = "{ANT[:17]}" f"{ANT[17:]}"',
    "pieces_raw_string": f'k = "{ANT[:17]}" r"{ANT[17:]}"',
    "pieces_backticks": f"k = `{ANT[:17]}` + `{ANT[17:]}`",
    "pieces_mixed_quotes": f"k = \"{ANT[:17]}\" '{ANT[17:]}'",
    "pieces_curly_quotes": f"k = \u201c{ANT[:17]}\u201d \u201c{ANT[17:]}\u201d",
    "pieces_dot": f"k = '{ANT[:17]}' . '{ANT[17:]}'",
    "pieces_plus_plus": f"k = '{ANT[:17]}' ++ '{ANT[17:]}'",
    "pieces_plus_blank_line": f'k = "{ANT[:17]}" +\n\n "{ANT[17:]}"',
    "pieces_nbsp": f'k = "{ANT[:17]}"\u00a0"{ANT[17:]}"',
    "dash_plane_1": f"Key: sk\U00010eadant-api03-{ANT[13:]} ok",
    "minus_signs": f"Key: sk\u2212ant\u2212api03-{ANT[13:]} ok",
    "aws_l_for_i": "id AKlAIOSFODNN7QXZJ135 ok",
    "gitlab_i_for_l": f"tok gIpat-{ANT[13:]} ok",
    "cyrillic_capital_s": f"Key: \u0405k-ant-api03-{ANT[13:]} ok",
    "aws_glued_both_sides": "id xAKIAIOSFODNN7QXZJ135ok ok",
    "pem_double_space": "-----BEGIN  RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAqXZJVWKY13579abcd\n",
    "pem_four_dashes": "----BEGIN RSA PRIVATE KEY----\nMIIEpAIBAAKCAQEAqXZJVWKY13579abcd\n",
    "pem_lower_case": "-----begin rsa private key-----\nMIIEpAIBAAKCAQEAqXZJVWKY13579abcd\n",
    "pem_cr_lines": "-----BEGIN RSA PRIVATE KEY-----\rMIIEpAIBAAKCAQEAqXZJVWKY13579abcd\r",
    "pem_five_quotes": "> > > > > -----BEGIN RSA PRIVATE KEY-----\n"
    "> > > > > MIIEpAIBAAKCAQEAqXZJVWKY1357\n",
    "pem_deep_indent": "-----BEGIN RSA PRIVATE KEY-----\n"
    + " " * 20 + "MIIEpAIBAAKCAQEAqXZJVWKY1357\n",
}  # fmt: skip


def _more_secret(form: str) -> str:
    if form.startswith("aws"):
        return "IOSFODNN7QXZJ135"
    return "MIIEpAIBAAKCAQEA" if form.startswith("pem") else _TAIL


@pytest.mark.parametrize("form", sorted(MORE_FORMS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_more_spellings_are_masked_alone_and_in_every_state_of_the_window(
    form: str, data: st.DataObject
) -> None:
    text = MORE_FORMS[form] + "\n\nThe rest of the answer follows here."
    secret = _more_secret(form)
    out = REDACTOR.redact(text)
    assert not [w for w in windows(secret) if w in out], (form, out)
    assert "The rest of the answer follows here." in out
    for shown in _states(text, data):
        assert not [w for w in windows(secret) if w in shown], (form, shown)
    assert shown == out


# What follows a key on the next line, or in the next string piece, is text of its own unless
# it reads as more of a key: a word, a number, a list item, a setting, a URL.
_NEXT = [
    "OPENAI_API_KEY=value", "2. Restart", "README", "API docs", "2024-01-01", "iPhone",
    "--verbose", "v2", "- item", "USER=bob", "3 retries", "Then restart the service.",
]  # fmt: skip


@pytest.mark.parametrize("after", _NEXT)
@pytest.mark.parametrize("joint", ["\n", "\n> ", "\n    ", "\r\n"])
def test_the_line_after_a_key_is_kept(joint: str, after: str) -> None:
    head = "> " if joint == "\n> " else ""
    text = f"{head}{ANT}{joint}{after}"
    out = REDACTOR.redact(text)
    assert out == f"{head}[REDACTED:anthropic_key]{joint}{after}"
    window = RedactionWindow(REDACTOR)
    assert "".join(window.feed(c) for c in text) + window.flush() == out


@pytest.mark.parametrize(
    "text",
    [
        f'"{ANT}" "https://example.com"',
        f'echo "{ANT}" "done"',
        f'"{ANT}"\n"other": 1',
        "Authorization: Bearer QXZJVWKY13579QXZJ\n3 retries",
        "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789\nUSER=bob",
    ],
)
def test_the_piece_after_a_key_is_kept(text: str) -> None:
    out = REDACTOR.redact(text)
    assert "QXZJVWKY13579" not in out and "AbCdEfGh" not in out
    for kept in ("https://example.com", "done", '"other": 1', "3 retries", "USER=bob"):
        if kept in text:
            assert kept in out, out


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("postgres://admin:QXZhunter2@db.internal/app,bob@example.com", "@db.internal/app,bob@"),
        ("(postgres://admin:QXZhunter2@db.internal:5432/app)@alice", "@db.internal:5432/app)@"),
        ("postgres://admin:QXZhunter2@db.internal:5432/app?user=x@y.org", "@db.internal:5432/app?"),
        ("postgres://a:QXZhunter2@db1.internal/a;postgres://b:QXZhunter3@db2.internal/b", "@db1"),
        ("npm: https://deploy:QXZhunter2@registry.example.org/@myorg/pkg", "/@myorg/pkg"),
        ("redis://:QXZp@ss@cache:6379/0", "@cache:6379/0"),
    ],
)
def test_a_url_password_ends_at_the_authority(text: str, kept: str) -> None:
    out = REDACTOR.redact(text)
    assert "QXZhunter" not in out and "QXZp" not in out, out
    assert kept in out, out
    window = RedactionWindow(REDACTOR)
    assert "".join(window.feed(c) for c in text) + window.flush() == out


# Joints as an attacker spells them: long runs of spaces, many breaks, quotes and operators.
_JOINT_PARTS = st.sampled_from(
    [" ", " " * 40, " " * 130, "\t", "\n", "\r", "\r\n", "\u2028", "\x85", "> ", ">", '"',
     "'", "`", "+", "++", ".", "f", "r", "\\", "\u00a0", "\u201c", "x", "7", "README"]
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    joint=st.lists(_JOINT_PARTS, max_size=8).map("".join),
    tail=st.sampled_from([ANT[20:], "QXZJ1357", "qxzjw", "Then more.", "2. next", ANT]),
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=40),
)
@example(joint="\n" + " " * 130, tail=ANT[20:], sizes=[7])
@example(joint='" ' + " " * 130 + '"', tail=ANT[20:], sizes=[5])
def test_property_the_window_agrees_with_redact_around_any_joint(
    joint: str, tail: str, sizes: list[int]
) -> None:
    text = f"Key: {ANT[:30]}{joint}{tail} end"
    out = REDACTOR.redact(text)
    assert REDACTOR.redact(out) == out
    window = RedactionWindow(REDACTOR)
    shown = ""
    pos = 0
    for size in sizes * (len(text) // max(1, sum(sizes)) + 1):
        if pos >= len(text):
            break
        shown += window.feed(text[pos : pos + size])
        pos += size
    shown += window.feed(text[pos:])
    assert shown + window.flush() == out


def test_the_joint_patterns_stay_linear_on_long_runs() -> None:
    """An answer of 100,000 spaces after a quote or a line break: the joint search runs in
    one pass (bounded, atomic repeats). A pattern that backtracks would take minutes; the bound
    here is a thousand times what one pass takes."""
    from orchestrator.policy import joints

    for text in ('a"' + " " * 100_000 + "x", "a\n" * 50_000, "a'+" * 30_000, "a\u2028 " * 30_000):
        for pattern in (joints._JOINT, joints._OPEN_JOINT):
            pattern.search(text, timeout=2.0)
            pattern.search(text, max(0, len(text) - joints.OPEN_JOINT_CHARS), timeout=2.0)


def test_a_key_then_a_sentence_on_the_next_line_keeps_the_sentence() -> None:
    out = REDACTOR.redact(f"key: {_KEY}\nThen restart the service.")
    assert out == "key: [REDACTED:anthropic_key]\nThen restart the service."


def test_space_and_dash_variants_in_prose_change_nothing() -> None:
    prose = "Price\u00a0—\u00a0twelve\u2009euros; a well\u2011known way – here."
    assert REDACTOR.redact(prose) == prose


# -- a last resort is never silent -------------------------------------------------------------


def _template_renderer(text: str) -> str:
    return text.replace("{{a}}", "api03-")


def test_a_last_resort_is_logged_and_counted_with_the_shape(
    caplog: pytest.LogCaptureFixture,
) -> None:
    redactor = Redactor()
    told: list[tuple[str, str]] = []
    redactor.overmask_observer = lambda shape, scope: told.append((shape, scope))
    text = f"Intro line.\nKey: sk-ant-{{{{a}}}}{ANT[13:]} ok\nThe end."
    with caplog.at_level(logging.WARNING, logger="orchestrator.policy.rendered"):
        out = redact_rendered(redactor, text, _template_renderer)
    assert "QXZJ" not in _template_renderer(out)
    assert out.startswith("Intro line.\n") and out.endswith("\nThe end.")
    assert told == [("anthropic_key", "line")]
    assert any("anthropic_key" in r.getMessage() for r in caplog.records)


def test_an_extra_pattern_never_matches_inside_a_marker() -> None:
    redactor = Redactor([*BUILTIN_SHAPES, SecretShape("caps", r"[A-Z]{6,}")])
    once = redactor.redact("see AKIAIOSFODNN7QXZJ135 and SHOUTING")
    assert once == "see [REDACTED:aws_access_key] and [REDACTED:caps]"
    assert redactor.redact(once) == once


# -- no line lost: the final visible text is the redacted answer's ------------------------------

_LINES = st.one_of(
    st.sampled_from(URL_FORMS),
    st.sampled_from([text for name, text, _ in SAMPLES if name != "private_key"]),
    st.sampled_from(
        ["Connect with this URL:", "KEEPWORD stays.", "Then restart the service.", "ok",
         "The deployment finished.", "キーは次の通りです。", "id1" + _KEY, f"key: {_KEY[:30]}"]
    ),
)  # fmt: skip


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=130, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_LINES, min_size=1, max_size=6), data=st.data())
def test_property_the_final_text_is_the_redacted_answer_every_line_kept(
    mode: str, lines: list[str], data: st.DataObject
) -> None:
    answer = "\n\n".join(lines)
    steps: list[object] = []
    pos = 0
    while pos < len(answer):
        size = data.draw(st.integers(1, 12))
        steps.append(answer[pos : pos + size])
        pos += size
    policy = ReplyPolicy(channel="fake", chat_id="chat", render=_render)
    chat = deliver(mode, steps, policy=policy, max_length=4096)
    final = chat.states[-1][1]
    shown = " ".join(" ".join(_render(text).split()) for text in final)
    assert shown == " ".join(_render(REDACTOR.redact(answer)).split())
