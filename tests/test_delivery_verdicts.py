"""The delivery engine as h11 is: the hook's verdict as an action and an event, pure queries,
failures by error class, boundaries decided with the channel's renderer (architecture §1, §3,
§4)."""

from __future__ import annotations

import pytest

from channels.base import ChannelLimits, Rendering
from orchestrator.delivery.engine import DeliveryEngine
from orchestrator.delivery.events import (
    Action,
    AnswerEnded,
    AnswerInterrupted,
    DeliveryEvent,
    EditMessage,
    GuardPiece,
    PieceGuarded,
    PieceWithheld,
    RoundEnded,
    SendMessage,
    SleepUntil,
    TextEmitted,
    ToolStarted,
    WriteFailed,
    WriteSucceeded,
)
from orchestrator.delivery.planning import WITHHELD_NOTICE
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.slots import Slot, SlotState, advance
from tests.fakes import (
    Fail,
    FakeChat,
    GuardStub,
    ScriptedDelivery,
    refused,
    renderer,
    write_failed,
)
from tests.test_delivery_partial import deltas, words

PARTIAL = DeliverySettings(mode="partial", render=renderer(lambda t: f"<p>{t}</p>"))
MARKER = "⚠️ Answer interrupted: the model stopped before finishing"


def _raise(text: str) -> str | None:
    raise RuntimeError("hook bug")


# -- the verdict ------------------------------------------------------------------------


def test_the_engine_asks_for_the_verdict_and_writes_the_final_text_only_after_it() -> None:
    engine = DeliveryEngine(PARTIAL)
    assert engine.handle(TextEmitted("Hello"), 0.0)[0] == SendMessage("Hello")
    engine.receive(WriteSucceeded("1"), 0.1)
    actions = engine.handle(AnswerEnded(), 5.0)
    assert actions == [GuardPiece(1, "Hello")]  # nothing is written while it is awaited
    assert engine.pending and not engine.finished
    assert engine.poll(9.0) == []  # one verdict at a time, asked once
    assert engine.handle(PieceGuarded(1, "Hello there"), 9.0) == [
        EditMessage("1", "Hello there", formatted=True)
    ]
    engine.receive(WriteSucceeded(), 9.1)
    assert engine.finished


def test_a_verdict_not_awaited_is_ignored() -> None:
    engine = DeliveryEngine(DeliverySettings(mode="off"))
    engine.receive(TextEmitted("x"), 0.0)
    [guard] = [a for a in engine.handle(AnswerEnded(), 0.0) if isinstance(a, GuardPiece)]
    assert engine.handle(PieceGuarded(guard.piece_id + 7, "late"), 0.1) == []
    assert engine.handle(PieceGuarded(guard.piece_id, "x!"), 0.2) == [SendMessage("x!", True)]
    engine.receive(WriteSucceeded("1"), 0.3)
    assert engine.handle(PieceGuarded(guard.piece_id, "again"), 0.4) == []  # answered already
    assert engine.finished


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
def test_a_failed_hook_withholds_its_piece(mode: str) -> None:
    """architecture §4 "The hook": partial edits the draft to the notice; off and multi_message
    replace the piece by it; the rest of the answer still goes out."""
    settings = DeliverySettings(mode=mode, multi_message_unit="turn")
    run = ScriptedDelivery(settings, guard=GuardStub(_raise))
    run.play(
        [
            (0.0, TextEmitted("Secret turn.")),
            (1.0, AnswerInterrupted("the model stopped before finishing")),
        ]
    )
    if mode == "multi_message":
        assert run.chat.visible() == [WITHHELD_NOTICE, MARKER]
    else:
        assert run.chat.visible() == [f"{WITHHELD_NOTICE}\n\n{MARKER}"]
    assert run.engine.stats.pieces_withheld == 1


def test_multi_message_withholds_only_the_piece_whose_hook_failed() -> None:
    def hook(text: str) -> str | None:
        if "two" in text:
            raise TimeoutError
        return text

    settings = DeliverySettings(mode="multi_message", multi_message_unit="paragraph")
    run = ScriptedDelivery(settings, guard=GuardStub(hook))
    run.play([(0.0, TextEmitted("one\n\ntwo\n\nthree")), (0.5, AnswerEnded())])
    assert run.chat.visible() == ["one", WITHHELD_NOTICE, "three"]


# -- queries are pure -------------------------------------------------------------------


def _log(run: ScriptedDelivery) -> list[tuple[float, Action]]:
    return [(t, a) for t, a in run.actions]


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
def test_queries_change_nothing(mode: str) -> None:
    """``pending``, ``finished`` and the planner's ``next_kind`` asked before every event give
    the same writes as never asking (they used to append slots and count writes given up)."""
    settings = DeliverySettings(
        mode=mode, limits=ChannelLimits(300, "chars"), max_edits_per_message=4
    )
    text = words(1500)
    script: list[tuple[float, DeliveryEvent]] = [*deltas(text, 40, step=0.3)]
    script += [(13.0, RoundEnded()), (13.0, ToolStarted(1, "⏳ t…")), (14.0, TextEmitted(" more"))]
    script += [(30.0, AnswerEnded())]

    class Asking(ScriptedDelivery):
        def feed(self, event: DeliveryEvent) -> None:
            for _ in range(3):
                assert isinstance(self.engine.pending, bool)
                assert isinstance(self.engine.finished, bool)
                self.engine._next_kind()
            super().feed(event)

    quiet, asking = ScriptedDelivery(settings), Asking(settings)
    quiet.play(script)
    asking.play(script)
    assert _log(asking) == _log(quiet)
    assert asking.chat.visible() == quiet.chat.visible()


