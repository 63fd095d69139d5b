"""ReplyPolicy (architecture §4): rounds and restarts, delivered pieces, the hook, guardrails,
logs."""

from __future__ import annotations

import logging

import pytest

from config.models import GuardrailConfig, PolicyConfig, SecretPatternConfig
from orchestrator.ops.logsetup import RedactingFormatter
from orchestrator.policy import REFUSAL_NOTICE, OutboundPolicy, PolicyError, ReplyPolicy, TermList
from orchestrator.policy.hook import HOOK_OUTPUT_MAX_CHARS, load_hook
from tests import policy_hooks
from tests.policy_hooks import guard_here

KEY = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"


def _stream(policy: ReplyPolicy, *rounds: str, step: int = 7) -> list[str]:
    """Feed rounds (cut into deltas); returns each round's released text."""
    released = []
    for index, text in enumerate(rounds):
        policy.begin_round()
        out = "".join(policy.feed(text[i : i + step]) for i in range(0, len(text), step))
        last = index == len(rounds) - 1
        released.append(out + (policy.finish() if last else policy.end_round()))
    return released


# -- rounds ------------------------------------------------------------------------------------


def test_a_round_releases_its_narration_but_holds_a_key_start() -> None:
    policy = ReplyPolicy()
    first, second = _stream(policy, "Let me look. AKIAABCDEFGH", "IJKLMNOP is the key.")
    assert first == "Let me look. "
    assert second == "[REDACTED:aws_access_key] is the key."


def test_restart_forgets_the_failed_attempt() -> None:
    policy = ReplyPolicy()
    policy.begin_round()
    shown = policy.feed("a failed attempt " * 20)
    assert shown  # the attempt was streamed
    policy.restart()
    out = policy.feed("the answer") + policy.finish()
    assert out == "the answer"


# -- delivered pieces --------------------------------------------------------------------------


def test_a_key_split_across_two_turns_is_never_shown_and_the_marker_appears() -> None:
    policy = ReplyPolicy()
    first, second = _stream(policy, "Checking AKIAABCDEFGH", "IJKLMNOP was found.")
    pieces = [guard_here(policy, first), guard_here(policy, second)]
    assert pieces == ["Checking ", "[REDACTED:aws_access_key] was found."]
    assert not any("AKIA" in p or "IJKL" in p for p in pieces if p)


def test_a_secret_the_hook_completes_is_caught() -> None:
    policy = ReplyPolicy(hook=policy_hooks.sign_with_key_start)
    assert guard_here(policy, "First turn.") == "First turn. AKIAABCDEFGH"
    # The next piece's text completes the key the hook started: its part is masked.
    assert guard_here(policy, "IJKLMNOP then") == "[REDACTED:aws_access_key] then AKIAABCDEFGH"


def test_a_secret_the_hook_writes_whole_is_caught() -> None:
    policy = ReplyPolicy(hook=lambda channel, chat, text: f"{text} (token {KEY})")
    assert guard_here(policy, "Done.") == "Done. (token [REDACTED:anthropic_key])"


def test_a_clean_piece_after_a_redacted_one_is_sent_unchanged() -> None:
    policy = ReplyPolicy()
    assert guard_here(policy, f"the key {KEY}") == "the key [REDACTED:anthropic_key]"
    assert guard_here(policy, "All good here.") == "All good here."
    assert guard_here(policy, "[REDACTED:anthropic_key] again") == "[REDACTED:anthropic_key] again"


def test_only_the_last_512_characters_of_history_are_context() -> None:
    policy = ReplyPolicy(hook=lambda channel, chat, text: text)
    guard_here(policy, "AKIAABCD" + "EFGH")  # a key start, delivered (the hook allowed it)
    assert guard_here(policy, "IJKLMNOP rest") == "[REDACTED:aws_access_key] rest"
    guard_here(policy, "AKIAABCDEFGH")
    guard_here(policy, " " * 600)
    assert guard_here(policy, "IJKLMNOP") == "IJKLMNOP"


def test_redact_line_masks_status_lines_and_notices() -> None:
    policy = ReplyPolicy()
    assert policy.redact_line(f"⏳ fetch {KEY}…") == "⏳ fetch [REDACTED:anthropic_key]…"


# -- the hook ----------------------------------------------------------------------------------


def test_the_hook_is_loaded_from_its_import_path_and_sees_redacted_text() -> None:
    policy = OutboundPolicy.from_config(
        PolicyConfig(on_message_sending="tests.policy_hooks:record")
    ).new_reply("tg", "42")
    policy_hooks.calls.clear()
    (text,) = _stream(policy, f"the key is {KEY} ok")
    assert guard_here(policy, text) == "the key is [REDACTED:anthropic_key] ok"
    assert policy_hooks.calls == [("tg", "42", "the key is [REDACTED:anthropic_key] ok")]


def test_the_hook_rewrites_or_cancels_a_piece() -> None:
    assert guard_here(ReplyPolicy(hook=policy_hooks.shout), "hello") == "HELLO"
    assert guard_here(ReplyPolicy(hook=policy_hooks.cancel), "hello") is None


def test_a_failing_hook_raises_for_that_piece_and_the_next_goes_on() -> None:
    """Its error reaches delivery, which withholds that piece (tests/test_hook_workers.py)."""
    calls = iter([RuntimeError("broken"), "fine"])

    def flaky(channel: str, chat_id: str, text: str) -> str:
        outcome = next(calls)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    policy = ReplyPolicy(hook=flaky, channel="tg", chat_id="7")
    with pytest.raises(RuntimeError, match="broken"):
        guard_here(policy, "first")
    assert guard_here(policy, "second") == "fine"  # the reply goes on


