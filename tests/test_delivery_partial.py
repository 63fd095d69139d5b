"""The delivery engine in ``partial`` mode, scripted on a fake clock (architecture §3, §4)."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest

from channels.base import ChannelLimits
from channels.errors import MessageNotModified
from orchestrator.delivery.engine import DeliveryEngine, DeliveryProtocolError
from orchestrator.delivery.events import (
    AnswerEnded,
    AnswerInterrupted,
    AnswerRefused,
    EditMessage,
    GuardPiece,
    PieceGuarded,
    Restarted,
    RoundEnded,
    SendMessage,
    SendTyping,
    SleepUntil,
    TextEmitted,
    ToolFinished,
    ToolStarted,
    WriteFailed,
    WriteSucceeded,
)
from orchestrator.delivery.settings import DeliverySettings
from tests.fakes import (
    ChatWrite,
    Fail,
    FakeChat,
    GuardStub,
    ScriptedDelivery,
    rate_limited,
    renderer,
    timeout,
    write_failed,
)


def html(text: str) -> str:
    """A renderer whose formatted form always differs from the plain text."""
    return f"<p>{text}</p>"


def bold_only(text: str) -> str:
    """A renderer where plain text without markup renders as itself (like Telegram entities)."""
    return re.sub(r"\*(.+?)\*", r"<b>\1</b>", text)


TELEGRAM = DeliverySettings(
    mode="partial",
    draft_update_interval_ms=1000,
    limits=ChannelLimits(4096, "utf16"),
    render=renderer(html),
)
STATUS = "⏳ current_time…"
DONE = "✓ current_time 0.4 s"


def words(length: int, seed: int = 0) -> str:
    vocabulary = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit"]
    out: list[str] = []
    size, i = 0, seed
    while size < length:
        word = vocabulary[i % len(vocabulary)] + " "
        out.append(word)
        size += len(word)
        i += 1
    return "".join(out)[:length]


def deltas(text: str, size: int, start: float = 0.0, step: float = 0.05) -> list:
    return [
        (start + i * step, TextEmitted(text[offset : offset + size]))
        for i, offset in enumerate(range(0, len(text), size))
    ]


def assert_spacing(writes: list[ChatWrite], interval: float) -> None:
    for a, b in pairwise(writes):
        assert b.t - a.t >= interval - 1e-9, (a, b)


def assert_no_rejections(chat: FakeChat) -> None:
    assert [w for w in chat.writes if w.outcome not in ("ok",)] == []


# -- drafts -------------------------------------------------------------------------------


def test_first_text_sends_a_plain_draft_later_text_edits_it_the_end_formats_it() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play(
        [
            (0.0, TextEmitted("Hel")),
            (0.3, TextEmitted("lo")),
            (1.5, TextEmitted("!")),
            (1.9, AnswerEnded()),
        ]
    )
    writes = run.chat.chat_writes()
    assert [(w.t, w.kind, w.text, w.formatted) for w in writes] == [
        (0.0, "send", "Hel", False),
        (1.0, "edit", "Hello", False),
        (2.0, "edit", "Hello!", True),
    ]
    assert run.engine.finished and run.engine.writes_sent == 3
    assert run.engine.messages_created == 1


def test_c12_no_identical_edit_at_the_end() -> None:
    run = ScriptedDelivery(DeliverySettings(mode="partial", render=renderer(bold_only)))
    run.play([(0.0, TextEmitted("Hello")), (0.1, TextEmitted(" world")), (3.0, AnswerEnded())])
    assert [(w.kind, w.text) for w in run.chat.chat_writes()] == [
        ("send", "Hello"),
        ("edit", "Hello world"),
    ]
    assert run.chat.visible() == ["Hello world"]
    assert_no_rejections(run.chat)


def test_c12_the_final_edit_is_sent_when_formatting_changes_the_rendering() -> None:
    run = ScriptedDelivery(DeliverySettings(mode="partial", render=renderer(bold_only)))
    run.play([(0.0, TextEmitted("*UTC*")), (3.0, AnswerEnded())])
    assert [(w.kind, w.formatted) for w in run.chat.chat_writes()] == [
        ("send", False),
        ("edit", True),
    ]


def test_c12_message_not_modified_from_the_server_counts_as_success() -> None:
    chat = FakeChat(TELEGRAM.limits, not_modified=False)
    chat.fail.append(Fail("edit", 1, MessageNotModified))
    run = ScriptedDelivery(TELEGRAM, chat=chat)
    run.play([(0.0, TextEmitted("Hello")), (0.5, AnswerEnded())])
    assert [w.outcome for w in chat.chat_writes()] == ["ok", "MessageNotModified"]
    assert run.engine.finished


def test_latest_text_wins_and_intermediate_states_are_skipped() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play([(i * 0.01, TextEmitted(str(i % 10))) for i in range(250)] + [(5.0, AnswerEnded())])
    writes = run.chat.chat_writes()
    # 0 s send; 1, 2 and 3 s edits with the newest text; the final at 5 s
    assert [w.t for w in writes] == [0.0, 1.0, 2.0, 3.0, 5.0]
    assert writes[1].text == "".join(str(i % 10) for i in range(100))
    assert_spacing(writes, 1.0)


def test_typing_before_the_first_text_and_every_4_s_while_nothing_new_shows() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play([(9.0, TextEmitted("Hi")), (10.5, ToolStarted(1, STATUS)), (19.0, AnswerEnded())])
    assert run.chat.typing == [0.0, 4.0, 8.0, 14.5, 18.5]
    assert [(w.t, w.kind) for w in run.chat.chat_writes()] == [
        (9.0, "send"),
        (10.5, "edit"),
        (19.0, "edit"),
    ]


def test_the_engine_asks_to_sleep_until_the_next_write_is_allowed() -> None:
    engine = DeliveryEngine(TELEGRAM, GuardStub())
    assert engine.poll(0.0) == [SendTyping(), SleepUntil(4.0)]
    assert engine.handle(TextEmitted("a"), 0.1) == [SendMessage("a")]
    assert engine.handle(TextEmitted("b"), 0.2) == []  # the send is in flight
    # The interval counts from the send's completion (its outcome).
    assert engine.handle(WriteSucceeded("7"), 0.3) == [SleepUntil(1.3)]
    assert engine.poll(1.2) == [SleepUntil(1.3)]
    assert engine.poll(1.3) == [EditMessage("7", "ab")]


# -- rounds and tool status ---------------------------------------------------------------


def test_tool_status_is_the_last_line_then_replaced_by_the_next_round() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play(
        [
            (0.0, TextEmitted("Let me check.")),
            (1.0, RoundEnded()),
            (1.0, ToolStarted(1, STATUS)),
            (1.2, ToolFinished(1, DONE)),
            (3.0, TextEmitted("It is noon.")),
            (5.0, AnswerEnded()),
        ]
    )
    assert [texts for _, texts in run.chat.states] == [
        ("Let me check.",),
        (f"Let me check.\n\n{STATUS}",),
        (f"Let me check.\n\n{DONE}",),  # edited in place at the next draft edit
        ("Let me check.\n\nIt is noon.",),
        ("Let me check.\n\nIt is noon.",),  # the final edit, formatted
    ]
    assert run.chat.chat_writes()[-1].formatted


def test_a_status_only_draft_is_deleted_when_no_text_follows() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play([(0.0, ToolStarted(1, STATUS)), (0.5, ToolFinished(1, DONE)), (2.0, AnswerEnded())])
    assert [w.kind for w in run.chat.chat_writes()] == ["send", "edit", "delete"]
    assert run.chat.visible() == []


def test_no_separator_when_the_earlier_rounds_showed_nothing() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play([(0.0, RoundEnded()), (0.1, TextEmitted("Hi")), (0.2, AnswerEnded())])
    assert run.chat.visible() == ["Hi"]
    assert run.engine.text == "Hi"


# -- the end ------------------------------------------------------------------------------


def test_guard_runs_once_on_the_whole_final_text() -> None:
    guard = GuardStub()
    run = ScriptedDelivery(TELEGRAM, guard=guard)
    run.play(
        [
            (0.0, TextEmitted("one")),
            (1.0, RoundEnded()),
            (2.0, TextEmitted("two")),
            (3.0, AnswerEnded()),
        ]
    )
    assert guard.pieces == ["one\n\ntwo"]


def test_a_rewriting_hook_shows_its_output_in_the_final_edit() -> None:
    run = ScriptedDelivery(TELEGRAM, guard=GuardStub(lambda t: t.upper()))
    run.play([(0.0, TextEmitted("quiet")), (2.0, AnswerEnded())])
    assert run.chat.visible() == ["QUIET"]
    assert run.chat.writes[-1].formatted


def test_a_cancelling_hook_deletes_the_drafts() -> None:
    run = ScriptedDelivery(TELEGRAM, guard=GuardStub(lambda t: None))
    run.play([(0.0, TextEmitted("secret plan")), (2.0, AnswerEnded())])
    assert [w.kind for w in run.chat.chat_writes()] == ["send", "delete"]
    assert run.chat.visible() == []


def test_interrupted_answer_keeps_the_text_and_adds_the_marker() -> None:
    guard = GuardStub()
    run = ScriptedDelivery(TELEGRAM, guard=guard)
    run.play(
        [(0.0, TextEmitted("The answer is")), (2.0, AnswerInterrupted("the model service failed"))]
    )
    assert run.chat.visible() == ["The answer is\n\n⚠️ Answer interrupted: the model service failed"]
    assert "⚠️ Answer interrupted: the model service failed" in guard.lines


def test_interrupted_before_any_text_shows_the_marker_alone() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play([(5.0, AnswerInterrupted("the model did not answer in time"))])
    assert run.chat.visible() == ["⚠️ Answer interrupted: the model did not answer in time"]


def test_refusal_replaces_the_draft_and_deletes_overflow_messages() -> None:
    settings = DeliverySettings(mode="partial", limits=ChannelLimits(200, "chars"))
    run = ScriptedDelivery(settings)
    run.play([*deltas(words(500), 50, step=0.5), (6.0, AnswerRefused("I can't help with that."))])
    assert run.chat.visible() == ["I can't help with that."]
    assert run.chat.chat_writes("delete")


# -- overflow -----------------------------------------------------------------------------


def test_c13_longer_than_one_message_freezes_at_a_paragraph_boundary() -> None:
    paragraph = "x" * 798 + "\n\n"
    text = paragraph * 7 + "y" * 400
    assert len(text) == 6000
    run = ScriptedDelivery(TELEGRAM)
    run.play([*deltas(text, 200, step=0.1), (4.0, AnswerEnded())])
    messages = run.chat.visible()
    assert len(messages) == 2
    assert messages[0].endswith("\n\n") and len(messages[0]) <= 4096
    assert len(messages[0]) % 800 == 0
    assert "".join(messages) == text
    assert_no_rejections(run.chat)
    assert_spacing(run.chat.chat_writes(), 1.0)


def test_room_is_kept_for_the_status_line_near_the_limit() -> None:
    settings = DeliverySettings(mode="partial", limits=ChannelLimits(300, "chars"))
    run = ScriptedDelivery(settings)
    long_status = "⏳ " + "a_very_long_tool_name_" * 10 + "…"
    script = deltas(words(290), 29, step=0.2)
    script += [(3.0, RoundEnded()), (3.0, ToolStarted(1, long_status)), (9.0, AnswerEnded())]
    run.play(script)
    assert_no_rejections(run.chat)
    assert "".join(run.chat.visible()) == words(290)


def test_c16_nine_thousand_characters_over_a_2000_limit_with_a_429() -> None:
    discord = DeliverySettings(mode="partial", limits=ChannelLimits(2000, "chars"))
    text = words(9000)
    chat = FakeChat(discord.limits, fail=[Fail("send", 3, rate_limited(1.2))])
    run = ScriptedDelivery(discord, chat=chat)
    run.play([*deltas(text, 90, step=0.1), (10.0, AnswerEnded())])
    messages = run.chat.visible()
    assert len(messages) == 5
    assert "".join(messages) == text
    assert all(len(m) <= 2000 for m in messages)
    sends = run.chat.chat_writes("send")
    limited = next(w for w in sends if w.outcome == "ChannelRateLimited")
    assert sends[sends.index(limited) + 1].t >= limited.t + 1.2
    assert not chat.early_writes
    assert_spacing(run.chat.chat_writes(), 1.0)


# -- edits per message ----------------------------------------------------------------------


@pytest.mark.parametrize("cap", [1, 2, 3, 5])
def test_the_edit_cap_freezes_messages_and_keeps_one_edit_for_the_final(cap: int) -> None:
    settings = DeliverySettings(
        mode="partial",
        max_edits_per_message=cap,
        draft_update_interval_ms=100,
        render=renderer(html),
    )
    text = words(2000)
    run = ScriptedDelivery(settings)
    run.play([*deltas(text, 20, step=0.1), (12.0, AnswerEnded())])
    assert all(m.edits <= cap for m in run.chat.messages.values())
    assert "".join(run.chat.visible()) == text
    assert all(m.formatted for m in run.chat.visible_messages())


def test_c17_many_small_deltas_on_matrix_respect_the_interval_and_the_cap() -> None:
    matrix = DeliverySettings(
        mode="partial",
        draft_update_interval_ms=1500,
        max_edits_per_message=100,
        limits=ChannelLimits(30000, "chars"),
        render=renderer(html),
    )
    text = words(9000, seed=3)
    run = ScriptedDelivery(matrix)
    run.play([*deltas(text, 3, step=0.05), (150.0, AnswerEnded())])
    assert_spacing(run.chat.chat_writes(), 1.5)
    assert all(m.edits <= 100 for m in run.chat.messages.values())
    assert "".join(run.chat.visible()) == text
    assert run.chat.writes[-1].formatted


# -- restart ------------------------------------------------------------------------------


def test_restart_returns_the_draft_to_what_it_showed_before_the_round() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play(
        [
            (0.0, TextEmitted("Intro")),
            (1.0, RoundEnded()),
            (2.0, TextEmitted("Partial ans")),
            (3.0, Restarted()),
            (6.0, TextEmitted("Fresh")),
            (8.0, AnswerEnded()),
        ]
    )
    assert [texts for _, texts in run.chat.states] == [
        ("Intro",),
        ("Intro\n\nPartial ans",),
        ("Intro",),
        ("Intro\n\nFresh",),
        ("Intro\n\nFresh",),  # the final edit, formatted
    ]


def test_a_draft_created_by_the_failed_attempt_is_reused() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play(
        [
            (0.0, TextEmitted("Par")),
            (0.5, Restarted()),
            (0.6, TextEmitted("Hello")),
            (3.0, AnswerEnded()),
        ]
    )
    assert [(w.kind, w.message_id, w.text) for w in run.chat.chat_writes()] == [
        ("send", "1", "Par"),
        ("edit", "1", "Hello"),
        ("edit", "1", "Hello"),  # the final edit, formatted
    ]


def test_a_draft_created_by_the_failed_attempt_is_deleted_if_nothing_follows() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play([(0.0, TextEmitted("Par")), (0.5, Restarted()), (3.0, AnswerEnded())])
    assert [w.kind for w in run.chat.chat_writes()] == ["send", "delete"]
    assert run.chat.visible() == []


# -- failures -----------------------------------------------------------------------------


def test_c15_flood_control_waits_then_writes_the_final_text_once() -> None:
    settings = DeliverySettings(mode="partial", draft_update_interval_ms=800)
    chat = FakeChat(settings.limits, fail=[Fail("edit", 3, rate_limited(9))])
    run = ScriptedDelivery(settings, chat=chat)
    script = [(i * 0.3, TextEmitted(f"w{i} ")) for i in range(9)]  # the 3rd edit is at 2.4 s
    script += [(2.5 + i * 0.24, TextEmitted(f"x{i} ")) for i in range(20)]
    script += [(8.4, AnswerEnded())]
    run.play(script)
    writes = chat.chat_writes()
    limited = next(w for w in writes if w.outcome == "ChannelRateLimited")
    assert limited.t == pytest.approx(2.4)
    after = writes[writes.index(limited) + 1 :]
    assert len(after) == 1
    assert after[0].t >= limited.t + 9
    assert after[0].formatted and after[0].text == run.engine.text
    assert sum(w.formatted for w in writes) == 1
    assert not chat.early_writes
    assert run.engine.stats.rate_limited == 1


def test_a_timed_out_edit_is_retried_and_is_not_an_identical_edit() -> None:
    chat = FakeChat(TELEGRAM.limits, fail=[Fail("edit", 1, timeout, lands=True)])
    run = ScriptedDelivery(TELEGRAM, chat=chat)
    run.play([(0.0, TextEmitted("a")), (0.5, TextEmitted("b")), (5.0, AnswerEnded())])
    assert [(w.kind, w.text, w.outcome) for w in chat.chat_writes()] == [
        ("send", "a", "ok"),
        ("edit", "ab", "ChannelTimeout"),
        ("edit", "ab", "MessageNotModified"),  # the retry; the server had applied it
        ("edit", "ab", "ok"),  # the final, formatted
    ]
    assert chat.writes[-1].formatted
    assert chat.visible() == ["ab"]


def test_a_timed_out_draft_send_is_assumed_landed_and_the_reply_goes_on_after_it() -> None:
    """The send landed but timed out: no id, so that message holds "Hel" for good; the rest
    goes on in the next message (never "Hello" again below "Hel": no duplicate, nothing lost)."""
    chat = FakeChat(TELEGRAM.limits, fail=[Fail("send", 1, timeout, lands=True)])
    run = ScriptedDelivery(TELEGRAM, chat=chat)
    run.play([(0.0, TextEmitted("Hel")), (0.5, TextEmitted("lo")), (5.0, AnswerEnded())])
    sends = chat.chat_writes("send")
    assert [(w.text, w.formatted) for w in sends] == [("Hel", False), ("lo", False)]
    assert [(w.message_id, w.text, w.formatted) for w in chat.chat_writes("edit")] == [
        ("2", "lo", True)
    ]
    assert chat.visible() == ["Hel", "lo"]
    assert run.engine.stats.unconfirmed_sends == 1


def test_a_draft_send_timed_out_while_the_draft_outgrew_its_message_loses_nothing() -> None:
    """The live draft's send is in flight while the text outgrows the message and is frozen;
    the send then times out: the message holds what it was sent with, and the text from there
    on is laid out again after it (each later message exactly once)."""
    limits = ChannelLimits(200, "chars")
    engine = DeliveryEngine(DeliverySettings(mode="partial", limits=limits))
    text = words(900)
    [send] = [a for a in engine.handle(TextEmitted(text[:30]), 0.0) if isinstance(a, SendMessage)]
    assert send.text == text[:30]
    engine.receive(TextEmitted(text[30:500]), 0.1)  # frozen while the send is in flight
    shown: dict[str, str] = {"orphan": send.text}
    ids = iter(str(n) for n in range(1, 100))
    actions = engine.handle(WriteFailed("timeout"), 0.5)
    now, fed = 0.5, False
    while not (fed and engine.finished):
        assert now < 100, shown
        for action in actions:
            match action:
                case SendMessage(text=body):
                    message_id = next(ids)
                    shown[message_id] = body
                    actions = engine.handle(WriteSucceeded(message_id), now)
                    break
                case EditMessage(message_id=message_id, text=body):
                    shown[message_id] = body
                    actions = engine.handle(WriteSucceeded(), now)
                    break
                case GuardPiece(piece_id=piece_id, text=body):
                    actions = engine.handle(PieceGuarded(piece_id, body), now)
                    break
        else:
            now += 1.0
            if not fed:
                engine.receive(TextEmitted(text[500:]), now)
                engine.receive(AnswerEnded(), now)
                fed = True
            actions = engine.poll(now)
    assert "".join(shown.values()) == text
    assert engine.stats.unconfirmed_sends == 1


def test_a_draft_the_user_deleted_continues_in_a_new_message() -> None:
    run = ScriptedDelivery(TELEGRAM)
    run.play([(0.0, TextEmitted("first"))], finish=False)
    run.chat.user_deletes("1")
    run.play([(1.5, TextEmitted(" second")), (4.0, AnswerEnded())])
    assert run.chat.visible() == ["first second"]
    assert [w.outcome for w in run.chat.chat_writes()][:2] == ["ok", "MessageGone"]


def test_too_long_splits_more_aggressively_and_retries() -> None:
    chat = FakeChat(ChannelLimits(1000, "chars"))  # the platform counts less than we think
    run = ScriptedDelivery(
        DeliverySettings(mode="partial", limits=ChannelLimits(1500, "chars")), chat=chat
    )
    text = words(3000)
    run.play([*deltas(text, 100, step=0.3), (12.0, AnswerEnded())])
    assert "".join(chat.visible()) == text
    assert all(len(m) <= 1000 for m in chat.visible())
    assert any(w.outcome == "MessageTooLong" for w in chat.writes)


def test_a_failed_formatted_final_edit_is_retried_once_plain() -> None:
    fail = Fail("edit", None, write_failed, when=lambda kind, mid, text, fmt: fmt)
    chat = FakeChat(TELEGRAM.limits, fail=[fail])
    run = ScriptedDelivery(TELEGRAM, chat=chat)
    run.play([(0.0, TextEmitted("*bold")), (0.5, TextEmitted(" claim")), (0.6, AnswerEnded())])
    assert [(w.formatted, w.outcome) for w in chat.chat_writes("edit")] == [
        (True, "ChannelWriteFailed"),
        (False, "ok"),
    ]
    assert run.engine.stats.plain_fallbacks == 1


def test_a_failed_preview_is_given_up_and_counted() -> None:
    chat = FakeChat(TELEGRAM.limits, fail=[Fail("edit", 1, write_failed)])
    run = ScriptedDelivery(TELEGRAM, chat=chat)
    run.play(
        [
            (0.0, TextEmitted("a")),
            (0.5, TextEmitted("b")),
            (2.5, TextEmitted("c")),
            (5, AnswerEnded()),
        ]
    )
    assert chat.visible() == ["abc"]
    assert run.engine.stats.writes_given_up == 1


# -- protocol -----------------------------------------------------------------------------


def test_input_after_the_end_and_outcomes_without_a_write_are_protocol_errors() -> None:
    engine = DeliveryEngine(TELEGRAM, GuardStub())
    with pytest.raises(DeliveryProtocolError):
        engine.handle(WriteSucceeded("1"), 0.0)
    engine.handle(AnswerEnded(), 0.0)
    with pytest.raises(DeliveryProtocolError):
        engine.handle(TextEmitted("late"), 0.1)
    assert engine.finished
