"""The SQLite store: history survives a restart; one row per round (DESIGN §7)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.store import RoundRecord, Store
from providers.base import ChatMessage
from providers.events import ToolCall


def test_history_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "relaybot.db"
    store = Store(path)
    call = ToolCall("c1", "current_time", '{"timezone": "UTC"}')
    store.append(
        "tg",
        "42",
        [
            ChatMessage("user", "time?"),
            ChatMessage("assistant", "Checking.", tool_calls=(call,), provider_items=({"a": 1},)),
            ChatMessage("tool", '{"iso": "x"}', tool_call_id="c1", name="current_time"),
            ChatMessage("assistant", "It is x."),
        ],
    )
    store.append("tg", "43", [ChatMessage("user", "other chat")])
    store.close()

    again = Store(path)
    history = again.history("tg", "42")
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[1].tool_calls == (call,)
    assert history[1].provider_items == ({"a": 1},)
    assert history[2].tool_call_id == "c1"
    assert again.history("tg", "43")[0].content == "other chat"


def test_history_cut_never_starts_with_a_tool_result(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    store.append(
        "c",
        "1",
        [
            ChatMessage("assistant", "", tool_calls=(ToolCall("c1", "t", "{}"),)),
            ChatMessage("tool", "r", tool_call_id="c1"),
            ChatMessage("assistant", "done"),
        ],
    )
    assert [m.role for m in store.history("c", "1", limit=2)] == ["assistant"]


def test_reset_forgets_one_conversation(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    store.append("c", "1", [ChatMessage("user", "a")])
    store.append("c", "2", [ChatMessage("user", "b")])
    store.reset("c", "1")
    assert store.history("c", "1") == []
    assert len(store.history("c", "2")) == 1


def test_round_records(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    record = RoundRecord("c", "1", "main", 2, 123.5, 10, 5, None, 3, "stop", "ok")
    store.record_round(record)
    assert store.rounds() == [record]
    assert store.rounds("other") == []