def test_a_hook_returning_neither_text_nor_none_fails_closed() -> None:
    with pytest.raises(TypeError, match="returned int"):
        guard_here(ReplyPolicy(hook=policy_hooks.number), "x")


def test_hook_output_is_cut_to_20000_characters() -> None:
    out = guard_here(ReplyPolicy(hook=policy_hooks.huge), "start ")
    assert out is not None
    assert len(out) == HOOK_OUTPUT_MAX_CHARS
    assert out.startswith("start x") and out.endswith("x…")


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("no_colon", "expected 'package.module:function'"),
        ("tests.no_such_module:f", "cannot import 'tests.no_such_module'"),
        ("tests.policy_hooks:missing", "has no attribute 'missing'"),
        ("tests.policy_hooks:not_callable", "is not callable"),
        ("tests.policy_hooks:asynchronous", "must be a plain function"),
    ],
)
def test_a_hook_that_cannot_be_loaded_is_a_policy_error(path: str, fragment: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_hook(path)
    assert caught.value.key == "policy.on_message_sending"
    assert fragment in caught.value.message


# -- guardrails --------------------------------------------------------------------------------


def _policy(*guardrails: GuardrailConfig) -> ReplyPolicy:
    return OutboundPolicy.from_config(PolicyConfig(guardrails=list(guardrails))).new_reply("c", "1")


def test_a_holding_deny_list_streams_nothing_and_refuses() -> None:
    policy = _policy(GuardrailConfig(kind="term_list", terms=["Project X"]))
    policy.begin_round()
    assert [policy.feed(d) for d in ("About project\n", "  x: it is a secret plan. " * 9)] == [
        "",
        "",
    ]
    assert policy.finish() == ""
    assert policy.refusal == REFUSAL_NOTICE
    assert policy.feed("more") == "" and policy.end_round() == ""


def test_a_holding_list_releases_a_clean_round_whole_at_its_end() -> None:
    policy = _policy(GuardrailConfig(kind="term_list", terms=["forbidden"]))
    text = "A clean first round, long enough to pass the window's holdback. " * 4
    policy.begin_round()
    assert policy.feed(text) == ""
    assert policy.end_round() == text
    assert policy.refusal is None


def test_whole_words_only_and_case_insensitive() -> None:
    rail = TermList(["secret plan"], "deny")
    assert rail.refuses("The SECRET   Plan.") and rail.refuses("the secret plan")
    assert not rail.refuses("secret planning") and not rail.refuses("topsecret plan")
    assert TermList(["秘密"], "deny").refuses("これは秘密です")


def test_a_redact_list_masks_terms_even_split_across_deltas() -> None:
    policy = _policy(
        GuardrailConfig(kind="term_list", terms=["Zephyr"], action="redact", holds_stream=False)
    )
    text = "Codename zep" + "hyr is ready; ZEPHYR-2 too, but not zephyrs. " + "pad " * 40
    policy.begin_round()
    shown = ""
    for i in range(0, len(text), 5):
        shown += policy.feed(text[i : i + 5])
        assert "zep" not in shown.lower().replace("zephyrs", "")
    shown += policy.finish()
    assert shown.startswith(
        "Codename [REDACTED:term] is ready; [REDACTED:term]-2 too, but not zephyrs."
    )
    assert policy.refusal is None


def test_a_non_holding_deny_list_streams_then_refuses_after_the_round() -> None:
    policy = _policy(GuardrailConfig(kind="term_list", terms=["drop table"], holds_stream=False))
    policy.begin_round()
    shown = policy.feed("Sure, run DROP TABLE users; " + "then relax. " * 20)
    assert shown  # streamed while the round ran
    assert policy.end_round() == ""
    assert policy.refusal == REFUSAL_NOTICE


def test_a_restart_drops_the_withheld_text_of_a_holding_list() -> None:
    policy = _policy(GuardrailConfig(kind="term_list", terms=["forbidden"]))
    policy.begin_round()
    policy.feed("the forbidden attempt " * 10)
    policy.restart()
    policy.feed("a clean attempt")
    assert policy.finish() == "a clean attempt"
    assert policy.refusal is None


# -- config and logs ---------------------------------------------------------------------------


def test_from_config_builds_extras_terms_and_the_hook() -> None:
    outbound = OutboundPolicy.from_config(
        PolicyConfig(
            on_message_sending="tests.policy_hooks:shout",
            extra_secret_patterns=[
                SecretPatternConfig(name="acme", regex="acme_[0-9]{6}", keywords=["acme_"])
            ],
            guardrails=[GuardrailConfig(kind="term_list", terms=["zephyr"], action="redact")],
        )
    )
    assert outbound.redact("acme_123456 zephyr") == "[REDACTED:acme] [REDACTED:term]"
    reply = outbound.new_reply("c", "1")
    (text,) = _stream(reply, "ok acme_123456 zephyr")
    assert text == "ok [REDACTED:acme] [REDACTED:term]"
    assert guard_here(reply, text) == "OK [REDACTED:ACME] [REDACTED:TERM]"  # the hook ran


def test_log_lines_pass_through_the_same_redactor() -> None:
    outbound = OutboundPolicy.from_config()
    formatter = RedactingFormatter(outbound.redact)
    record = logging.LogRecord(
        "relaybot", logging.INFO, __file__, 1, "sent %s", (f"key: {KEY}",), None
    )
    line = formatter.format(record)
    assert "[REDACTED:anthropic_key]" in line and "sk-" not in line
    json_line = RedactingFormatter(outbound.redact, "json").format(record)
    assert "sk-" not in json_line
