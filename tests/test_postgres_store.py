"""What the PostgreSQL store adds for several instances (architecture §9), against a real server:
versioned migrations applied once, claims that hold across instances and die with one, an
update taken once under concurrency, and ``relaybot migrate-store``."""

from __future__ import annotations

from pathlib import Path

import anyio
import psycopg
import pytest

from channels.base import InboundMessage
from config.store_url import parse_store_url, written_password
from orchestrator.cli import main
from orchestrator.store import Draft, RoundRecord, Store, open_store
from orchestrator.store.postgres import PostgresStore
from orchestrator.store.postgres_schema import SchemaTooNew, migrations
from providers.base import ChatMessage


def test_the_packaged_migrations_are_numbered_one_by_one() -> None:
    """Two branches that each add "the next" migration must not both ship it: a shared number
    would be applied for one file and refused for the other on every database."""
    assert [m.version for m in migrations()] == list(range(1, len(migrations()) + 1))


async def test_migrations_are_versioned_and_applied_once(postgres_url: str) -> None:
    first = await PostgresStore.connect(postgres_url)
    second = await PostgresStore.connect(postgres_url)  # a second instance starting
    await first.aclose()
    await second.aclose()
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")
        applied = rows.fetchall()
    assert applied == [(m.version, m.name) for m in migrations()]
    assert applied[0] == (1, "initial")


async def test_a_database_at_version_1_upgrades_and_keeps_its_draft(postgres_url: str) -> None:
    """A database the first release wrote (migration 1 only, a draft kept) gains the replies
    in flight columns at the next start (migration 2); the draft reads back as it was."""
    (initial,) = [m for m in migrations() if m.version == 1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(initial.sql.encode())
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (1, 'initial')")
        conn.execute("INSERT INTO drafts VALUES ('tg', '1', '', '77', 'Half an ans', false)")
    store = await PostgresStore.connect(postgres_url)
    try:
        assert await store.drafts() == [Draft("tg", "1", None, "77", "Half an ans", False)]
    finally:
        await store.aclose()
    with psycopg.connect(postgres_url) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
    assert sorted(versions) == [m.version for m in migrations()] and 2 in versions


async def test_a_schema_newer_than_the_code_is_refused(postgres_url: str) -> None:
    await (await PostgresStore.connect(postgres_url)).aclose()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (9999, 'future')")
    with pytest.raises(SchemaTooNew):
        await PostgresStore.connect(postgres_url)


async def test_a_claim_holds_across_instances_and_dies_with_its_connection(
    postgres_url: str,
) -> None:
    a = await PostgresStore.connect(postgres_url)
    b = await PostgresStore.connect(postgres_url)
    try:
        assert await a.try_claim("tg", "1", None)
        assert not await b.try_claim("tg", "1", None)
        await a.release("tg", "1", None)
        assert await b.try_claim("tg", "1", None)
        assert not await a.try_claim("tg", "1", None)
        # b's process dies: the server ends its session, and with it the lock.
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks"
                " WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
            )
        with anyio.fail_after(5):
            while not await a.try_claim("tg", "1", None):  # noqa: ASYNC110 - the server's
                await anyio.sleep(0.05)  # end of b's session is polled
        # b reconnects for its next claim; the conversation is a's now.
        assert not await b.try_claim("tg", "1", None)
        assert await b.try_claim("tg", "2", None)
    finally:
        await a.aclose()
        await b.aclose()


async def test_an_update_posted_to_several_instances_at_once_is_taken_once(
    postgres_url: str,
) -> None:
    stores = [await PostgresStore.connect(postgres_url) for _ in range(3)]
    taken: list[bool] = []

    async def take(store: PostgresStore, update_id: int) -> None:
        taken.append(await store.mark_seen("tg", (update_id,)))

    try:
        async with anyio.create_task_group() as tg:
            for update_id in range(50):
                for store in stores:
                    tg.start_soon(take, store, update_id)
                    tg.start_soon(take, store, update_id)
        assert taken.count(True) == 50 and len(taken) == 300
        assert await stores[0].seen_count("tg") == 50
    finally:
        for store in stores:
            await store.aclose()


