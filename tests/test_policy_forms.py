"""What the reader sees is what is checked (architecture §4), as a property of the whole policy and
the delivery engine: a random secret of every shape, written in a random form (Markdown, entities,
JSON escapes, percent-encoding, invisible characters, full width, a link inside it, quoted), at a
random position in prose, split at random delta boundaries and across tool rounds, in every
mode. No state a user could see — every send and edit, as sent and as the client renders a
formatted one — shows any 5 characters of the secret (its keyword prefix included) to a reader
who decodes what is shown (:func:`tests.policy_forms.reader_view`)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.telegram.format import markdown_to_telegram
from orchestrator.policy import ReplyPolicy
from orchestrator.policy.catalogue import Redactor
from orchestrator.policy.rendered import redact_rendered
from tests.fakes import FakeChat
from tests.policy_forms import FORMS, reader_view, wrapped
from tests.policy_hooks import guard_here
from tests.policy_samples import _PROSE, planted_secrets, windows
from tests.test_policy_c18 import MODES, ROUND, deliver

EXAMPLES_PER_MODE = 130
"""4 modes x 130 = 520 examples a run (the issue asks for at least 500)."""


def shown_texts(chat: FakeChat) -> list[str]:
    """Every text a user could have seen: each message of each state and each write, and a
    formatted write also as Telegram displays it."""
    texts = [text for _, state in chat.states for text in state]
    for write in chat.chat_writes():
        texts.append(write.text)
        if write.formatted:
            texts.append(markdown_to_telegram(write.text).text)
    return texts


def leaks(chat: FakeChat, secret: str) -> list[tuple[str, str]]:
    forbidden = windows(reader_view(secret))
    found = []
    for text in shown_texts(chat):
        view = reader_view(text)
        found += [(w, text) for w in forbidden if w in view or w in text]
    return found


@st.composite
def scripts(draw: st.DrawFn) -> tuple[str, str, list[object]]:
    """(form, secret part, steps): prose, the secret in a form, prose; cut into deltas of 1–12
    characters with tool rounds between some of them."""
    planted = draw(planted_secrets)
    form, written = draw(wrapped(planted.text))
    before = " ".join(draw(st.lists(st.sampled_from(_PROSE), max_size=12)))
    after = " ".join(draw(st.lists(st.sampled_from(_PROSE), max_size=12)))
    glue = draw(st.sampled_from([" ", "\n", ": ", "\n\n", "("]))
    text = f"{before}{glue}{written} {after}."
    steps: list[object] = []
    pos = 0
    while pos < len(text):
        size = draw(st.integers(1, 12))
        steps.append(text[pos : pos + size])
        pos += size
        if draw(st.integers(0, 8)) == 0:
            steps.append(ROUND)
    return form, planted.secret, steps


@pytest.mark.parametrize("mode", MODES)
@settings(
    max_examples=EXAMPLES_PER_MODE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(script=scripts())
def test_property_no_state_shows_a_secret_in_any_form(
    mode: str, script: tuple[str, str, list[object]]
) -> None:
    form, secret, steps = script
    chat = deliver(mode, steps, max_length=600)
    assert not leaks(chat, secret), (form, leaks(chat, secret)[:3])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "steps",
    [
        # Found by the property above: empty inline HTML between a keyword and its token (a
        # space on one side of it) renders as nothing, so the reader saw "Bearer 7111…".
        [
            " ",
            ROUND,
            "B",
            ROUND,
            "earer<",
            ROUND,
            "b></b>",
            ROUND,
            " 71111111111",
            ROUND,
            "1111111111 .",
            ROUND,
        ],
        ["The header is Bearer <b></b>711111111111", "1111111111 ok."],
    ],
)
def test_inline_html_beside_a_space_hides_no_token(mode: str, steps: list[object]) -> None:
    chat = deliver(mode, steps, max_length=600)
    assert not leaks(chat, "711111111111111111111")


# -- round starts are boundaries -----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "key",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH",
        "ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5QXZJVW",
        "glpat-QXZJVWKY13579abcdefgh",
        "xoxb-123456789012-QXZJVWKY13579",
    ],
)
def test_a_round_that_opens_with_a_key_after_narration_ending_in_a_letter(
    mode: str, key: str
) -> None:
    chat = deliver(mode, ["Looking it up now", ROUND, f"{key} is the id.", " Done."])
    assert not leaks(chat, key)
    assert any("[REDACTED:" in text for text in chat.visible())


@pytest.mark.parametrize("mode", MODES)
def test_a_key_that_ends_a_round_before_a_word_is_caught(mode: str) -> None:
    chat = deliver(mode, ["The id is AKIAIOSFODNN7EXAMPLE", ROUND, "Done, all checked."])
    assert not leaks(chat, "AKIAIOSFODNN7EXAMPLE")


@pytest.mark.parametrize("mode", MODES)
def test_a_key_the_model_split_across_a_round_start_is_one_key(mode: str) -> None:
    chat = deliver(mode, ["The id is AKIAIOSF", ROUND, "ODNN7EXAMPLE, done."])
    assert not leaks(chat, "AKIAIOSFODNN7EXAMPLE")
    assert "[REDACTED:aws_access_key], done." in "\n".join(chat.visible())


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_is_caught_by_the_policy_alone(form: str) -> None:
    """One sample per form through a reply policy, in one piece and delta by delta."""
    secret = "sk-ant-api03-QXZJVWKY13579QXZJVWKY13579QXZJ"

    @given(st.data())
    @settings(max_examples=10, deadline=None)
    def check(data: st.DataObject) -> None:
        written = FORMS[form](secret, data.draw)
        policy = ReplyPolicy()
        policy.begin_round()
        text = f"the key {written} ok"
        out = "".join(policy.feed(c) for c in text) + policy.finish()
        final = guard_here(policy, out) or ""
        for shown in (out, final, markdown_to_telegram(final).text):
            view = reader_view(shown)
            assert not [w for w in windows(secret) if w in view], (written, shown)

    check()


@pytest.mark.parametrize("mode", ["multi_message-paragraph", "multi_message-turn"])
def test_a_paragraph_break_between_delivered_pieces_stays_a_break(mode: str) -> None:
    """``AKIA`` + blank line + ``IOSF…`` is not one key: the piece guard joins the delivered
    history and the next piece with the separator the chat shows between them."""
    steps = ["The prefix is AKIA.", ROUND, "IOSFODNN7EXAMPLE is a different word.", " Done."]
    if mode == "multi_message-paragraph":
        steps = ["The prefix is AKIA\n\n", "IOSFODNN7EXAMPLE is a different word.", " Done."]
    chat = deliver(mode, steps)
    assert "REDACTED" not in "\n".join(chat.visible())


@pytest.mark.parametrize("mode", MODES)
def test_an_emphasis_inside_a_key_is_read_through(mode: str) -> None:
    chat = deliver(mode, ["the key sk_live_**51HqQXZJ", "VWKY13579abcd** here, done."])
    assert not leaks(chat, "sk_live_51HqQXZJVWKY13579abcd")


_PEM_BODY = ("MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi", "QXZJVWKY13579QXZJVWKY13579==")
_ANT = "sk-ant-api03-QXZJVWKY13579QXZJVWKY13579QXZJ"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("answer", "secrets"),
    [
        pytest.param(
            "Here is the config:\n\n```yaml\ntls:\n  key: |\n"
            "    -----BEGIN RSA PRIVATE KEY-----\n"
            f"    {_PEM_BODY[0]}\n    {_PEM_BODY[1]}\n"
            "    -----END RSA PRIVATE KEY-----\n```\n\nApply it.",
            _PEM_BODY,
            id="pem-indented-in-a-fence",
        ),
        pytest.param(
            'Set PRIVATE_KEY="-----BEGIN RSA PRIVATE KEY----- '
            f'{_PEM_BODY[0]} {_PEM_BODY[1]} -----END RSA PRIVATE KEY-----" and restart.',
            _PEM_BODY,
            id="pem-flattened-onto-one-line",
        ),
        pytest.param(
            f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY[0] * 8}\n"
            "-----END RSA PRIVATE KEY-----\nThat is all.",
            (_PEM_BODY[0][16:],),
            id="pem-body-line-longer-than-128",
        ),
        pytest.param(f"Key: {_ANT[:20]}\u061c{_ANT[20:]} here.", (_ANT,), id="arabic-letter-mark"),
        pytest.param(f"Key: {_ANT[:20]}\ufe0f{_ANT[20:]} here.", (_ANT,), id="variation-selector"),
        pytest.param(f"Key: {_ANT[:20]}\U000e0020{_ANT[20:]} here.", (_ANT,), id="tag-character"),
        pytest.param(
            "key ⓢⓚ-ⓐⓝⓣ-api03-QXZJVWKY13579QXZJVWKY13579QXZJ x", (_ANT,), id="circled-letters"
        ),
        pytest.param(
            "Key: sk-ant-**api03**-QXZJVWKY13579QXZJVWKY13579QXZJ ok",
            (_ANT,),
            id="emphasis-before-a-dash",
        ),
        pytest.param(f"Your key `{_ANT[:7]}`{_ANT[7:]} ok", (_ANT,), id="code-span-inside"),
        pytest.param(f"Key: [{_ANT[:20]}][1]{_ANT[20:]} ok", (_ANT,), id="reference-link"),
        pytest.param(f"Key: {_ANT[:20]}[^1]{_ANT[20:]} ok\n\n[^1]: x", (_ANT,), id="footnote"),
        pytest.param(f"Key: {_ANT[:9]}![i](https://e.x/i.png){_ANT[9:]} ok", (_ANT,), id="image"),
        pytest.param(f"Key: {_ANT[:12]}<span></span>{_ANT[12:]} ok", (_ANT,), id="inline-html"),
        pytest.param(f"Key: sk&#45ant-{_ANT[7:]} ok", (_ANT,), id="bare-reference"),
        pytest.param(f"Key: {_ANT[:30]}&shy{_ANT[30:]} ok", (_ANT,), id="bare-named-reference"),
        pytest.param(
            f'{{"a": "{{\\"k\\": \\"{_ANT[:25]}\\\\u00ad{_ANT[25:]}\\"}}"}}',
            (_ANT,),
            id="nested-json-soft-hyphen",
        ),
        pytest.param(
            "See [the guide](https://example.com/" + "a" * 150 + ") then "
            f"p[ostgres](https://example.com/{'b' * 100})://admin:QXZJVWKY13579@db.internal ok",
            ("QXZJVWKY13579",),
            id="link-far-before-a-url-password",
        ),
        pytest.param(
            "Put this in the file:\n\n    -----BEGIN RSA PRIVATE KEY-----\n"
            f"    {_PEM_BODY[0]}\n    {_PEM_BODY[1]}\n    -----END RSA PRIVATE KEY-----\n\nDone.",
            _PEM_BODY,
            id="pem-indented-in-prose",
        ),
    ],
)
def test_keys_in_shapes_and_forms_found_in_the_field_never_show(
    mode: str, answer: str, secrets: tuple[str, ...]
) -> None:
    """Delta by delta (4 characters), every state and write as the client shows it."""
    chat = deliver(mode, [answer[i : i + 4] for i in range(0, len(answer), 4)])
    for secret in secrets:
        assert not leaks(chat, secret)
    assert any("[REDACTED:" in text for text in chat.visible())


def _template_renderer(text: str) -> str:
    """A renderer that shows a link's text only and resolves ``{{c}}`` to ``c``: the raw text
    hides a key that only its rendering shows."""
    text = re.sub(r"\[([^\]]*)\]\([^()\s]*\)", r"\1", text)
    return re.sub(r"\{\{(.)\}\}", r"\1", text).replace("<b>", "").replace("</b>", "")


@pytest.mark.parametrize("url_chars", [10, 64, 150, 2000])
def test_a_key_only_the_rendering_shows_is_masked_where_it_was_written(url_chars: int) -> None:
    """Far behind a long link URL, the raw characters of a key the rendering joins are found
    (an alignment of shown and raw characters lands inside the URL) and only they are replaced."""
    link = f"[the guide](https://example.com/{'a' * url_chars})"
    written = f"{_ANT[:12]}<b></b>{_ANT[12:]}"
    text = f"See {link} and {written} ok."
    redactor = Redactor()
    assert [h.name for h in redactor.hits(_template_renderer(text))] == ["anthropic_key"]
    out = redact_rendered(redactor, text, _template_renderer)
    assert out == f"See {link} and [REDACTED:anthropic_key] ok."


def test_a_key_no_anchor_finds_is_masked_by_its_line() -> None:
    """A spelling the anchors do not read (``{{c}}``) is masked with the line it is on; the
    other lines stay."""
    link = f"[the guide](https://example.com/{'a' * 200})"
    text = f"See {link}.\nKey: sk-ant-{{{{a}}}}{_ANT[8:]} ok\nThe end."
    out = redact_rendered(Redactor(), text, _template_renderer)
    assert "QXZJ" not in _template_renderer(out)
    assert out.startswith(f"See {link}.\n") and out.endswith("\nThe end.")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "steps",
    [
        # Found by the property above: inline HTML after a space at the end of a round was
        # shown; the next round made it vanish, and the reader saw "Bearer 7111…".
        [" Bearer <b></b", ROUND, ">711111111111111111111 ."],
        ["Bearer <b>", ROUND, "711111111111111111111 ."],
    ],
)
def test_inline_html_after_a_space_at_a_round_end_hides_no_token(
    mode: str, steps: list[object]
) -> None:
    chat = deliver(mode, steps, max_length=600)
    assert not leaks(chat, "711111111111111111111")
