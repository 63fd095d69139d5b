"""Tool status lines in the delivery engine (architecture §3 "Tool status"), sans-I/O on a fake
clock: one line per call, ``⏳ name…`` while it runs, then its finished line (``✓ name 0.4 s``,
``✗ name: cause``). In ``partial`` the round's lines are the draft's last lines, each changed in
place at the draft's next edit and gone from the final text; in ``multi_message`` with
``show_tool_status`` each is its own message, edited to the finished line."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.base import ChannelLimits
from orchestrator.delivery.engine import DeliveryEngine
from orchestrator.delivery.events import (
    AnswerEnded,
    DeliveryEvent,
    EditMessage,
    RoundEnded,
    SendMessage,
    SleepUntil,
    TextEmitted,
    ToolFinished,
    ToolStarted,
    WriteSucceeded,
    WrittenElsewhere,
)
from orchestrator.delivery.settings import DeliverySettings
from tests.fakes import Fail, FakeChat, ScriptedDelivery, refused, timeout

PARTIAL = DeliverySettings(mode="partial", limits=ChannelLimits(4096, "utf16"))
MULTI = DeliverySettings(
    mode="multi_message",
    multi_message_unit="turn",
    show_tool_status=True,
    limits=ChannelLimits(4096, "utf16"),
)
NARRATION = "Let me look."
ANSWER = "Found it."


def running(name: str) -> str:
    return f"⏳ {name}…"


def done(name: str, seconds: float) -> str:
    return f"✓ {name} {seconds:.1f} s"


def failed(name: str) -> str:
    return f"✗ {name}: it broke"


def two_calls(
    finish_a: float, finish_b: float, answer_at: float
) -> list[tuple[float, DeliveryEvent]]:
    return [
        (0.0, TextEmitted(NARRATION)),
        (0.5, RoundEnded()),
        (0.5, ToolStarted(1, running("slow"))),
        (0.5, ToolStarted(2, running("lookup"))),
        (finish_a, ToolFinished(1, done("slow", finish_a - 0.5))),
        (finish_b, ToolFinished(2, failed("lookup"))),
        (answer_at, TextEmitted(ANSWER)),
        (answer_at + 0.1, AnswerEnded()),
    ]


# -- partial ---------------------------------------------------------------------------------


def test_partial_each_line_changes_in_place_at_the_next_draft_edit() -> None:
    run = ScriptedDelivery(PARTIAL)
    run.play(two_calls(finish_a=2.2, finish_b=3.4, answer_at=6.0))
    texts = [(w.t, w.text) for w in run.chat.chat_writes()]
    lines = f"{NARRATION}\n\n"
    assert texts == [
        (0.0, NARRATION),
        (1.0, lines + "⏳ slow…\n⏳ lookup…"),
        (2.2, lines + "✓ slow 1.7 s\n⏳ lookup…"),  # an interval had passed: at once
        (3.4, lines + "✓ slow 1.7 s\n✗ lookup: it broke"),
        (6.0, f"{NARRATION}\n\n{ANSWER}"),  # the final text: no status line
    ]
    assert run.chat.visible() == [f"{NARRATION}\n\n{ANSWER}"]


def test_partial_lines_finished_between_two_edits_cost_one_edit() -> None:
    run = ScriptedDelivery(PARTIAL)
    # Both finish within one interval of the edit that showed them: one edit shows both.
    run.play(two_calls(finish_a=1.2, finish_b=1.4, answer_at=5.0))
    shown = [w.text for w in run.chat.chat_writes()]
    assert shown[1:3] == [
        f"{NARRATION}\n\n⏳ slow…\n⏳ lookup…",
        f"{NARRATION}\n\n✓ slow 0.7 s\n✗ lookup: it broke",
    ]
    assert [w.t for w in run.chat.chat_writes()][:3] == [0.0, 1.0, 2.0]


def test_partial_a_new_rounds_lines_replace_the_last_rounds() -> None:
    run = ScriptedDelivery(PARTIAL)
    run.play(
        [
            (0.0, TextEmitted(NARRATION)),
            (0.5, RoundEnded()),
            (0.5, ToolStarted(1, running("a"))),
            (1.5, ToolFinished(1, done("a", 1.0))),
            (3.0, RoundEnded()),  # the next round called a tool without saying anything
            (3.0, ToolStarted(2, running("b"))),
            (3.2, ToolFinished(1, done("a", 9.9))),  # late, for a line that is gone: ignored
            (5.0, ToolFinished(2, done("b", 2.0))),
            (7.0, TextEmitted(ANSWER)),
            (7.5, AnswerEnded()),
        ]
    )
    shown = [w.text for w in run.chat.chat_writes()]
    assert f"{NARRATION}\n\n✓ a 1.0 s" in shown
    assert f"{NARRATION}\n\n⏳ b…" in shown
    assert f"{NARRATION}\n\n✓ b 2.0 s" in shown
    assert not any("9.9" in text for text in shown)
    assert run.chat.visible() == [f"{NARRATION}\n\n{ANSWER}"]


def test_a_finish_of_a_call_never_started_changes_nothing() -> None:
    engine = DeliveryEngine(PARTIAL)
    engine.handle(TextEmitted("Hi"), 0.0)
    engine.handle(WriteSucceeded("1"), 0.0)
    assert engine.handle(ToolFinished(7, done("x", 1.0)), 2.0) == [SleepUntil(4.0)]


# -- multi_message ---------------------------------------------------------------------------


def test_multi_message_each_status_message_is_edited_when_its_call_ends() -> None:
    run = ScriptedDelivery(MULTI)
    run.play(two_calls(finish_a=4.0, finish_b=6.5, answer_at=9.0))
    writes = [(w.t, w.kind, w.text) for w in run.chat.chat_writes()]
    assert writes == [
        (0.5, "send", NARRATION),
        (1.5, "send", "⏳ slow…"),
        (2.5, "send", "⏳ lookup…"),
        (4.0, "edit", "✓ slow 3.5 s"),
        (6.5, "edit", "✗ lookup: it broke"),
        (9.1, "send", ANSWER),
    ]
    assert run.chat.visible() == [NARRATION, "✓ slow 3.5 s", "✗ lookup: it broke", ANSWER]
    assert run.engine.stats.edits_sent == 2


def test_multi_message_a_finish_during_the_status_send_edits_it_once_it_landed() -> None:
    run = ScriptedDelivery(MULTI, latency=0.4)
    run.play(
        [
            (0.0, RoundEnded()),
            (0.0, ToolStarted(1, running("a"))),
            (0.2, ToolFinished(1, done("a", 0.2))),  # the send is in flight until 0.4
            (0.3, AnswerEnded()),
        ]
    )
    assert [(w.kind, w.text) for w in run.chat.chat_writes()] == [
        ("send", "⏳ a…"),
        ("edit", "✓ a 0.2 s"),
    ]
    assert run.chat.chat_writes()[1].t == 1.4  # an interval after the send completed


def test_multi_message_cannot_edit_leaves_the_running_line() -> None:
    settings = DeliverySettings(
        mode="multi_message", multi_message_unit="turn", show_tool_status=True, can_edit=False
    )
    run = ScriptedDelivery(settings)
    run.play(two_calls(finish_a=4.0, finish_b=6.5, answer_at=9.0))
    assert run.chat.visible() == [NARRATION, "⏳ slow…", "⏳ lookup…", ANSWER]
    assert run.engine.stats.edits_sent == 0


def test_multi_message_a_refused_status_edit_is_retried_then_left() -> None:
    chat = FakeChat(MULTI.limits, fail=[Fail("edit", None, refused, times=3)])
    run = ScriptedDelivery(MULTI, chat=chat)
    run.play(
        [
            (0.0, RoundEnded()),
            (0.0, ToolStarted(1, running("a"))),
            (2.0, ToolFinished(1, done("a", 2.0))),
            (2.5, TextEmitted(ANSWER)),
            (2.6, AnswerEnded()),
        ]
    )
    edits = [w for w in chat.chat_writes("edit")]
    assert len(edits) == 3 and all(w.outcome == "ChannelUnavailable" for w in edits)
    assert chat.visible() == ["⏳ a…", ANSWER]
    assert run.engine.stats.writes_given_up == 1


def test_multi_message_a_timed_out_status_edit_is_tried_again() -> None:
    chat = FakeChat(MULTI.limits, fail=[Fail("edit", 1, timeout)])
    run = ScriptedDelivery(MULTI, chat=chat)
    run.play(
        [
            (0.0, RoundEnded()),
            (0.0, ToolStarted(1, running("a"))),
            (2.0, ToolFinished(1, done("a", 2.0))),
            (2.1, AnswerEnded()),
        ]
    )
    assert [w.outcome for w in chat.chat_writes("edit")] == ["ChannelTimeout", "ok"]
    assert chat.visible() == ["✓ a 2.0 s"]


def test_off_and_multi_message_without_status_show_typing_only() -> None:
    for delivery in (
        DeliverySettings(mode="off"),
        DeliverySettings(mode="multi_message", multi_message_unit="turn"),
    ):
        run = ScriptedDelivery(delivery)
        run.play(two_calls(finish_a=4.0, finish_b=6.5, answer_at=9.0))
        assert not any("⏳" in t or "✓" in t or "✗" in t for t in run.chat.visible())
        assert run.chat.chat_writes("edit") == []
        assert run.chat.typing


# -- a write made elsewhere ------------------------------------------------------------------


def test_a_write_made_elsewhere_spaces_the_next_write_and_send() -> None:
    engine = DeliveryEngine(MULTI)
    assert engine.next_write_at() == float("-inf")
    engine.receive(WrittenElsewhere(), 3.0)
    assert engine.next_write_at() == 4.0  # an interval; the send delay (800 ms) is less
    engine.handle(RoundEnded(), 3.1)
    assert engine.handle(ToolStarted(1, running("a")), 3.2)[-1] == SleepUntil(4.0)
    assert engine.poll(4.0)[0] == SendMessage("⏳ a…")
    engine.receive(WriteSucceeded("9"), 4.0)
    engine.receive(ToolFinished(1, done("a", 1.0)), 4.1)
    assert engine.poll(5.0)[0] == EditMessage("9", "✓ a 1.0 s")


# -- the invariant over parallel calls finishing in any order ---------------------------------


@st.composite
def parallel_rounds(draw: st.DrawFn) -> dict:
    mode = draw(st.sampled_from(["partial", "multi_message"]))
    delivery = DeliverySettings(
        mode=mode,
        draft_update_interval_ms=draw(st.sampled_from([50, 300, 1000])),
        multi_message_delay_ms=draw(st.sampled_from([0, 800])),
        multi_message_unit=draw(st.sampled_from(["paragraph", "turn"])),
        show_tool_status=True,
        limits=ChannelLimits(4096, "utf16"),
    )
    calls = draw(st.integers(1, 4))
    start = draw(st.floats(0, 2).map(lambda x: round(x, 2)))
    ends = [round(start + draw(st.floats(0, 4)), 2) for _ in range(calls)]
    outcomes = [draw(st.booleans()) for _ in range(calls)]
    gap = round(draw(st.floats(0, 3)), 2)
    script: list[tuple[float, DeliveryEvent]] = []
    if draw(st.booleans()):
        script.append((0.0, TextEmitted(NARRATION)))
    script.append((start, RoundEnded()))
    script += [(start, ToolStarted(c, running(f"t{c}"))) for c in range(calls)]
    finishes = sorted(range(calls), key=lambda c: (ends[c], c))
    for c in finishes:
        line = done(f"t{c}", ends[c] - start) if outcomes[c] else failed(f"t{c}")
        script.append((ends[c], ToolFinished(c, line)))
    answer_at = max(ends) + gap
    script += [(answer_at, TextEmitted(ANSWER)), (answer_at + 0.05, AnswerEnded())]
    finished = {
        c: done(f"t{c}", ends[c] - start) if outcomes[c] else failed(f"t{c}") for c in range(calls)
    }
    return {
        "settings": delivery,
        "script": script,
        "calls": calls,
        "finished": finished,
        "latency": draw(st.sampled_from([0.0, 0.05, 0.3])),
        "gap": gap,
    }


def _status_block(text: str) -> list[str]:
    """The status lines at the end of a draft (after its last blank line)."""
    block = text.rpartition("\n\n")[2] if "\n\n" in text else text
    lines = block.split("\n")
    return lines if all(line[:1] in ("⏳", "✓", "✗") for line in lines) else []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parallel_rounds())
def test_every_started_line_is_finished_once_and_the_final_text_has_none(case: dict) -> None:
    delivery: DeliverySettings = case["settings"]
    run = ScriptedDelivery(delivery, latency=case["latency"])
    run.play(case["script"])
    chat = run.chat
    calls, finished = case["calls"], case["finished"]
    writes = chat.chat_writes()

    # Spacing, and no edit that changes nothing.
    for a, b in pairwise(writes):
        assert b.t - a.t >= delivery.interval + case["latency"] - 1e-9
    for a, b in pairwise(chat.chat_writes("send")):
        assert b.t - a.t >= delivery.send_delay + case["latency"] - 1e-9
    assert all(w.outcome == "ok" for w in writes)

    # When each event was fed: writes at or after that index were planned knowing it.
    fed_at = {(type(e).__name__, getattr(e, "call", None)): index for _, index, e in run.fed}
    answer_index = next(i for _, i, e in run.fed if e == TextEmitted(ANSWER))

    if delivery.mode == "partial":
        seen_finished: set[int] = set()
        for index, write in enumerate(writes):
            block = _status_block(write.text)
            if not block:
                continue
            # One line per call, in the order they began (the engine may write before the
            # later calls' starts are fed: a prefix of them).
            assert len(block) <= calls
            for c, line in enumerate(block):
                assert line in (running(f"t{c}"), finished[c])
                if line == finished[c]:
                    seen_finished.add(c)
                else:  # never back to running, and finished at the first edit after its end
                    assert c not in seen_finished
                    assert index < fed_at[("ToolFinished", c)]
        # With an interval (and a write's latency) to spare before the answer, some edit
        # showed every line finished.
        if case["gap"] > delivery.interval + 2 * case["latency"] + 1e-6:
            before = [w for w in writes[:answer_index] if _status_block(w.text)]
            assert before and _status_block(before[-1].text) == [finished[c] for c in range(calls)]
        final = chat.visible()
        assert final and final[-1].endswith(ANSWER)
        assert not any(_status_block(m) for m in final)
        assert not any(line[:1] in "⏳✓✗" for m in final for line in m.split("\n") if line)
        return

    # multi_message: one message per call, sent in the order they began, each showing its
    # finished line in the end, edited at most once (to that line).
    status_sends = [w for w in chat.chat_writes("send") if w.text[:1] in ("⏳", "✓", "✗")]
    assert len(status_sends) == calls
    for c, send in enumerate(status_sends):
        assert send.text in (running(f"t{c}"), finished[c])
        edits = [w for w in chat.chat_writes("edit") if w.message_id == send.message_id]
        if send.text == finished[c]:
            assert edits == []
        else:
            assert [w.text for w in edits] == [finished[c]]
        assert chat.messages[str(send.message_id)].text == finished[c]
    texts = chat.visible()
    assert texts[-1] == ANSWER
    assert texts[-1 - calls : -1] == [finished[c] for c in range(calls)]
