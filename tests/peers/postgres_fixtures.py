"""pytest fixtures for the PostgreSQL peer (architecture §8): one server per session
(``postgres_server``), a fresh database per test (``postgres_url``, with ``PGPASSWORD`` set
for the test), and ``store_url``: every store test runs against SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers.postgres import PASSWORD, PostgresServer, find_pg_bin

__all__ = ["postgres_server", "postgres_url", "store_url"]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (no pg_ctl; .ci/run installs postgresql)")
    server = PostgresServer(bin_dir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh database's URL; the password is in ``PGPASSWORD`` for this test."""
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    return postgres_server.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``sqlite:///…`` in the test's directory, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'relaybot.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url
