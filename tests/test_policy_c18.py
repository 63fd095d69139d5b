"""Case C18 end to end: the reply's policy driving the delivery engine into a recorded chat.

Every state a user could have seen — each send and edit, every message of every state, failed
writes included — is checked, in ``partial``, ``multi_message`` (paragraphs and turns) and
``off``, not only the final text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.base import ChannelLimits
from config.models import GuardrailConfig, PolicyConfig
from orchestrator.delivery.events import (
    AnswerEnded,
    AnswerRefused,
    RoundEnded,
    TextEmitted,
    ToolFinished,
    ToolStarted,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.policy import REFUSAL_NOTICE, OutboundPolicy, Redactor, ReplyPolicy
from tests.fakes import FakeChat, ScriptedDelivery
from tests.policy_samples import texts_with_secrets, windows

KEY = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"
C18 = ["key: sk-ant-api03-", "AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH", "IIIIJJJJ done"]
ROUND = object()
"""A step: the round ends with a tool call (narration flushed, a tool status shown, a new round)."""

MODES = {
    "partial": {"mode": "partial"},
    "multi_message-paragraph": {"mode": "multi_message", "multi_message_unit": "paragraph"},
    "multi_message-turn": {"mode": "multi_message", "multi_message_unit": "turn"},
    "off": {"mode": "off"},
}


def deliver(
    mode: str,
    steps: Iterable[object],
    *,
    policy: ReplyPolicy | None = None,
    status: str = "⏳ lookup…",
    max_length: int = 4096,
) -> FakeChat:
    """Play ``steps`` (text deltas and :data:`ROUND`) through a policy and the engine, as the
    turn loop does, 0.25 s apart on a fake clock; returns the recorded chat."""
    policy = policy or ReplyPolicy(channel="fake", chat_id="chat")
    delivery = DeliverySettings(
        draft_update_interval_ms=500,
        multi_message_delay_ms=200,
        limits=ChannelLimits(max_length, "utf16"),
        **MODES[mode],  # type: ignore[arg-type]
    )
    run = ScriptedDelivery(delivery, guard=policy)
    run.play([], finish=False)

    def emit(text: str) -> None:
        if text:
            run.feed(TextEmitted(text))

    t, call = 0.0, 0
    policy.begin_round()
    for step in steps:
        t += 0.25
        run.advance_to(t)
        if step is ROUND:
            emit(policy.end_round())
            if policy.refusal is not None:
                run.feed(AnswerRefused(policy.refusal))
                run.finish()
                return run.chat
            run.feed(RoundEnded())
            call += 1
            run.feed(ToolStarted(call, policy.redact_line(status)))
            t += 2.0
            run.advance_to(t)
            finished = status.replace("⏳", "✓", 1).removesuffix("…") + " 2.0 s"
            run.feed(ToolFinished(call, policy.redact_line(finished)))
            policy.begin_round()
        else:
            assert isinstance(step, str)
            emit(policy.feed(step))
    emit(policy.finish())
    run.feed(AnswerEnded() if policy.refusal is None else AnswerRefused(policy.refusal))
    run.finish()
    return run.chat


def seen(chat: FakeChat) -> list[str]:
    """Every text a user could have seen: each message of each state, and each write."""
    texts = [text for _, state in chat.states for text in state]
    texts += [write.text for write in chat.chat_writes()]
    return texts


def assert_never_shown(chat: FakeChat, secret: str, *fragments: str) -> None:
    forbidden = windows(secret) | set(fragments)
    for text in seen(chat):
        leaked = sorted(w for w in forbidden if w in text)
        assert not leaked, (leaked, text)


def final_text(chat: FakeChat) -> str:
    return "\n".join(chat.visible())


@pytest.mark.parametrize("mode", MODES)
def test_c18_a_key_split_across_deltas(mode: str) -> None:
    chat = deliver(mode, C18)
    assert_never_shown(chat, KEY, "sk-")
    assert final_text(chat) == "key: [REDACTED:anthropic_key] done"


@pytest.mark.parametrize("mode", MODES)
def test_c18_the_split_between_two_messages_falls_inside_the_key(mode: str) -> None:
    prose = ("word " * 9 + "words\n") * 80  # 4080 characters of lines, no blank line
    steps = [prose[i : i + 40] for i in range(0, len(prose), 40)]
    steps += ["more key: sk-ant-api03-", "AAAABBBBCCCCDDDDEEEEFFFF", "GGGGHHHHIIIIJJJJ done.\n"]
    steps += ["and a closing line after the key."]
    # The raw key spans characters 4090..4143: across the 4096 limit of the first message.
    chat = deliver(mode, steps)
    assert_never_shown(chat, KEY, "sk-")
    assert len(chat.visible()) >= 2
    assert "more key: [REDACTED:anthropic_key] done." in final_text(chat)


@pytest.mark.parametrize("mode", MODES)
def test_c18_base64_padding_arrives_in_the_next_delta(mode: str) -> None:
    token = "dGhpcyBpcyBhIHNlY3JldCB0b2tlbg"
    steps = ["Use the header Authorization: Bearer ", token[:12], token[12:], "==", " to call it."]
    chat = deliver(mode, steps)
    assert_never_shown(chat, token + "==", "=")
    assert final_text(chat) == "Use the header Authorization: Bearer [REDACTED:bearer] to call it."


@pytest.mark.parametrize("mode", MODES)
def test_c18_a_key_split_across_a_tool_round(mode: str) -> None:
    steps = [
        "Let me look that up. The key is AKIA",
        "ABCDEFGH",
        ROUND,
        "IJKLMNOP, and that is all.",
    ]
    chat = deliver(mode, steps)
    assert_never_shown(chat, "AKIAABCDEFGHIJKLMNOP", "AKIA", "IJKL")
    assert "[REDACTED:aws_access_key], and that is all." in final_text(chat)
    assert "Let me look that up. The key is" in final_text(chat)


def test_c18_in_multi_message_turns_the_marker_opens_the_next_message() -> None:
    steps = ["Checking AKIAABCDEFGH", ROUND, "IJKLMNOP was found.", ROUND, "All clean now."]
    calls: list[str] = []

    def hook(channel: str, chat_id: str, text: str) -> str:
        calls.append(text)
        return text

    chat = deliver("multi_message-turn", steps, policy=ReplyPolicy(hook=hook))
    assert_never_shown(chat, "AKIAABCDEFGHIJKLMNOP", "AKIA", "IJKL")
    assert chat.visible() == ["Checking", "[REDACTED:aws_access_key] was found.", "All clean now."]
    assert calls == chat.visible()  # the hook ran once per piece, on redacted text


@pytest.mark.parametrize("mode", MODES)
def test_c18_a_status_line_never_shows_the_key(mode: str) -> None:
    chat = deliver(mode, ["Fetching.", ROUND, "Done."], status=f"⏳ fetch({KEY})…")
    assert_never_shown(chat, KEY, "sk-")


@pytest.mark.parametrize("mode", MODES)
def test_a_hook_that_completes_a_key_is_caught_in_delivery(mode: str) -> None:
    def sign(channel: str, chat_id: str, text: str) -> str:
        return text.replace("SIGNATURE", "AKIAABCDEFGHIJKLMNOP")

    chat = deliver(
        mode,
        ["First part.\n\n", "Signed: SIGNATURE.\n\n", "Last part."],
        policy=ReplyPolicy(hook=sign),
    )
    assert_never_shown(chat, "AKIAABCDEFGHIJKLMNOP", "AKIA")
    assert "Signed: [REDACTED:aws_access_key]." in final_text(chat)


@pytest.mark.parametrize(
    ("mode", "pieces"),
    [("partial", 1), ("off", 1), ("multi_message-paragraph", 3), ("multi_message-turn", 2)],
)
def test_the_hook_runs_once_per_delivered_piece_on_redacted_text(mode: str, pieces: int) -> None:
    calls: list[str] = []

    def hook(channel: str, chat_id: str, text: str) -> str:
        calls.append(text)
        return text

    steps = ["First paragraph, key sk-ant-", "api03-" + "A" * 30 + ".\n\n", "Second one.", ROUND]
    steps += ["Third, after the tool."]
    chat = deliver(mode, steps, policy=ReplyPolicy(hook=hook))
    assert len(calls) == pieces
    assert all("sk-" not in call for call in calls)
    assert "First paragraph, key [REDACTED:anthropic_key]." in final_text(chat)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool_round", [False, True])
def test_a_holding_guardrail_never_shows_a_refused_answer(mode: str, tool_round: bool) -> None:
    rails = [GuardrailConfig(kind="term_list", terms=["project zephyr"])]
    policy = OutboundPolicy.from_config(PolicyConfig(guardrails=rails)).new_reply("fake", "chat")
    steps: list[object] = ["Here is the plan for Project ", "Zephyr: " + "we go north. " * 30]
    if tool_round:
        steps = ["Looking it up.", ROUND, *steps]
    chat = deliver(mode, steps, policy=policy)
    for text in seen(chat):
        assert "zephyr" not in text.lower() and "north" not in text
    assert chat.visible()[-1] == REFUSAL_NOTICE


def test_a_non_holding_guardrail_replaces_what_was_shown() -> None:
    rails = [GuardrailConfig(kind="term_list", terms=["project zephyr"], holds_stream=False)]
    policy = OutboundPolicy.from_config(PolicyConfig(guardrails=rails)).new_reply("fake", "chat")
    chat = deliver("partial", ["Project Zephyr: ", *["we go north. "] * 40], policy=policy)
    assert any("north" in text for text in seen(chat))  # it streamed
    assert chat.visible() == [REFUSAL_NOTICE]


# -- the property, end to end ---------------------------------------------------------------------


@st.composite
def _steps(draw: st.DrawFn) -> tuple[str, list[str], list[object]]:
    text, planted = draw(texts_with_secrets(max_parts=25))
    steps: list[object] = []
    pos = 0
    while pos < len(text):
        size = draw(st.integers(1, 60))
        steps.append(text[pos : pos + size])
        pos += size
        if draw(st.integers(0, 15)) == 0:
            steps.append(ROUND)
    return text, [p.secret for p in planted], steps


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=_steps())
def test_property_no_state_of_any_mode_shows_a_planted_secret(
    mode: str, script: tuple[str, list[str], list[object]]
) -> None:
    text, secrets, steps = script
    chat = deliver(mode, steps, max_length=700)
    forbidden: set[str] = set().union(*(windows(s) for s in secrets)) if secrets else set()
    for shown in seen(chat):
        assert not [w for w in forbidden if w in shown], shown
    # Everything the model said arrives, redacted (whitespace between pieces aside).
    squeeze: Callable[[str], str] = lambda s: "".join(s.split())  # noqa: E731
    assert squeeze("".join(chat.visible())) == squeeze(Redactor().redact(text))
