"""Both stores behind one seam (architecture §7, §9): every test here runs against SQLite and a
real PostgreSQL server (``store_url``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import pytest

from channels.base import Attachment, InboundMessage
from orchestrator.store import ConversationStore, Draft, RoundRecord, open_store
from providers.base import ChatMessage
from providers.events import ToolCall


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[ConversationStore]:
    opened = await open_store(store_url)
    try:
        yield opened
    finally:
        await opened.aclose()


def _message(text: str, update_id: int | None = None, chat: str = "1") -> InboundMessage:
    ids = (update_id,) if update_id is not None else ()
    return InboundMessage("tg", chat, "u", "@u", text, None, update_ids=ids)


async def test_history_round_trips_tool_calls_and_survives_reopening(store_url: str) -> None:
    store = await open_store(store_url)
    call = ToolCall("c1", "current_time", '{"timezone": "UTC"}')
    await store.append(
        "tg",
        "42",
        [
            ChatMessage("user", "time?"),
            ChatMessage("assistant", "Checking.", tool_calls=(call,), provider_items=({"a": 1},)),
            ChatMessage("tool", '{"iso": "x"}', tool_call_id="c1", name="current_time"),
            ChatMessage("assistant", "It is x."),
        ],
    )
    await store.append("tg", "42", [ChatMessage("user", "in a topic")], thread_id="7")
    await store.aclose()
    again = await open_store(store_url)
    try:
        history = await again.history("tg", "42")
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
        assert history[1].tool_calls == (call,) and history[1].provider_items == ({"a": 1},)
        assert [m.content for m in await again.history("tg", "42", "7")] == ["in a topic"]
        await again.reset("tg", "42")
        assert await again.history("tg", "42") == []
        assert len(await again.history("tg", "42", "7")) == 1
    finally:
        await again.aclose()


async def test_round_records_and_outcome_changes(store: ConversationStore) -> None:
    record = RoundRecord("tg", "1", "main", 2, 123.5, 10, 5, None, 3, "stop", "ok", "7")
    row = await store.record_round(record)
    other = RoundRecord("dc", "2", None, 1, None, None, None, None, 0, None, "interrupted")
    await store.record_round(other)
    await store.set_round_outcome(row, "undelivered")
    assert await store.rounds("tg") == [RoundRecord(*_fields(record, outcome="undelivered"))]
    assert len(await store.rounds()) == 2


def _fields(record: RoundRecord, **changes: object) -> list[object]:
    values = {name: getattr(record, name) for name in RoundRecord.__slots__}
    values.update(changes)
    return [values[name] for name in RoundRecord.__slots__]


async def test_waiting_messages_queue_by_update_id_and_are_taken_once(
    store: ConversationStore,
) -> None:
    photo = Attachment("image/png", b"\x89PNG", 4)
    later = await store.add_waiting(_message("second", 11))
    first = InboundMessage(
        "tg", "1", "u", "@u", "first", "5", update_ids=(10,), attachments=(photo,)
    )
    earlier = await store.add_waiting(first)
    await store.add_waiting(_message("other chat", 12, chat="2"))
    head = await store.next_waiting("tg", "1", None)
    assert head is not None and head.id == earlier and head.message == first
    assert await store.take_waiting(earlier) is True
    assert await store.take_waiting(earlier) is False  # another holder took it already
    head = await store.next_waiting("tg", "1", None)
    assert head is not None and head.id == later
    assert sorted(await store.pending_conversations()) == [("tg", "1", None), ("tg", "2", None)]
    assert [w.message.text for w in await store.waiting()] == ["second", "other chat"]


async def test_an_update_is_taken_once(store: ConversationStore) -> None:
    assert await store.mark_seen("tg", (100,)) is True
    assert await store.mark_seen("tg", (100,)) is False
    assert await store.mark_seen("other", (100,)) is True
    assert await store.mark_seen("tg", (101, 100)) is False  # an album with a seen part
    assert await store.mark_seen("tg", (101, 102)) is True
    assert await store.mark_seen("tg", ()) is True


async def test_moving_a_chat_moves_history_and_waiting_messages(store: ConversationStore) -> None:
    await store.append("tg", "-1", [ChatMessage("user", "in the group")])
    await store.add_waiting(InboundMessage("tg", "-1", "u", "@u", "queued", "9"))
    await store.move_conversation("tg", "-1", "-100")
    assert [m.content for m in await store.history("tg", "-100")] == ["in the group"]
    (moved,) = await store.waiting()
    assert moved.message.chat_id == "-100" and moved.message.message_id is None


async def test_channel_state_and_drafts(store: ConversationStore) -> None:
    state = store.channel_state("mx")
    assert await state.get("since") is None
    await state.set("since", "s1")
    await state.set("since", "s2")
    assert await state.get("since") == "s2"
    draft = Draft("tg", "1", None, "77", "Half an ans", False)
    await store.set_draft(draft)
    await store.set_draft(Draft("tg", "1", None, "78", "*Half*", True))
    assert await store.draft("tg", "1", None) == Draft("tg", "1", None, "78", "*Half*", True)
    assert await store.pending_conversations() == [("tg", "1", None)]
    await store.clear_draft("tg", "1", None)
    assert await store.draft("tg", "1", None) is None


async def test_a_reply_in_flight_is_recorded_before_its_first_message_and_listed(
    store: ConversationStore,
) -> None:
    before = Draft("tg", "1", "7", None, "", False, (), reply_to="500")
    await store.set_draft(before)
    assert await store.draft("tg", "1", "7") == before
    written = Draft("tg", "1", "7", "78", "second part", True, ("77", "78"), "500")
    await store.set_draft(written)
    await store.set_draft(Draft("tg", "2", None, None, "", False))
    assert await store.draft("tg", "1", "7") == written
    assert await store.drafts() == [written, Draft("tg", "2", None, None, "", False)]
    await store.clear_draft("tg", "1", "7")
    assert [d.chat_id for d in await store.drafts()] == ["2"]


async def test_claims_are_exclusive_until_released(store: ConversationStore) -> None:
    assert await store.try_claim("tg", "1", None) is True
    assert await store.try_claim("tg", "1", None) is False
    assert await store.try_claim("tg", "1", "7") is True  # a thread is its own conversation
    await store.release("tg", "1", None)
    assert await store.try_claim("tg", "1", None) is True


async def test_prune_deletes_history_and_rounds_older_than_the_cut(
    store: ConversationStore,
) -> None:
    await store.append("tg", "1", [ChatMessage("user", "old")])
    await store.record_round(RoundRecord("tg", "1", None, 1, None, None, None, None, 0, None, "ok"))
    cut = time.time() + 0.001
    await anyio.sleep(0.01)
    await store.append("tg", "1", [ChatMessage("user", "new")])
    assert await store.prune(cut) == 2
    assert [m.content for m in await store.history("tg", "1")] == ["new"]
    assert await store.rounds() == []


async def test_dump_and_load_copy_every_table(store: ConversationStore, tmp_path: object) -> None:
    await store.append("tg", "1", [ChatMessage("user", "hello")])
    await store.record_round(RoundRecord("tg", "1", "m", 1, 5.0, 1, 2, 0, 1, "stop", "ok"))
    await store.add_waiting(_message("queued", 3))
    await store.mark_seen("tg", (3,))
    await store.channel_state("mx").set("since", "s")
    copy = await open_store("sqlite:///:memory:".replace(":memory:", str(tmp_path) + "/c.db"))
    try:
        for table in ("messages", "rounds", "waiting", "channel_state", "seen_updates"):
            await copy.load(table, await store.dump(table))
        assert [m.content for m in await copy.history("tg", "1")] == ["hello"]
        assert (await copy.rounds())[0].ttft_ms == 5.0
        assert (await copy.next_waiting("tg", "1", None)) is not None
        assert await copy.mark_seen("tg", (3,)) is False
        assert await copy.channel_state("mx").get("since") == "s"
    finally:
        await copy.aclose()


async def test_the_history_cut_never_starts_on_a_tool_result(store: ConversationStore) -> None:
    call = ToolCall("c1", "t", "{}")
    older = [ChatMessage("user", f"old {i}") for i in range(10)]
    await store.append("c", "1", older)
    # 200 kept: the cut falls on the tool result, whose call is older than the cut.
    pair = [
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", "r", tool_call_id="c1"),
    ]
    await store.append("c", "1", pair)
    await store.append("c", "1", [ChatMessage("user", f"new {i}") for i in range(199)])
    history = await store.history("c", "1")
    assert history[0].role == "user" and history[0].content == "new 0"
    assert len(history) == 199


async def test_recent_rounds_newest_first_with_their_time(store: ConversationStore) -> None:
    before = time.time()
    for chat in ("1", "2", "1"):
        await store.record_round(
            RoundRecord("tg", chat, None, 1, None, None, None, None, 0, None, "ok")
        )
    recent = await store.recent_rounds(2)
    assert [record.chat_id for _, record in recent] == ["1", "2"]
    assert all(before - 1 <= at <= time.time() + 1 for at, _ in recent)
    assert [r.chat_id for _, r in await store.recent_rounds(10, "2")] == ["2"]
