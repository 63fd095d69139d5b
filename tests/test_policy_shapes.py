"""Shapes are specific, forms are read as a reader reads them (architecture §4), and extra patterns
are bounded: the cases of the outbound-policy issue, one by one, on the redactor and the reply
policy (the same cases run through the Telegram wire in ``test_policy_telegram_e2e.py``)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from channels.telegram.format import markdown_to_telegram
from config.models import PolicyConfig, SecretPatternConfig
from orchestrator.policy import OutboundPolicy, PolicyError, Redactor, ReplyPolicy, SecretShape
from orchestrator.policy.catalogue import BUILTIN_SHAPES
from tests.policy_forms import reader_view
from tests.policy_hooks import guard_here

REPO = Path(__file__).resolve().parents[1]
REDACTOR = Redactor()
ANT = "sk-ant-api03-QXZJVWKY13579QXZJVWKY13579QXZJ"
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nQXZJVWKY13579QXZJVWKY13579QXZJVWKY1357=="


def _hidden(text: str, *fragments: str) -> None:
    out = REDACTOR.redact(text)
    for shown in (out, reader_view(out)):
        for fragment in fragments:
            assert fragment not in shown, (fragment, out)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (f"_{ANT}_", "QXZJVWKY"),  # italics: "_" is a word character
        ("sk\\_live\\_51HqQXZJVWKY13579abcd", "QXZJVWKY"),  # Markdown escapes
        (f"sk&#45;ant&#45;{ANT[7:]}", "QXZJVWKY"),  # HTML entities
        ("https://x.example/cb?a=1&amp;token=QXZJ7VWKY9Z3", "QXZJ7VWKY9Z3"),
        ('{"note": "line\\n' + ANT + '"}', "QXZJVWKY"),  # JSON: \n before the key
        ('{"k": "sk\\u002dant\\u002dapi03-QXZJVWKY13579QXZJVWKY13579"}', "QXZJVWKY"),
        ("%22" + ANT + "%22", "QXZJVWKY"),  # percent-encoding
        ("q=%22sk%5Cu002dant%5Cu002dapi03-QXZJVWKY13579QXZJVWKY13579%22", "QXZJVWKY"),
        ("https://app.example/cb#access_token=QXZJ7VWKY9Z3&state=1", "QXZJ7VWKY9Z3"),
        (ANT[:20] + "\u200b" + ANT[20:], "QXZJVWKY"),  # a zero-width space inside
        (ANT[:20] + "\u00ad" + ANT[20:], "QXZJVWKY"),  # a soft hyphen inside
        ("".join(chr(ord(c) + 0xFEE0) for c in "sk-ant-") + ANT[7:], "QXZJVWKY"),  # full width
        ("sk-ant-api03-[QXZJVWKY1357](https://example.com)9QXZJVWKY13579", "QXZJVWKY"),
        ("postgres://admin:p@ss/w0rd@db.internal:5432/app", "p@ss/w0rd"),
        ("https://bob:s3cr/et@example.com/x", "s3cr/et"),
        (
            f"> -----BEGIN RSA PRIVATE KEY-----\n> {PEM_BODY.replace(chr(10), chr(10) + '> ')}\n"
            "> -----END RSA PRIVATE KEY-----",
            "QXZJVWKY",
        ),
    ],
)
def test_a_secret_in_any_form_a_reader_decodes_is_redacted(text: str, fragment: str) -> None:
    _hidden(f"here: {text} (end)", fragment)


def test_a_gcp_service_account_json_hides_its_whole_key_body() -> None:
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7QXZJVWKY13579"
    key = f"-----BEGIN PRIVATE KEY-----\\n{body}\\nQXZJVWKY13579abcdEFGH==\\n"
    key += "-----END PRIVATE KEY-----\\n"
    text = '{"type": "service_account", "private_key_id": "abc", "private_key": "' + key + '"}'
    out = REDACTOR.redact(text)
    assert "MIIEvQ" not in out and "QXZJVWKY" not in out and "[REDACTED:private_key]" in out
    assert out.startswith('{"type": "service_account"')


def test_a_pgp_private_key_block_is_redacted() -> None:
    block = (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n"
        "lQOYBF0QXZJVWKY13579abcdEFGHijklMNOPqrstUVWXyz0123456789+/\n"
        "QXZJVWKY13579abcdEFGHijklMNOP==\n=QXZJ\n-----END PGP PRIVATE KEY BLOCK-----"
    )
    assert REDACTOR.redact(f"key:\n{block}\ndone") == "key:\n[REDACTED:private_key]\ndone"


def test_a_pem_header_mentioned_in_prose_swallows_nothing_and_never_stalls() -> None:
    text = (
        "A file that starts with -----BEGIN RSA PRIVATE KEY----- holds a key in PKCS#1 form; "
        "keep it out of the repository and rotate it when it leaks.\n\n" + "More prose. " * 40
    )
    assert REDACTOR.redact(text) == text
    policy = ReplyPolicy()
    policy.begin_round()
    streamed = "".join(policy.feed(text[i : i + 5]) for i in range(0, len(text), 5))
    assert len(streamed) >= len(text) - 200  # it streamed on, held back only by the window
    assert streamed + policy.finish() == text


@pytest.mark.parametrize(
    "text",
    [
        "Use bearer tokens for service-to-service calls.",
        "Send it as a Bearer authentication-header-value, then retry.",
        "The sk-learn-compatible-estimators API and scikit-learn work together.",
        "xoxo-hugs-and-kisses from the whole team",
        "See you at ASIAPACIFIC2024SUMMIT in May.",
        "The AKIAEXAMPLEKEYNAMESPACEIDENT field is documented.",
        "Mention -----BEGIN OPENSSH PRIVATE KEY----- in the docs.",
        "Open http://localhost:8000/search?key=pydoc to search the docs.",
    ],
)
def test_lookalikes_in_ordinary_prose_stay(text: str) -> None:
    assert REDACTOR.redact(text) == text


def test_real_shapes_next_to_their_lookalikes_are_still_redacted() -> None:
    assert REDACTOR.redact("Bearer QXZJVWKY13579abcdefgh") == "Bearer [REDACTED:bearer]"
    assert REDACTOR.redact("xoxb-123456789012-QXZJVWKY13579") == "[REDACTED:slack_token]"
    assert REDACTOR.redact("ASIAQXZJVWKY13579QXZ is it") == "[REDACTED:aws_access_key] is it"
    assert REDACTOR.redact("sk-proj-Q7abcdefghijklmnopqrstuv") == "[REDACTED:openai_key]"


def telegram_visible_text(markdown: str) -> str:
    """What Telegram shows of ``markdown`` sent formatted (``TelegramChannel.visible_text``)."""
    return markdown_to_telegram(markdown).text


def test_a_key_rendered_whole_only_by_the_renderer_is_redacted_in_the_final() -> None:
    policy = ReplyPolicy(render=telegram_visible_text)
    final = guard_here(policy, "the key sk_live_**51HqQXZJVWKY13579abcd** here") or ""
    assert "QXZJVWKY" not in telegram_visible_text(final)


# -- pieces join with the separator delivered --------------------------------------------


def test_a_paragraph_break_between_pieces_stays_a_break() -> None:
    policy = ReplyPolicy()
    policy.begin_round()
    streamed = (
        policy.feed("The prefix is AKIA\n\n") + policy.feed("IOSFODNN7EXAMPLE") + policy.finish()
    )
    assert streamed == "The prefix is AKIA\n\nIOSFODNN7EXAMPLE"
    # Each piece carries its place in the emitted text (GuardPiece.span): the blank line
    # between them is read there.
    assert guard_here(policy, "The prefix is AKIA", (0, 18)) == "The prefix is AKIA"
    assert guard_here(policy, "IOSFODNN7EXAMPLE", (20, 36)) == "IOSFODNN7EXAMPLE"


# -- extra patterns ---------------------------------------------------------------------------


@pytest.mark.parametrize("keywords", [["yy"], ["ZZ"], []])
def test_an_extra_pattern_matches_whatever_its_keywords(keywords: list[str]) -> None:
    config = PolicyConfig(
        extra_secret_patterns=[
            SecretPatternConfig(name="nokw", regex="zz[0-9]{8}", keywords=keywords)
        ]
    )
    policy = OutboundPolicy.from_config(config)
    assert policy.redact("code zz12345678 here") == "code [REDACTED:nokw] here"
    reply = policy.new_reply("tg", "1")
    reply.begin_round()
    text = "the code is zz12345678, keep it." + " more" * 40
    out = "".join(reply.feed(text[i : i + 4]) for i in range(0, len(text), 4)) + reply.finish()
    assert "zz1234" not in out and "[REDACTED:nokw]" in out


@pytest.mark.parametrize("regex", ["(a|aa)+b", "(a+)+b", r"(\w+\s?)+$", "(x+x+)+y"])
def test_a_catastrophic_extra_pattern_is_rejected_at_load(regex: str) -> None:
    config = PolicyConfig(extra_secret_patterns=[SecretPatternConfig(name="slow", regex=regex)])
    with pytest.raises(PolicyError, match="backtracks catastrophically") as caught:
        OutboundPolicy.from_config(config)
    assert caught.value.key == "policy.extra_secret_patterns[0].regex"
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [("(a|aa)+b", "backtracks catastrophically"), ("zz[0-9", "does not compile")],
)
def test_check_config_rejects_an_unusable_pattern_in_one_line(
    tmp_path: Path, pattern: str, fragment: str
) -> None:
    config = tmp_path / "relaybot.yaml"
    config.write_text(
        f"policy:\n  extra_secret_patterns:\n    - {{name: slow, regex: '{pattern}'}}\n"
        "providers:\n  main: {kind: openai_chat, base_url: 'http://127.0.0.1:9/v1', "
        "api_key: k, model: m}\n"
        "agent: {providers: [main]}\n"
        "channels:\n  console: {kind: console}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "check-config", str(config)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "extra_secret_patterns[0].regex" in lines[0] and fragment in lines[0]


def _slow_redactor() -> Redactor:
    slow = SecretShape("slow", "(a|aa)+b", timeout_secs=0.05)
    return Redactor((*BUILTIN_SHAPES, slow))


def test_a_pattern_that_times_out_redacts_conservatively_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    redactor = _slow_redactor()
    with caplog.at_level(logging.WARNING):
        first = redactor.redact("x " + "a" * 40 + "c")
        second = redactor.redact("y " + "a" * 40 + "c")
    assert first == "[REDACTED:slow]" and second == "[REDACTED:slow]"
    assert len([r for r in caplog.records if "slow" in r.getMessage()]) == 1


async def test_a_pattern_that_times_out_never_stalls_the_event_loop() -> None:
    """While one reply's redaction times out on every look, the event loop keeps turning: no
    other task waits longer than a Telegram draft interval (1000 ms)."""
    policy = ReplyPolicy(_slow_redactor())
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            before = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - before - 0.01)

    async def stream() -> None:
        policy.begin_round()
        text = ("a" * 40 + "c ") * 20
        for i in range(0, len(text), 6):
            policy.feed(text[i : i + 6])
            await asyncio.sleep(0)
        policy.finish()
        done.set()

    await asyncio.gather(ticker(), stream())
    assert lags and max(lags) < 1.0