def test_a_password_written_in_the_url_is_told_apart_from_one_from_the_environment() -> None:
    # The config model and migrate-store refuse a written one (tests/test_config_loader.py).
    assert parse_store_url("postgresql://relaybot:hunter2@db/relaybot").kind == "postgresql"
    assert written_password("postgresql://relaybot:hunter2@db/relaybot")
    assert not written_password("${DATABASE_URL}")
    assert not written_password("postgresql://relaybot:${DB_PASSWORD}@db/relaybot")
    assert written_password("postgresql://relaybot:x${DB_PASSWORD}@db/relaybot")
    assert not written_password("postgresql://relaybot@db/relaybot")


async def test_migrate_store_copies_sqlite_into_postgresql_once(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "relaybot.db"
    old = Store(path)
    old.append("tg", "1", [ChatMessage("user", "hi"), ChatMessage("assistant", "hello")])
    old.append("tg", "1", [ChatMessage("user", "in a topic")], thread_id="5")
    old.record_round(RoundRecord("tg", "1", "main", 1, 80.0, 3, 4, None, 2, "stop", "ok"))
    old.add_waiting(InboundMessage("tg", "1", "u", "@u", "queued", "7", update_ids=(70,)))
    old.mark_seen("tg", (70,))
    old.set_state("mx", "since", "s_1")
    old.append("tg", "2", [ChatMessage("user", "older"), ChatMessage("user", "newer")])
    old.compact("tg", "2", None, 1, "a summary")
    old.execute(
        "INSERT INTO chat_settings (channel, chat_id, thread_id, key, value)"
        " VALUES (%s, %s, %s, %s, %s)",
        ("tg", "1", "", "model", "smart"),
    )
    old.close()
    source = f"sqlite:///{path}"

    code = await anyio.to_thread.run_sync(
        main, ["migrate-store", "--from", source, "--to", postgres_url]
    )
    assert code == 0
    assert capsys.readouterr().out.strip() == (
        "copied 4 messages, 1 rounds, 1 waiting, 1 channel_state, 1 seen_updates, 1 summaries,"
        " 1 chat_settings, 0 usage"
    )
    copy = await open_store(postgres_url)
    try:
        assert [m.content for m in await copy.history("tg", "1")] == ["hi", "hello"]
        assert await copy.controls.chat_settings("tg", "1", None) == {"model": "smart"}
        assert [m.content for m in await copy.history("tg", "1", "5")] == ["in a topic"]
        assert (await copy.rounds())[0].ttft_ms == 80.0
        waiting = await copy.next_waiting("tg", "1", None)
        assert waiting is not None and waiting.message.text == "queued"
        assert not await copy.mark_seen("tg", (70,))
        assert await copy.get_state("mx", "since") == "s_1"
        assert await copy.summary("tg", "2") == "a summary"
    finally:
        await copy.aclose()

    again = await anyio.to_thread.run_sync(
        main, ["migrate-store", "--from", source, "--to", postgres_url]
    )
    assert again == 1
    assert capsys.readouterr().err.strip() == (
        "relaybot: migrate-store: the destination store already holds history or run records"
    )
    bad = await anyio.to_thread.run_sync(
        main, ["migrate-store", "--from", "mysql://x", "--to", source]
    )
    assert bad == 2


async def test_stop_requests_reach_every_instance_and_claims_are_visible_to_all(
    postgres_url: str,
) -> None:
    a = await PostgresStore.connect(postgres_url)
    b = await PostgresStore.connect(postgres_url)
    heard: list[tuple[str, str, str | None]] = []
    try:
        assert not await b.claimed("tg", "1", "7")
        assert await a.try_claim("tg", "1", "7")
        assert await b.claimed("tg", "1", "7") and not await b.claimed("tg", "1", None)

        async def listen() -> None:
            async for key in a.stop_requests():
                heard.append(key)

        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            with anyio.fail_after(5):
                while not heard:  # until the LISTEN is in place and heard
                    await b.request_stop("tg", "1", "7")
                    await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
        assert heard[0] == ("tg", "1", "7")
    finally:
        await a.aclose()
        await b.aclose()
