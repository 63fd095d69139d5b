"""The delivery engine in ``multi_message`` and ``off`` modes, scripted on a fake clock."""

from __future__ import annotations

from itertools import pairwise

import pytest

from channels.base import ChannelLimits
from orchestrator.delivery.events import (
    AnswerEnded,
    AnswerInterrupted,
    AnswerRefused,
    GuardPiece,
    Restarted,
    RoundEnded,
    TextEmitted,
    ToolFinished,
    ToolStarted,
)
from orchestrator.delivery.planning import RESTARTED_NOTICE
from orchestrator.delivery.settings import DeliverySettings
from tests.fakes import (
    Fail,
    FakeChat,
    GuardStub,
    ScriptedDelivery,
    rate_limited,
    timeout,
    write_failed,
)
from tests.test_delivery_partial import deltas, words

MATRIX = DeliverySettings(
    mode="multi_message",
    multi_message_unit="paragraph",
    draft_update_interval_ms=1500,
    multi_message_delay_ms=800,
    limits=ChannelLimits(4000, "chars"),
)
TELEGRAM_TURNS = DeliverySettings(
    mode="multi_message",
    multi_message_unit="turn",
    draft_update_interval_ms=1000,
    limits=ChannelLimits(4096, "utf16"),
)
OFF = DeliverySettings(mode="off", limits=ChannelLimits(2000, "chars"))
STATUS = "⏳ current_time…"
DONE = "✓ current_time 0.4 s"
MARKER = "⚠️ Answer interrupted: the model stopped before finishing"


def sent(chat: FakeChat) -> list[tuple[str, bool]]:
    return [(w.text, w.formatted) for w in chat.chat_writes("send") if w.outcome == "ok"]


# -- multi_message: paragraphs --------------------------------------------------------------


def test_each_completed_paragraph_is_its_own_message_and_fences_hold_blank_lines() -> None:
    text = "Para one.\n\nPara two.\n\n```py\ncode\n\nmore\n```\n\nThe end."
    guard = GuardStub()
    run = ScriptedDelivery(MATRIX, guard=guard)
    run.play([*deltas(text, 4, step=0.2), (20.0, AnswerEnded())])
    pieces = ["Para one.", "Para two.", "```py\ncode\n\nmore\n```", "The end."]
    assert sent(run.chat) == [(p, True) for p in pieces]
    assert guard.pieces == pieces
    sends = run.chat.chat_writes("send")
    assert sends[0].t < 20.0  # sent as soon as the paragraph completed
    assert all(b.t - a.t >= 1.5 for a, b in pairwise(sends))


def test_sends_are_spaced_by_the_multi_message_delay() -> None:
    settings = DeliverySettings(
        mode="multi_message", draft_update_interval_ms=100, multi_message_delay_ms=800
    )
    run = ScriptedDelivery(settings)
    run.play([(0.0, TextEmitted("a\n\nb\n\nc\n\nd")), (0.1, AnswerEnded())])
    assert [w.t for w in run.chat.chat_writes()] == pytest.approx([0.0, 0.8, 1.6, 2.4])


def test_a_paragraph_outgrowing_the_limit_is_sent_in_parts_while_it_streams() -> None:
    settings = DeliverySettings(mode="multi_message", limits=ChannelLimits(300, "chars"))
    text = words(1000)
    run = ScriptedDelivery(settings)
    run.play([*deltas(text, 50, step=0.5), (30.0, AnswerEnded())])
    messages = run.chat.visible()
    assert len(messages) >= 4 and all(len(m) <= 300 for m in messages)
    assert run.chat.chat_writes("send")[0].t < 10.0
    assert " ".join(messages).split() == text.split()


def test_the_rest_of_a_turn_is_flushed_when_the_round_ends() -> None:
    run = ScriptedDelivery(MATRIX)
    run.play(
        [
            (0.0, TextEmitted("Let me look that up")),
            (1.0, RoundEnded()),
            (1.0, ToolStarted(1, STATUS)),
            (3.0, ToolFinished(1, DONE)),
            (4.0, TextEmitted("Found it.")),
            (5.0, AnswerEnded()),
        ]
    )
    assert run.chat.visible() == ["Let me look that up", "Found it."]
    assert run.chat.chat_writes()[0].t == 1.0
    assert run.chat.typing  # the tool status shows as typing only


