"""The leak catalogue (architecture §4): shapes, order, markers, boundaries, prefilter, prefix
closure."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.models import PolicyConfig, SecretPatternConfig
from orchestrator.cli import main
from orchestrator.policy import BUILTIN_SHAPES, OutboundPolicy, PolicyError, Redactor, SecretShape
from orchestrator.policy.catalogue import Scan
from orchestrator.policy.outbound import extra_shapes
from tests.policy_samples import NEGATIVES, SAMPLES, secret_part

REDACTOR = Redactor()


def test_the_catalogue_holds_the_designed_shapes_in_order() -> None:
    assert [shape.name for shape in BUILTIN_SHAPES] == [
        "url_credential",
        "url_password",
        "private_key",
        "anthropic_key",
        "openai_key",
        "stripe_key",
        "aws_access_key",
        "github_token",
        "gitlab_token",
        "slack_token",
        "google_api_key",
        "huggingface_token",
        "sendgrid_key",
        "telegram_bot_token",
        "jwt",
        "bearer",
    ]


def test_every_shape_has_a_positive_sample() -> None:
    assert {name for name, _, _ in SAMPLES} == {shape.name for shape in BUILTIN_SHAPES}


@pytest.mark.parametrize(("name", "text", "secret"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_each_shape_is_replaced_by_its_marker(name: str, text: str, secret: str | None) -> None:
    hidden = secret_part(text, secret)
    for context in ("{}", "see {} now", "(\n{}\n)", "キーは{}です"):
        out = REDACTOR.redact(context.format(text))
        assert f"[REDACTED:{name}]" in out
        rest = out.replace(f"[REDACTED:{name}]", "")
        assert hidden not in rest
        assert hidden[:5] not in rest


@pytest.mark.parametrize("text", NEGATIVES)
def test_negatives_are_not_redacted(text: str) -> None:
    assert REDACTOR.redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "key: sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ done",
            "key: [REDACTED:anthropic_key] done",
        ),
        (
            "curl -H 'Authorization: Bearer abcdefghijklmnop0123=='",
            "curl -H 'Authorization: Bearer [REDACTED:bearer]'",
        ),
        ("GET /cb?token=QXZJ7VWKY9&page=2", "GET /cb?token=[REDACTED:url_credential]&page=2"),
        (
            "[docs](https://h.example/x?api_key=QXZJ7VWKY9)",
            "[docs](https://h.example/x?api_key=[REDACTED:url_credential])",
        ),
        ("postgres://admin:hunter2@db:5432/app", "postgres://[REDACTED:url_password]@db:5432/app"),
        ("AKIAIOSFODNN7EXAMPLE.", "[REDACTED:aws_access_key]."),
        ("sk-proj-Abc123Def456Ghi789Jkl012", "[REDACTED:openai_key]"),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", "Bearer [REDACTED:bearer]"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", "[REDACTED:jwt]"),
    ],
)
def test_exact_outputs(text: str, expected: str) -> None:
    assert REDACTOR.redact(text) == expected


def test_order_decides_between_shapes_at_one_position() -> None:
    # anthropic_key precedes openai_key; url_credential swallows a key inside its value.
    assert REDACTOR.redact("sk-ant-" + "a" * 30) == "[REDACTED:anthropic_key]"
    assert REDACTOR.redact("?token=sk-ant-" + "a" * 30) == "?token=[REDACTED:url_credential]"


def test_a_generic_keyword_counts_only_at_a_word_boundary() -> None:
    assert (
        REDACTOR.redact("task-list-with-a-very-long-name-indeed")
        == "task-list-with-a-very-long-name-indeed"
    )
    assert REDACTOR.redact("xASIAIOSFODNN7EXAMPLE") == "xASIAIOSFODNN7EXAMPLE"
    assert REDACTOR.redact("xsk-AAAA1BBBBCCCCDDDDEEEEFFFF") == "xsk-AAAA1BBBBCCCCDDDDEEEEFFFF"
    assert REDACTOR.redact("-AKIAIOSFODNN7EXAMPLE") == "-[REDACTED:aws_access_key]"
    assert REDACTOR.redact("鍵AKIAIOSFODNN7EXAMPLE") == "鍵[REDACTED:aws_access_key]"


@pytest.mark.parametrize(
    ("glued", "name"),
    [
        ("sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFF", "anthropic_key"),
        ("sk-proj-" + "AbCd1234" * 20, "openai_key"),  # a project key's length (164)
        ("ghp_AAAABBBBCCCCDDDDEEEEFFFF", "github_token"),
        ("github_pat_AAAABBBBCCCCDDDDEEEEFFFF", "github_token"),
        ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("xoxb-1234-AAAABBBBCCCC", "slack_token"),
        ("glpat-AAAABBBBCCCCDDDDEEEEFFFF", "gitlab_token"),
    ],
)
def test_a_prefix_specific_enough_to_stand_alone_needs_no_boundary(glued: str, name: str) -> None:
    assert REDACTOR.redact(f"id1{glued} ok") == f"id1[REDACTED:{name}] ok"


@pytest.mark.parametrize(
    "prose",
    [
        "see multitask-ant-colony-optimisation-2024-paper",
        "use flask-ant-design-components-v2-release",
        "file risk-proj-2024-Q3-roadmap-and-plans-final",
        "a desk-ant-API03-style name",
    ],
)
def test_a_glued_prefix_inside_a_word_needs_a_key_body(prose: str) -> None:
    assert REDACTOR.redact(prose) == prose


@pytest.mark.parametrize(
    ("look_alike", "name"),
    [
        ("AKlAIOSFODNN7EXAMPLE", "aws_access_key"),  # l for I
        ("AK1AIOSFODNN7EXAMPLE", "aws_access_key"),
        ("gIpat-AAAABBBBCCCCDDDDEEEEFFFF", "gitlab_token"),  # I for l
        ("\u0405k-ant-api03-AAAABBBBCCCCDDDDEEEEFFFF", "anthropic_key"),  # Cyrillic capital DZE
        ("SK-ANT-API03-AAAABBBBCCCCDDDDEEEEFFFF", "anthropic_key"),
    ],
)
def test_ascii_and_capital_look_alikes_of_a_prefix_are_the_prefix(
    look_alike: str, name: str
) -> None:
    assert REDACTOR.redact(f"id {look_alike} ok") == f"id [REDACTED:{name}] ok"


def test_markers_are_never_flagged_again() -> None:
    for _, text, _ in SAMPLES:
        once = REDACTOR.redact(f"a {text} b")
        assert REDACTOR.redact(once) == once


def test_clean_text_passes_the_prefilter_without_any_pattern() -> None:
    prose = "The quick brown fox jumps over the lazy dog. こんにちは世界。" * 50
    assert REDACTOR.candidates(prose) == ()
    assert REDACTOR.candidates(prose + " sk-x") == ("openai_key",)
    assert REDACTOR.candidates("Authorization: BEARER x") == ("bearer",)
    # An open text ending with a keyword prefix lets its shapes through.
    assert REDACTOR.candidates("the answer is AKI", open_end=True) == ("aws_access_key",)
    assert REDACTOR.candidates("the answer is AKI") == ()


def _secret_start(text: str, secret: str | None) -> int:
    hidden = secret_part(text, secret)
    return text.index(hidden)


@pytest.mark.parametrize(("name", "text", "secret"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_every_prefix_of_a_secret_is_a_possible_secret_start(
    name: str, text: str, secret: str | None
) -> None:
    """Prefix-closed: cut anywhere from the first keyword character on, nothing of the secret
    is settled; the rest of the text before it is."""
    written = "so here it is: " + text
    begin = len("so here it is: ") + _secret_start(text, secret)
    for end in range(begin + 1, len(written) + 1):
        prefix = written[:end]
        scan = REDACTOR.scan(prefix, 0, len(prefix), open_end=True)
        assert REDACTOR.redact(written).startswith(scan.text), prefix
        if scan.cut > begin:  # settled only once the match is complete, and then masked
            assert f"[REDACTED:{name}]" in scan.text, prefix
        else:
            assert scan.open_at is not None


def test_a_settled_match_is_not_open() -> None:
    text = "key AKIAIOSFODNN7EXAMPLE and more"
    scan = REDACTOR.scan(text, 0, len(text), open_end=True)
    assert scan == Scan("key [REDACTED:aws_access_key] and more", len(text), None, first_hit=4)


def test_scans_from_a_settled_position_join_to_the_whole_redaction() -> None:
    text = "a sk-ant-" + "b" * 30 + " c AKIAIOSFODNN7EXAMPLE d"
    first = REDACTOR.scan(text, 0, 4, open_end=True)
    assert first.cut == 2  # the key starting at 2 crosses the stop: end before it
    rest = REDACTOR.scan(text, first.cut, len(text), open_end=False)
    assert first.text + rest.text == REDACTOR.redact(text)


def test_extra_patterns_come_after_the_built_in_shapes() -> None:
    config = PolicyConfig(
        extra_secret_patterns=[
            SecretPatternConfig(name="acme", regex=r"acme_[a-z0-9]{8}", keywords=["acme_"]),
            SecretPatternConfig(name="anywhere", regex=r"(?i)zz[0-9]{4}"),
        ]
    )
    policy = OutboundPolicy.from_config(config)
    assert policy.redact("id acme_ab12cd34 ok") == "id [REDACTED:acme] ok"
    assert policy.redact("ZZ1234 and zz9999") == "[REDACTED:anywhere] and [REDACTED:anywhere]"
    # The inline flag of one extra pattern does not leak into the others.
    assert policy.redact("ACME_AB12CD34") == "ACME_AB12CD34"
    assert policy.redact("sk-ant-" + "a" * 30) == "[REDACTED:anthropic_key]"


def test_an_extra_pattern_with_a_secret_group_keeps_the_rest() -> None:
    shapes = extra_shapes(
        [SecretPatternConfig(name="pin", regex=r"PIN (?P<secret>[0-9]{6})", keywords=["PIN "])]
    )
    assert Redactor((*BUILTIN_SHAPES, *shapes)).redact("my PIN 123456.") == "my PIN [REDACTED:pin]."


def test_an_unusable_extra_pattern_is_named() -> None:
    # The config model already refuses these; the policy checks again for hand-built configs.
    with pytest.raises(PolicyError) as caught:
        extra_shapes(
            [
                SecretPatternConfig(name="ok", regex="x+"),
                SecretPatternConfig.model_construct(name="bad", regex="b*", keywords=[]),
            ]
        )
    assert caught.value.key == "policy.extra_secret_patterns[1].regex"
    assert "'bad'" in caught.value.message
    with pytest.raises(ValueError, match="'broken'"):
        Redactor((SecretShape("broken", "(unclosed"),))


def test_an_invalid_regex_fails_check_config_with_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "relaybot.yaml"
    path.write_text(
        "providers:\n  local:\n    kind: ollama\n    model: llama3\n"
        "agent:\n  providers: [local]\n"
        "policy:\n  extra_secret_patterns:\n    - name: acme\n      regex: 'acme_[a-z'\n"
        "channels:\n  term:\n    kind: console\n",
        encoding="utf-8",
    )
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "policy.extra_secret_patterns[0].regex" in err
    assert "'acme'" in err


def test_telegram_bot_token_inside_a_bot_api_url() -> None:
    from orchestrator.policy import Redactor

    url = "https://api.telegram.org/bot1234567890:AAHfhd83kd8dk3kd93kdkd93kdk39dk3kdk/getMe"
    assert Redactor().redact(url) == (
        "https://api.telegram.org/bot[REDACTED:telegram_bot_token]/getMe"
    )
