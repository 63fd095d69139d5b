"""The ``off`` / ``multi_message`` planner's state and its transition table (architecture §3):
pure steps on an immutable :class:`~orchestrator.delivery.queue_state.Queue`, scripted by hand
with no engine, no clock and no event loop; each step leaves the value it was given as it was."""

from __future__ import annotations

import functools
import typing

from orchestrator.delivery import drafts, pieces, status_messages
from orchestrator.delivery.events import (
    EditMessage,
    GuardPiece,
    PieceGuarded,
    Restarted,
    SendMessage,
    TextEmitted,
    ToolFinished,
    ToolStarted,
    WriteFailed,
    WriteSucceeded,
)
from orchestrator.delivery.planning import MAX_ATTEMPTS, Ending, Transcript, Write
from orchestrator.delivery.queue_state import Queue, new_queue
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import measure

SETTINGS = DeliverySettings(
    mode="multi_message", multi_message_unit="paragraph", show_tool_status=True
)


def _text() -> Transcript:
    return Transcript(functools.partial(measure, SETTINGS.limits), visible=False)


def _heard(queue: Queue, event: object, text: Transcript) -> Queue:
    before = queue._asdict()
    step = pieces.hear(queue, event, text, SETTINGS)  # type: ignore[arg-type]
    assert queue._asdict() == before  # the old value stands
    return step.queue


def test_every_input_of_the_queue_has_one_transition() -> None:
    assert set(pieces.TRANSITIONS) == set(typing.get_args(drafts.DraftInput))


def test_a_paragraph_goes_through_the_hook_then_out_and_leaves_the_queue() -> None:
    text, queue = _text(), new_queue(SETTINGS, "(answer restarted)")
    first = queue
    assert pieces.on_text(queue, text.append("Hel"), text, SETTINGS) is queue  # nothing complete
    queue = _heard(queue, TextEmitted(text.append("lo\n\n")), text)
    assert first == new_queue(SETTINGS, "(answer restarted)")
    assert queue.cursor == 7 and pieces.next_kind(queue) is None  # the verdict comes first
    request = pieces.guard_request(queue)
    assert request == GuardPiece(1, "Hello", (0, 5))
    asked = pieces.guard_started(queue, request.piece_id)
    assert pieces.guard_request(asked) is None and pieces.guard_request(queue) == request
    ready = _heard(asked, PieceGuarded(1, "Hello!"), text)
    assert pieces.next_kind(ready) == "send"
    sending, write = pieces.plan(ready, SETTINGS)
    assert write == Write(SendMessage("Hello!", True), final=True)
    assert ready.in_flight is None and sending.in_flight is not None
    done = _heard(sending, WriteSucceeded("7"), text)
    assert done.items == () and len(sending.items) == 1


def test_a_restart_drops_the_attempts_pieces_and_queues_the_notice_before_the_next() -> None:
    text, queue = _text(), new_queue(SETTINGS, "(answer restarted)")
    queue = _heard(queue, TextEmitted(text.append("one\n\ntwo\n\n")), text)
    queue = _heard(queue, PieceGuarded(1, "one"), text)
    queue, _ = pieces.plan(queue, SETTINGS)
    queue = _heard(queue, WriteSucceeded("1"), text)
    assert [item.text for item in queue.items] == ["two"]
    text.restart()
    restarted = _heard(queue, Restarted(), text)
    assert restarted.items == () and restarted.notice_due and restarted.cursor == 0
    again = _heard(restarted, TextEmitted(text.append("three\n\n")), text)
    assert [item.text for item in again.items] == ["(answer restarted)", "three"]


def test_a_status_line_is_edited_to_its_finished_line_and_given_up_after_its_tries() -> None:
    text, queue = _text(), new_queue(SETTINGS, "")
    queue = _heard(queue, ToolStarted(1, "⏳ search…"), text)
    queue, write = pieces.plan(queue, SETTINGS)
    assert write == Write(SendMessage("⏳ search…", False), final=True)
    queue = _heard(queue, WriteSucceeded("9"), text)
    queue = _heard(queue, ToolFinished(1, "✓ search 0.4 s"), text)
    assert pieces.next_kind(queue) == "edit"
    for tries in range(1, MAX_ATTEMPTS + 1):
        editing, write = pieces.plan(queue, SETTINGS)
        assert write == Write(EditMessage("9", "✓ search 0.4 s"), final=True)
        step = pieces.hear(editing, WriteFailed("refused"), text, SETTINGS)
        assert editing.status.edits[0].tries == tries - 1  # the old value stands
        queue = step.queue
        if tries < MAX_ATTEMPTS:
            assert step.count == ("writes_refused",) and step.backoff > 0
    assert step.count == ("writes_given_up",) and queue.status == status_messages.Status()


def test_off_queues_the_whole_text_at_the_end_with_its_marker() -> None:
    settings = DeliverySettings(mode="off")
    text, queue = _text(), new_queue(settings, "")
    text.append("All of it.")
    assert pieces.on_text(queue, "All of it.", text, settings) is queue
    ended = pieces.hear(queue, Ending("interrupted", "⚠️ cut"), text, settings).queue
    assert pieces.guard_request(ended) == GuardPiece(1, "All of it.", (0, 10))
    assert ended.items[0].message == "All of it.\n\n⚠️ cut" and queue.items == ()