def test_show_tool_status_sends_each_status_as_its_own_plain_message_edited_when_done() -> None:
    settings = DeliverySettings(mode="multi_message", show_tool_status=True)
    run = ScriptedDelivery(settings)
    run.play(
        [
            (0.0, TextEmitted("Checking.")),
            (0.1, RoundEnded()),
            (0.1, ToolStarted(1, STATUS)),
            (1.5, ToolFinished(1, DONE)),
            (1.6, TextEmitted("Noon.")),
            (1.7, AnswerEnded()),
        ]
    )
    assert sent(run.chat) == [("Checking.", True), (STATUS, False), ("Noon.", True)]
    # The status message is edited once, an interval after its send; the answer an
    # interval after that edit.
    writes = [(w.t, w.kind, w.text) for w in run.chat.chat_writes()]
    assert writes == [
        (0.1, "send", "Checking."),
        (1.1, "send", STATUS),
        (2.1, "edit", DONE),
        (3.1, "send", "Noon."),
    ]
    assert run.chat.visible() == ["Checking.", DONE, "Noon."]


def test_a_status_that_finished_before_it_was_sent_is_sent_finished() -> None:
    settings = DeliverySettings(mode="multi_message", show_tool_status=True)
    run = ScriptedDelivery(settings)
    run.play(
        [
            (0.0, TextEmitted("Checking.")),
            (0.1, RoundEnded()),
            (0.1, ToolStarted(1, STATUS)),
            (0.5, ToolFinished(1, DONE)),
            (0.6, TextEmitted("Noon.")),
            (0.7, AnswerEnded()),
        ]
    )
    assert sent(run.chat) == [("Checking.", True), (DONE, False), ("Noon.", True)]
    assert [w.kind for w in run.chat.chat_writes()] == ["send"] * 3


# -- multi_message: turns -----------------------------------------------------------------


def test_telegram_sends_one_message_per_completed_turn() -> None:
    guard = GuardStub()
    run = ScriptedDelivery(TELEGRAM_TURNS, guard=guard)
    run.play(
        [
            (0.0, TextEmitted("Let me check")),
            (0.5, TextEmitted(" the time.\n\nOne moment.")),
            (2.0, RoundEnded()),
            (2.0, ToolStarted(1, STATUS)),
            (2.5, ToolFinished(1, DONE)),
            (3.0, TextEmitted("It is noon.\n\n")),
            (3.5, TextEmitted("Have a nice day.")),
            (9.0, AnswerEnded()),
        ]
    )
    turns = ["Let me check the time.\n\nOne moment.", "It is noon.\n\nHave a nice day."]
    assert run.chat.visible() == turns
    assert guard.pieces == turns
    assert [w.t for w in run.chat.chat_writes()] == [2.0, 9.0]


def test_a_turn_longer_than_the_limit_is_split_in_order() -> None:
    settings = DeliverySettings(
        mode="multi_message", multi_message_unit="turn", limits=ChannelLimits(500, "utf16")
    )
    text = words(1800)
    run = ScriptedDelivery(settings)
    run.play([*deltas(text, 100, step=0.1), (3.0, AnswerEnded())])
    messages = run.chat.visible()
    assert len(messages) == 4
    assert " ".join(messages).split() == text.split()


# -- multi_message: restart, interruption, refusal ------------------------------------------


def test_restart_after_a_piece_was_shown_sends_the_notice_before_the_new_attempt() -> None:
    run = ScriptedDelivery(MATRIX)
    run.play(
        [
            (0.0, TextEmitted("First paragraph.\n\nSecond, cut")),
            (3.0, Restarted()),
            (3.1, TextEmitted("A fresh answer.")),
            (4.0, AnswerEnded()),
        ]
    )
    assert run.chat.visible() == ["First paragraph.", RESTARTED_NOTICE, "A fresh answer."]


def test_restart_before_anything_was_shown_sends_no_notice_and_drops_the_held_text() -> None:
    guard = GuardStub()
    run = ScriptedDelivery(MATRIX, guard=guard)
    run.play(
        [
            (0.0, TextEmitted("Held, not a whole paragraph")),
            (1.0, Restarted()),
            (1.1, TextEmitted("Fresh.")),
            (2.0, AnswerEnded()),
        ]
    )
    assert run.chat.visible() == ["Fresh."]
    assert guard.pieces == ["Fresh."]


