"""Tool-call hygiene, pure (architecture §5 "Tools"): ids every provider accepts, paired with
their results, and the repeat guard."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.tools.tool_calls import REPEAT_LIMIT, RepeatGuard, normalise_ids, valid_id
from providers.base import ChatMessage
from providers.events import ToolCall


def _round(*ids: str, name: str = "current_time") -> list[ChatMessage]:
    calls = tuple(ToolCall(i, name, "{}") for i in ids)
    results = [ChatMessage("tool", f"result {i}", tool_call_id=i, name=name) for i in ids]
    return [ChatMessage("assistant", "", tool_calls=calls), *results]


def _pairs(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    """(call id, content of the result that answers it), in order."""
    calls = [c.id for m in messages for c in m.tool_calls]
    results = [(m.tool_call_id or "", m.content) for m in messages if m.role == "tool"]
    assert [r[0] for r in results] == calls
    return results


def test_ids_a_compatible_server_sends_become_valid_and_unique() -> None:
    history = [ChatMessage("user", "hi"), *_round("functions.read:0"), *_round("call_0")]
    history += _round("call_0")  # reused in a later round
    out = normalise_ids(history)
    ids = [c.id for m in out for c in m.tool_calls]
    assert all(valid_id(i) for i in ids)
    assert len(set(ids)) == len(ids) == 3
    assert ids[0] == "functions_read_0" and ids[1] == "call_0"
    # each result still answers its own call: the contents show which
    assert [content for _, content in _pairs(out)] == [
        "result functions.read:0",
        "result call_0",
        "result call_0",
    ]
    assert out[0] is history[0]


def test_one_id_twice_in_one_message_is_paired_in_content_order() -> None:
    calls = (ToolCall("x", "a", "{}"), ToolCall("x", "b", "{}"))
    history = [
        ChatMessage("assistant", "", tool_calls=calls),
        ChatMessage("tool", "from a", tool_call_id="x", name="a"),
        ChatMessage("tool", "from b", tool_call_id="x", name="b"),
    ]
    out = normalise_ids(history)
    first, second = out[0].tool_calls
    assert first.id != second.id
    assert _pairs(out) == [(first.id, "from a"), (second.id, "from b")]


def test_valid_unique_ids_and_provider_items_are_kept_verbatim() -> None:
    items = ({"type": "tool_use", "id": "toolu_01A", "name": "t", "input": {}},)
    history = [
        ChatMessage(
            "assistant", "", tool_calls=(ToolCall("toolu_01A", "t"),), provider_items=items
        ),
        ChatMessage("tool", "r", tool_call_id="toolu_01A", name="t"),
    ]
    assert normalise_ids(history) == history


def test_provider_items_follow_a_renamed_id() -> None:
    items = (
        {"type": "reasoning", "id": "rs_1"},
        {"type": "function_call", "call_id": "fc:1", "name": "t", "arguments": "{}"},
    )
    history = [
        ChatMessage("assistant", "", tool_calls=(ToolCall("fc:1", "t"),), provider_items=items),
        ChatMessage("tool", "r", tool_call_id="fc:1", name="t"),
    ]
    out = normalise_ids(history)
    assert out[0].tool_calls[0].id == "fc_1" == out[1].tool_call_id
    assert out[0].provider_items == (items[0], {**items[1], "call_id": "fc_1"})


@given(st.lists(st.text(max_size=60), min_size=1, max_size=8))
def test_any_ids_come_out_valid_unique_and_paired(ids: list[str]) -> None:
    history = [m for i in ids for m in _round(i)]
    out = normalise_ids(history)
    new = [c.id for m in out for c in m.tool_calls]
    assert all(valid_id(i) for i in new) and len(set(new)) == len(new)
    assert [content for _, content in _pairs(out)] == [f"result {i}" for i in ids]


def test_an_identical_call_runs_at_most_twice_per_turn() -> None:
    guard = RepeatGuard()
    offered = {"current_time"}
    call = ToolCall("1", "current_time", '{"timezone": "UTC"}')
    same = ToolCall("2", "current_time", '{ "timezone":"UTC" }')
    other = ToolCall("3", "current_time", '{"timezone": "Asia/Tokyo"}')
    assert [guard.refusal(c, offered) for c in (call, same)] == [None] * REPEAT_LIMIT
    assert not guard.tripped
    assert guard.refusal(other, offered) is None
    refusal = guard.refusal(call, offered)
    assert refusal is not None and "already ran 2 times" in refusal and guard.tripped


def test_an_unknown_tool_is_refused_and_trips_the_guard() -> None:
    guard = RepeatGuard()
    refusal = guard.refusal(ToolCall("1", "read_file", "{}"), {"current_time"})
    assert refusal == (
        "there is no tool named 'read_file' (the tools are: current_time); it was not run"
    )
    assert guard.tripped
