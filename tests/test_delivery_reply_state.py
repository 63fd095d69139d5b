"""The engine's state of one reply and its transition table (architecture §3): pure steps,
scripted by hand with no engine, no clock and no event loop."""

from __future__ import annotations

import functools
import math
import typing

import pytest

from channels.base import ChannelLimits
from orchestrator.delivery import draft_scan, drafts
from orchestrator.delivery.draft_state import new_drafts
from orchestrator.delivery.events import (
    AnswerEnded,
    DeliveryEvent,
    PieceGuarded,
    PieceWithheld,
    SendMessage,
    TextEmitted,
    WriteFailed,
    WriteSucceeded,
    WrittenElsewhere,
)
from orchestrator.delivery.planning import Transcript, Write
from orchestrator.delivery.reply_state import (
    TRANSITIONS,
    DeliveryProtocolError,
    ReplyState,
    backed_off,
    started,
    transition,
    typing_at,
    write_at,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import measure

SETTINGS = DeliverySettings(
    mode="partial", draft_update_interval_ms=1000, limits=ChannelLimits(4096, "utf16")
)
SEND = Write(SendMessage("hi", False))


def test_every_event_has_one_transition() -> None:
    assert set(TRANSITIONS) == set(typing.get_args(DeliveryEvent))


def test_a_send_that_landed_spaces_the_next_write_from_its_end() -> None:
    state = started(ReplyState(), SEND)
    step = transition(state, WriteSucceeded("7"), 2.0, SETTINGS)
    assert step.tell and step.count == ("messages_created",)
    assert step.state.in_flight is None
    assert step.state.last_write_at == step.state.last_send_at == 2.0
    assert write_at(step.state, "edit", SETTINGS) == 3.0
    assert state.in_flight is SEND  # the old value is left as it was


def test_a_rate_limit_blocks_writes_and_typing_until_it_ends() -> None:
    step = transition(started(ReplyState(), SEND), WriteFailed("rate_limited", 30.0), 1.0, SETTINGS)
    assert step.tell and step.count == ("rate_limited",)
    assert write_at(step.state, "edit", SETTINGS) == 31.0
    assert typing_at(step.state, 1.0, SETTINGS) == 31.0


def test_an_unreachable_chat_is_not_told_to_the_planner() -> None:
    step = transition(started(ReplyState(), SEND), WriteFailed("unreachable"), 1.0, SETTINGS)
    assert not step.tell and step.state.unreachable and step.count == ("unreachable",)


def test_a_refused_write_backs_off_as_the_planner_asks() -> None:
    step = transition(started(ReplyState(), SEND), WriteFailed("refused"), 1.0, SETTINGS)
    assert step.tell and step.state.backoff_until == -math.inf
    assert write_at(backed_off(step.state, 1.0, 4.0), "send", SETTINGS) == 5.0


def test_only_the_awaited_verdict_is_heard() -> None:
    state = ReplyState(guarding=2)
    assert not transition(state, PieceGuarded(1, "late"), 0.0, SETTINGS).tell
    heard = transition(state, PieceWithheld(2), 0.0, SETTINGS)
    assert heard.tell and heard.state.guarding is None


def test_a_write_elsewhere_spaces_the_next_one() -> None:
    step = transition(ReplyState(last_write_at=1.0), WrittenElsewhere(sent=True), 4.0, SETTINGS)
    assert step.state.last_write_at == 4.0 and step.state.last_send_at == 4.0


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (ReplyState(), WriteSucceeded()),
        (ReplyState(), WriteFailed("timeout")),
        (ReplyState(over=True), TextEmitted("late")),
        (ReplyState(over=True), AnswerEnded()),
    ],
)
def test_protocol_errors(state: ReplyState, event: DeliveryEvent) -> None:
    with pytest.raises(DeliveryProtocolError):
        transition(state, event, 0.0, SETTINGS)


def test_every_input_of_the_drafts_has_one_transition() -> None:
    assert set(drafts.TRANSITIONS) == set(typing.get_args(drafts.DraftInput))


def test_a_drafts_step_leaves_the_old_value_as_it_was() -> None:
    """``partial``'s planner state is a value: a step returns a new one."""
    state = ReplyState(drafts=new_drafts(SETTINGS))
    text = Transcript(functools.partial(measure, SETTINGS.limits))
    text.append("Hello")
    before = state.drafts
    assert before is not None
    grown = drafts.on_text(before, "Hello", text, SETTINGS)
    planned = draft_scan.plan(grown, text, SETTINGS)
    assert planned.write == Write(SendMessage("Hello", False))
    assert planned.drafts.in_flight is not None and grown.in_flight is None
    assert grown is before == new_drafts(SETTINGS)  # the live draft grew within its room
    step = drafts.hear(planned.drafts, WriteSucceeded("7"), text, SETTINGS)
    assert step.drafts.slots[0].message_id == "7" and planned.drafts.slots[0].message_id is None