def test_restart_of_a_later_round_keeps_earlier_rounds() -> None:
    run = ScriptedDelivery(TELEGRAM_TURNS)
    run.play(
        [
            (0.0, TextEmitted("Round one.")),
            (0.5, RoundEnded()),
            (1.0, TextEmitted("Round two, failed")),
            (1.5, Restarted()),
            (1.6, TextEmitted("Round two.")),
            (2.0, AnswerEnded()),
        ]
    )
    assert run.chat.visible() == ["Round one.", "Round two."]


def test_interrupted_multi_message_answer_gets_the_marker_as_its_own_message() -> None:
    guard = GuardStub()
    run = ScriptedDelivery(MATRIX, guard=guard)
    run.play(
        [
            (0.0, TextEmitted("Done part.\n\nCut par")),
            (2.0, AnswerInterrupted("the model stopped before finishing")),
        ]
    )
    assert sent(run.chat) == [("Done part.", True), ("Cut par", True), (MARKER, False)]
    assert MARKER not in guard.pieces and MARKER in guard.lines


def test_refusal_in_multi_message_drops_held_pieces_and_sends_the_notice() -> None:
    settings = DeliverySettings(mode="multi_message", draft_update_interval_ms=1000)
    run = ScriptedDelivery(settings)
    run.play(
        [
            (0.0, TextEmitted("One.\n\nTwo.\n\nThree.\n\n")),
            (0.5, AnswerRefused("Sorry, I can't share that.")),
        ]
    )
    assert sent(run.chat) == [("One.", True), ("Sorry, I can't share that.", False)]


def test_a_cancelled_piece_is_not_sent_and_a_long_rewrite_is_split() -> None:
    settings = DeliverySettings(mode="multi_message", limits=ChannelLimits(100, "chars"))

    def hook(piece: str) -> str | None:
        return None if "drop" in piece else piece.replace("x", "x " * 40)

    run = ScriptedDelivery(settings, guard=GuardStub(hook))
    run.play([(0.0, TextEmitted("keep\n\ndrop me\n\nx")), (0.1, AnswerEnded())])
    assert run.chat.visible()[0] == "keep"
    assert len(run.chat.visible()) == 2 and "drop me" not in run.chat.visible()
    assert all(len(m) <= 100 for m in run.chat.visible())


# -- off ----------------------------------------------------------------------------------


def test_off_sends_nothing_until_the_end_then_one_message_guarded_once() -> None:
    guard = GuardStub()
    run = ScriptedDelivery(OFF, guard=guard)
    run.play(
        [
            (0.0, TextEmitted("Let me check.")),
            (1.0, RoundEnded()),
            (1.0, ToolStarted(1, STATUS)),
            (6.0, ToolFinished(1, DONE)),
            (7.0, TextEmitted("It is noon.")),
            (11.0, AnswerEnded()),
        ]
    )
    assert [(w.t, w.text, w.formatted) for w in run.chat.chat_writes()] == [
        (11.0, "Let me check.\n\nIt is noon.", True)
    ]
    assert guard.pieces == ["Let me check.\n\nIt is noon."]
    assert run.chat.typing == [0.0, 4.0, 8.0]


def test_off_interrupted_appends_the_marker_and_a_cancelled_text_sends_nothing() -> None:
    run = ScriptedDelivery(OFF)
    run.play(
        [
            (0.0, TextEmitted("Partial")),
            (1.0, AnswerInterrupted("the model stopped before finishing")),
        ]
    )
    assert run.chat.visible() == ["Partial\n\n" + MARKER]
    run = ScriptedDelivery(OFF, guard=GuardStub(lambda text: None))
    run.play([(0.0, TextEmitted("Never shown")), (1.0, AnswerEnded())])
    assert run.chat.writes == []


def test_off_refusal_sends_only_the_notice() -> None:
    run = ScriptedDelivery(OFF)
    run.play([(0.0, TextEmitted("Something")), (1.0, AnswerRefused("Refused."))])
    assert sent(run.chat) == [("Refused.", False)]


def test_c16_nine_thousand_characters_in_five_messages_with_a_429_on_the_third() -> None:
    discord = DeliverySettings(mode="off", limits=ChannelLimits(2000, "chars"))
    text = words(9000)
    chat = FakeChat(discord.limits, fail=[Fail("send", 3, rate_limited(1.2))])
    run = ScriptedDelivery(discord, chat=chat)
    run.play([*deltas(text, 500, step=0.1), (2.0, AnswerEnded())])
    assert len(chat.visible()) == 5
    assert "".join(chat.visible()) == text
    assert all(len(m) <= 2000 for m in chat.visible())
    sends = chat.chat_writes("send")
    assert [w.outcome for w in sends] == ["ok", "ok", "ChannelRateLimited", "ok", "ok", "ok"]
    assert sends[3].t >= sends[2].t + 1.2
    assert not chat.early_writes


