"""Shared test fixtures: a clean environment and the shared recorded fixtures (DESIGN §8)."""

from __future__ import annotations

from pathlib import Path

import pytest

__all__: list[str] = []

_ENV_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_HOST",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "MATRIX_ACCESS_TOKEN",
    "RELAYBOT_CONFIG",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)

_REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = _REPO.parent / "shared" / "fixtures"
"""Recorded provider streams; the checkout sits beside ``shared/`` (locally and in CI)."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never depend on the environment: unset keys, tokens, config and proxy variables."""
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``<repo>/../shared/fixtures``; fails with a clear message when it is missing."""
    if not SHARED_FIXTURES.is_dir():
        pytest.fail(
            f"shared fixtures not found at {SHARED_FIXTURES}: check out the shared/ directory "
            "beside the repository",
            pytrace=False,
        )
    return SHARED_FIXTURES