# -- failures by error class ------------------------------------------------------------


def test_a_refused_edit_is_retried_with_backoff_then_sent_as_a_new_message() -> None:
    chat = FakeChat(PARTIAL.limits, fail=[Fail("edit", None, refused, times=99)])
    run = ScriptedDelivery(PARTIAL, chat=chat)
    run.play([(0.0, TextEmitted("Hello")), (0.5, TextEmitted(" world")), (0.6, AnswerEnded())])
    writes = [(w.t, w.kind, w.outcome) for w in chat.chat_writes()]
    assert writes == [
        (0.0, "send", "ok"),
        (1.0, "edit", "ChannelUnavailable"),
        (2.0, "edit", "ChannelUnavailable"),  # 1 s back-off (and the interval)
        (5.0, "edit", "ChannelUnavailable"),  # 3 s back-off
        (6.0, "delete", "ok"),  # the old preview goes first: the chat keeps its order
        (7.0, "send", "ok"),
    ]
    assert chat.visible() == ["Hello world"] and chat.visible_messages()[0].formatted
    assert run.engine.stats.writes_refused == 3 and run.engine.stats.resent_as_new == 1


@pytest.mark.parametrize(("refusals", "visible"), [(2, ["One turn."]), (3, [])])
def test_a_refused_send_is_retried_twice(refusals: int, visible: list[str]) -> None:
    settings = DeliverySettings(mode="multi_message", multi_message_unit="turn")
    chat = FakeChat(settings.limits, fail=[Fail("send", None, refused, times=refusals)])
    run = ScriptedDelivery(settings, chat=chat)
    run.play([(0.0, TextEmitted("One turn.")), (0.1, AnswerEnded())])
    assert chat.visible() == visible
    # The turn goes at the end (0.1 s); then 1 s and 3 s of back-off.
    assert [w.t for w in chat.chat_writes()] == pytest.approx([0.1, 1.1, 4.1][: refusals + 1])
    assert run.engine.stats.writes_given_up == (refusals >= 3)


def test_a_rejected_plain_final_edit_is_sent_anew_never_left_as_a_shorter_preview() -> None:
    """The formatted final edit is rejected, and so is its plain retry: the text goes out as a
    new message (it used to leave the preview, looking complete)."""
    fail = Fail("edit", None, write_failed, times=2)
    chat = FakeChat(PARTIAL.limits, fail=[fail])
    run = ScriptedDelivery(PARTIAL, chat=chat)
    run.play(
        [(0.0, TextEmitted("Part")), (0.5, TextEmitted(" and the rest")), (0.6, AnswerEnded())]
    )
    assert chat.visible() == ["Part and the rest"]


# -- the renderer -----------------------------------------------------------------------


def _long_render(text: str) -> Rendering:
    """Rules render as 8 dashes: ``---`` grows by 5 units."""
    return Rendering(text.replace("---", "—" * 8), len(text.replace("---", "-" * 8)))


@pytest.mark.parametrize("mode", ["partial", "off"])
def test_a_final_message_is_formatted_only_where_its_rendering_fits(mode: str) -> None:
    settings = DeliverySettings(mode=mode, limits=ChannelLimits(200, "chars"), render=_long_render)
    text = "---\n\n" * 25 + "end"  # 128 chars, 253 rendered
    run = ScriptedDelivery(settings)
    run.play([(0.0, TextEmitted(text)), (1.0, AnswerEnded())])
    [message] = run.chat.visible_messages()
    assert message.text == text and not message.formatted  # one plain message, not two
    run = ScriptedDelivery(settings)
    run.play([(0.0, TextEmitted("short --- text")), (1.0, AnswerEnded())])
    assert all(m.formatted for m in run.chat.visible_messages())


# -- slots ------------------------------------------------------------------------------


def test_slot_steps_follow_the_table() -> None:
    empty = Slot()
    slot = advance(empty, "sent")
    assert slot.state is SlotState.SHOWN and empty.state is SlotState.EMPTY
    slot = advance(slot, "edit_timed_out")
    assert slot.state is SlotState.UNKNOWN and slot.shown is None
    slot = advance(advance(slot, "edited"), "deleted")
    assert slot.state is SlotState.EMPTY and slot.message_id is None
    with pytest.raises(KeyError):
        advance(slot, "edited")  # nothing to edit


def test_a_refused_write_sleeps_until_its_backoff() -> None:
    engine = DeliveryEngine(DeliverySettings(mode="multi_message", draft_update_interval_ms=100))
    engine.receive(TextEmitted("a\n\n"), 0.0)
    actions = engine.poll(0.0)
    guard = next(a for a in actions if isinstance(a, GuardPiece))
    [send] = [
        a
        for a in engine.handle(PieceGuarded(guard.piece_id, "a"), 0.0)
        if isinstance(a, SendMessage)
    ]
    assert send == SendMessage("a", True)
    actions = engine.handle(WriteFailed("refused"), 0.2)
    assert SleepUntil(1.2) in actions
    assert not any(isinstance(a, PieceWithheld) for a in actions)