# -- failures -----------------------------------------------------------------------------


def test_a_timed_out_send_is_not_sent_again() -> None:
    chat = FakeChat(MATRIX.limits, fail=[Fail("send", 1, timeout, lands=True)])
    run = ScriptedDelivery(MATRIX, chat=chat)
    run.play([(0.0, TextEmitted("One.\n\nTwo.")), (0.1, AnswerEnded())])
    assert chat.visible() == ["One.", "Two."]
    assert len(chat.chat_writes("send")) == 2
    assert run.engine.stats.unconfirmed_sends == 1


def test_a_failed_formatted_send_is_retried_once_plain_then_given_up() -> None:
    fail = Fail(
        "send", None, write_failed, when=lambda kind, mid, text, fmt: "bad" in text, times=3
    )
    chat = FakeChat(MATRIX.limits, fail=[fail])
    run = ScriptedDelivery(MATRIX, chat=chat)
    run.play([(0.0, TextEmitted("bad one\n\nfine")), (0.1, AnswerEnded())])
    assert [(w.formatted, w.outcome) for w in chat.chat_writes("send")] == [
        (True, "ChannelWriteFailed"),
        (False, "ChannelWriteFailed"),
        (True, "ok"),
    ]
    assert chat.visible() == ["fine"]
    assert run.engine.stats.writes_given_up == 1


def test_too_long_splits_the_message_again() -> None:
    chat = FakeChat(ChannelLimits(600, "chars"))
    run = ScriptedDelivery(OFF, chat=chat)
    text = words(1900)
    run.play([(0.0, TextEmitted(text)), (0.1, AnswerEnded())])
    assert "".join(chat.visible()) == text
    assert all(len(m) <= 600 for m in chat.visible())


def test_off_sends_the_marker_on_its_own_when_it_does_not_fit_and_never_splits_it() -> None:
    settings = DeliverySettings(mode="off", limits=ChannelLimits(80, "chars"))
    text = words(70)
    run = ScriptedDelivery(settings)
    run.play(
        [(0.0, TextEmitted(text)), (1.0, AnswerInterrupted("the model stopped before finishing"))]
    )
    assert run.chat.visible() == [text, MARKER]


# -- pieces carry their place in the emitted text -----------------------------------------


@pytest.mark.parametrize("settings", [MATRIX, TELEGRAM_TURNS, OFF], ids=["para", "turn", "off"])
def test_each_piece_carries_its_span_in_the_emitted_text(settings: DeliverySettings) -> None:
    # Two rounds (delivery puts a blank line between them; the policy emitted none), a
    # restart, and a piece cut at the limit: each GuardPiece's span is where its text lies in
    # what was emitted, so the policy reads the gap before it there instead of searching.
    rounds = [
        ["Let me look.\n\n", "Checking the ", "figures now."],
        ["A failed attempt.\n\n", "gone"],
        ["Found it:\n\n", "the total is 42.\n\n", "Done."],
    ]
    emitted: list[str] = []
    timeline: list[tuple[float, object]] = []
    t = 0.0
    for number, texts in enumerate(rounds):
        for text in texts:
            t += 0.1
            timeline.append((t, TextEmitted(text)))
            emitted.append(text)
        t += 0.1
        if number == 1:  # the second round fails and is served again
            timeline.append((t, Restarted()))
            del emitted[-len(texts) :]
        else:
            timeline.append((t, RoundEnded()))
    timeline.append((t + 0.1, AnswerEnded()))
    run = ScriptedDelivery(settings)
    run.play(timeline)  # type: ignore[arg-type]
    whole = "".join(emitted)
    pieces = [action for _, action in run.actions if isinstance(action, GuardPiece)]
    assert pieces
    for piece in pieces:
        assert piece.span is not None
        start, end = piece.span
        if settings.mode == "off":  # the whole reply: its rounds joined by blank lines
            assert (start, end) == (0, len(whole))
            assert piece.text.replace("\n\n", "") == whole.replace("\n\n", "")
        else:
            assert whole[start:end] == piece.text, (piece, whole[start:end])
