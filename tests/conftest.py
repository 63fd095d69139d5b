"""Shared test fixtures: a clean environment and the recorded provider streams (architecture §8)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.pipeline import close_made_providers

__all__: list[str] = []

pytest_plugins = ["tests.peers.synapse_fixtures", "tests.peers.postgres_fixtures"]
"""The Synapse homeserver fixtures (``synapse``, ``synapse_default_limits``) and the PostgreSQL
ones (``postgres_server``, ``postgres_url``, ``store_url``), architecture §8."""

_ENV_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_HOST",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "MATRIX_ACCESS_TOKEN",
    "RELAYBOT_CONFIG",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
"""Recorded provider streams, inside the checkout: tests read nothing outside it."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never depend on the environment: unset keys, tokens, config and proxy variables.
    A relative ``storage.path`` lands in the test's own state directory (architecture §6),
    never in the home directory shared by every run."""
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "state"))


@pytest.fixture(autouse=True)
def _own_heap() -> Iterator[None]:
    """Each test's collections trace only the objects made since it began: everything alive
    before it (the session's modules, reports, earlier tests' leftovers) is frozen.

    A full collection walks every tracked object; late in a session of some 1700 tests that is
    hundreds of thousands, and one collection then holds the loop for 0.1-0.5 s, which a test
    timing a chat's edits (tests/test_policy_telegram_e2e.py) takes for a stall of ours. A
    daemon's own collections walk its own heap only, as a test's now do."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``tests/fixtures``: the recorded streams and their README."""
    return FIXTURES


@pytest.fixture
async def closes_providers() -> AsyncIterator[None]:
    """After the test, the providers ``tests.pipeline.make_turns`` built are closed (their HTTP
    clients' sessions would be left to the interpreter's exit): for the modules using it."""
    yield
    await close_made_providers()
