"""Redaction removes the secret, not the answer (architecture §4 "Leak catalogue", "What the
reader sees is what is checked"): a marker matches no shape, redaction is idempotent, the
rendered-form check keeps every line that holds no secret, and the forms a reader still reads
(a key hard-wrapped over two lines, adjacent string pieces, space and dash variants, look-alike
letters, a key glued to the word before it) are masked."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import HealthCheck, given, settings
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
    window = RedactionWindow(REDACTOR)
    shown = ""
    pos = 0
    while pos < len(text):
        size = data.draw(st.integers(1, 9))
        shown += window.feed(text[pos : pos + size])
        pos += size
        leaked = [w for w in windows(_secret_of(form)) if w in shown]
        assert not leaked and "IIIIJJJJ" not in shown, (form, shown)
    shown += window.flush()
    assert shown == REDACTOR.redact(text)


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
