"""Pytest plugin with the Synapse homeserver fixtures (architecture §8); ``tests/conftest.py`` loads
it.

* ``synapse`` (session): one homeserver with every ``rc_*`` limit relaxed;
* ``synapse_default_limits`` (session): a second homeserver keeping Synapse's default
  ``rc_message`` (0.2/s, bursts of 10), started only when a test asks for it.

Both skip, with the reason, only when the ``synapse`` package cannot be imported
(``pip install -e '.[test]'`` installs it, so CI runs them). A failed test that used either gets
the server's log tail as a report section. Each server's files stay in its pytest temp dir
(``synapse0``, ``synapse-default-limits0``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Generator, Iterator

import pytest

from tests.peers.synapse import SynapseHomeserver

__all__ = ["pytest_runtest_makereport", "synapse", "synapse_default_limits"]


def _require_synapse() -> None:
    if importlib.util.find_spec("synapse") is None:
        pytest.skip("matrix-synapse is not installed (pip install -e '.[test]' installs it)")


def _run_homeserver(
    factory: pytest.TempPathFactory, name: str, *, default_rc_message: bool
) -> Generator[SynapseHomeserver, None, None]:
    _require_synapse()
    server = SynapseHomeserver(factory.mktemp(name), default_rc_message=default_rc_message)
    with server:
        yield server


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SynapseHomeserver]:
    """The session's homeserver, every ``rc_*`` limit relaxed."""
    yield from _run_homeserver(tmp_path_factory, "synapse", default_rc_message=False)


@pytest.fixture(scope="session")
def synapse_default_limits(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SynapseHomeserver]:
    """A second homeserver keeping Synapse's default ``rc_message`` (0.2/s, bursts of 10)."""
    yield from _run_homeserver(tmp_path_factory, "synapse-default-limits", default_rc_message=True)


_SERVER_FIXTURES = ("synapse", "synapse_default_limits")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used a homeserver gets its log tail as a report section."""
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for name in _SERVER_FIXTURES:
            server = funcargs.get(name)
            if isinstance(server, SynapseHomeserver):
                report.sections.append((f"{name} log ({server.log_path})", server.log_tail(200)))
    return report
