"""Queries never change a reply's state (architecture §1 "Queries are pure"): on random scripts
with failures, in every mode (``partial``'s drafts, ``off`` / ``multi_message``'s queue), every
query asked twice at every step gives equal answers, and the engine still
holds the very same :class:`~orchestrator.delivery.reply_state.ReplyState` value afterwards (not
an equal new one: a query that re-armed a timer or committed a write would store a new value).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from orchestrator.delivery import draft_layout, draft_scan, drafts, pieces
from orchestrator.delivery.engine import DeliveryEngine
from orchestrator.delivery.events import Action, AnswerEnded, TextEmitted
from orchestrator.delivery.reply_state import typing_at, write_at
from orchestrator.delivery.settings import DeliverySettings
from tests.fakes import ScriptedDelivery
from tests.test_delivery_properties import scenarios


def answers(engine: DeliveryEngine, now: float) -> tuple[Any, ...]:
    """Every query of the engine and of the pure functions on its state, at ``now``."""
    state = engine._state
    settings_ = engine.settings
    engine_answers = (
        engine.pending,
        engine.finished,
        engine.quiet_until,
        engine.next_write_at(),
        engine.answer_over,
        engine.unreachable,
        engine.write_in_flight,
        engine.text,
        engine.stats,
        write_at(state, "send", settings_),
        write_at(state, "edit", settings_),
        typing_at(state, now, settings_),
    )
    if state.queue is not None:
        return (
            *engine_answers,
            pieces.next_kind(state.queue),
            pieces.guard_request(state.queue),
        )
    assert state.drafts is not None
    text = engine._transcript
    layout = state.drafts.layout
    count = draft_layout.count(layout, text)
    return (
        *engine_answers,
        draft_scan.next_kind(state.drafts, text, settings_),
        drafts.guard_request(state.drafts),
        count,
        draft_layout.start(layout),
        draft_layout.live_text(layout, text, settings_),
        [draft_layout.target(layout, i, text, settings_) for i in range(count)],
    )


class Asking(ScriptedDelivery):
    """Asks every query twice before carrying out each batch of actions."""

    commands_changed_state = 0

    def _execute(self, actions: list[Action]) -> None:
        state = self.engine._state
        first = answers(self.engine, self.now)
        second = answers(self.engine, self.now)
        assert first == second
        assert self.engine._state is state, "a query stored a new state"
        super()._execute(actions)
        if self.engine._state is not state:
            Asking.commands_changed_state += 1


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_queries_asked_twice_agree_and_leave_the_state_as_it_was(case: dict) -> None:
    run = Asking(case["settings"], chat=case["chat"], latency=case["latency"])
    run.play(case["script"], limit=10_000)
    assert run.engine.finished


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios(modes=("multi_message", "off")))
def test_queue_queries_asked_twice_agree_and_leave_the_state_as_it_was(case: dict) -> None:
    """The same for the ``off`` / ``multi_message`` queue alone (the mixed test draws a third of
    its cases from each mode)."""
    run = Asking(case["settings"], chat=case["chat"], latency=case["latency"])
    run.play(case["script"], limit=10_000)
    assert run.engine.finished


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
def test_the_identity_check_can_fail(mode: str) -> None:
    """The commands (``handle``, ``poll``) store new values, so a query that stored one would be
    seen."""
    run = Asking(DeliverySettings(mode=mode, multi_message_unit="paragraph"))
    before = Asking.commands_changed_state
    script = [(0.0, TextEmitted("Hello\n\n")), (2.0, TextEmitted(" world")), (3.0, AnswerEnded())]
    run.play(script)
    assert Asking.commands_changed_state > before
