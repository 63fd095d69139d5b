"""What only the SQLite store does (architecture §7): its file's modes, older files gaining new
columns, the blocking core kept off the event loop. What both stores do is in
``tests/test_store_engines.py``."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path

import anyio
import pytest

from channels.base import InboundMessage
from orchestrator.store import AsyncStore, Draft, Store
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


def test_file_is_0600_in_a_directory_created_0700(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)  # a usual umask: without care, 0755 and 0644
    try:
        path = tmp_path / "data" / "relaybot" / "relaybot.db"
        store = Store(path)
        store.append("c", "1", [ChatMessage("user", "a")])
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700
    for companion in path.parent.glob("relaybot.db-*"):  # WAL and shared memory
        assert stat.S_IMODE(companion.stat().st_mode) == 0o600, companion.name
    store.close()


def test_an_existing_file_is_narrowed_to_0600(tmp_path: Path) -> None:
    path = tmp_path / "relaybot.db"
    path.touch(mode=0o644)
    os.chmod(path, 0o644)
    Store(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_waiting_messages_survive_reopening_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = Store(path)
    first = InboundMessage("tg", "1", "u", "@u", "one", "10", thread_id="7")
    second = InboundMessage("tg", "1", "u", "@u", "two", "11", is_direct=False, mentions_bot=True)
    a = store.add_waiting(first, received_at=100.0)
    store.add_waiting(second)
    store.close()
    again = Store(path)
    kept = again.waiting()
    assert [w.message for w in kept] == [first, second]
    assert kept[0].received_at == 100.0 and kept[1].received_at > 100.0
    again.remove_waiting(a)
    assert [w.message for w in again.waiting()] == [second]


def test_a_store_written_before_threads_gains_them(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with sqlite3.connect(path) as old:
        old.executescript(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,"
            " chat_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, tool_calls TEXT,"
            " tool_call_id TEXT, name TEXT, provider_items TEXT, created_at REAL NOT NULL);"
            "INSERT INTO messages (channel, chat_id, role, content, created_at)"
            " VALUES ('tg', '1', 'user', 'before', 0);"
        )
    store = Store(path)
    assert [m.content for m in store.history("tg", "1")] == ["before"]
    store.append("tg", "1", [ChatMessage("user", "in topic")], thread_id="3")
    assert [m.content for m in store.history("tg", "1", "3")] == ["in topic"]


def test_a_store_whose_drafts_kept_one_message_gains_the_reply_in_flight_columns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db"
    with sqlite3.connect(path) as old:
        old.executescript(
            "CREATE TABLE drafts (channel TEXT NOT NULL, chat_id TEXT NOT NULL,"
            " thread_id TEXT NOT NULL, message_id TEXT NOT NULL, text TEXT NOT NULL,"
            " formatted INTEGER NOT NULL, PRIMARY KEY (channel, chat_id, thread_id));"
            "INSERT INTO drafts VALUES ('tg', '1', '', '77', 'Half an ans', 0);"
        )
    store = Store(path)
    assert store.drafts() == [Draft("tg", "1", None, "77", "Half an ans", False)]
    store.set_draft(Draft("tg", "2", None, None, "", False, (), reply_to="9"))
    assert store.draft("tg", "2", None) == Draft("tg", "2", None, None, "", False, (), "9")


class _SlowDisk(Store):
    """A store whose history read blocks its thread until released (a slow disk)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = threading.Event()
        self.threads: list[int] = []

    def history(
        self, channel: str, chat_id: str, thread_id: str | None = None, *, limit: int = 200
    ) -> list[ChatMessage]:
        self.threads.append(threading.get_ident())
        assert self.release.wait(10), "the event loop was blocked"
        return super().history(channel, chat_id, thread_id, limit=limit)


async def test_async_store_never_blocks_the_event_loop(tmp_path: Path) -> None:
    disk = _SlowDisk(tmp_path / "db")
    store = AsyncStore(disk)
    await store.append("c", "1", [ChatMessage("user", "a")])
    results: list[list[ChatMessage]] = []

    async def read() -> None:
        results.append(await store.history("c", "1"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        while not disk.threads:  # noqa: ASYNC110 - the read is running on its thread
            await anyio.sleep(0.01)
        # The loop still runs while the disk is slow: it is what releases the read.
        disk.release.set()
    assert [m.content for m in results[0]] == ["a"]
    assert disk.threads != [threading.get_ident()]


async def test_async_store_runs_calls_one_at_a_time_in_order(tmp_path: Path) -> None:
    store = AsyncStore(Store(tmp_path / "db"))
    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(store.append, "c", "1", [ChatMessage("user", str(i))])
            await anyio.lowlevel.checkpoint()
    assert [m.content for m in await store.history("c", "1")] == [str(i) for i in range(20)]


async def test_a_write_whose_caller_was_cancelled_still_lands_before_later_calls(
    tmp_path: Path,
) -> None:
    disk = _SlowDisk(tmp_path / "db")
    store = AsyncStore(disk)
    with anyio.move_on_after(0.05):
        await store.history("c", "1")  # held on its thread: the caller gives up
    write = store.append("c", "1", [ChatMessage("user", "kept")])
    disk.release.set()
    await write
    assert [m.content for m in await store.history("c", "1")] == ["kept"]


async def test_an_error_of_a_store_call_reaches_its_caller_and_the_next_call_runs(
    tmp_path: Path,
) -> None:
    store = AsyncStore(Store(tmp_path / "db"))
    with pytest.raises(KeyError):
        await store.load("no_such_table", [(1,)])
    await store.append("c", "1", [ChatMessage("user", "after")])
    assert [m.content for m in await store.history("c", "1")] == ["after"]
    await store.aclose()
