"""A real Synapse homeserver for tests (DESIGN §8), run as a subprocess on 127.0.0.1.

Theory of operation
-------------------
:class:`SynapseHomeserver` writes a ``homeserver.yaml`` into its own directory (a pytest temp
dir), generates the signing key (``python -m synapse.app.homeserver -c homeserver.yaml
--generate-keys``), starts ``python -m synapse.app.homeserver -c homeserver.yaml`` with the
same interpreter and waits, for at most ``startup_timeout`` seconds, until
``GET /_matrix/client/versions`` answers 200. Users are registered through the shared-secret
admin API (``/_synapse/admin/v1/register``: a nonce, then an HMAC-SHA1 over
``nonce NUL username NUL password NUL admin|notadmin``,
https://element-hq.github.io/synapse/latest/admin_api/register_api.html). :meth:`stop` sends
SIGTERM, then SIGKILL after ``stop_timeout`` seconds. Everything the server writes (database,
signing key, pid file, ``homeserver.log`` with its stdout and stderr) stays in the directory.

The configuration (:func:`homeserver_config`) keeps the server off the network:

* one ``client`` listener on 127.0.0.1 (no ``federation`` resource, no TLS), SQLite;
* ``trusted_key_servers: []`` (the default fetches keys from matrix.org),
  ``federation_domain_whitelist: []``, ``federation_sender_instances: []``;
* ``report_stats: false`` (phone-home statistics), ``url_preview_enabled: false``,
  ``enable_media_repo: false``, ``enable_metrics: false``, presence off;
* ``ip_range_blacklist`` covers every address, so any outbound HTTP Synapse might still try
  (push gateways, identity servers, federation) is refused before a connection is made;
* ``bcrypt_rounds: 4``, a fixed ``registration_shared_secret``, open registration off.

Rate limits: every ``rc_*`` limit is relaxed (:data:`RELAXED`) unless ``default_rc_message`` is
set, which leaves ``rc_message`` at Synapse's default (:data:`SYNAPSE_DEFAULT_RC_MESSAGE`:
0.2 messages per second, bursts of 10) so sends get real ``429 M_LIMIT_EXCEEDED`` answers with
``retry_after_ms``.

Session fixtures (load this module from ``tests/conftest.py``):

* ``synapse``: one relaxed homeserver for the whole session;
* ``synapse_default_limits``: a second homeserver with the default ``rc_message``, started only
  when a test asks for it.

Both skip, with the reason, only when the ``synapse`` package cannot be imported. A test that
uses either and fails gets the server's log tail as a report section ("synapse log").

Client-side helpers for the human's view: :func:`nio_client` (a matrix-nio ``AsyncClient``
with ``max_limit_exceeded=0``), :func:`sync_timeline` (one ``/sync`` with
:data:`SYNC_FILTER`: a plain sync returns only 10 timeline events), :func:`resolve_edits` (the
content a client shows once ``m.replace`` edits are applied) and :func:`thread_root`.

Example::

    user = synapse.register("bot")
    client = nio_client(synapse, user)
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import nio
import pytest
import yaml

__all__ = [
    "RELAXED",
    "SERVER_NAME",
    "SHARED_SECRET",
    "SYNAPSE_DEFAULT_RC_MESSAGE",
    "SYNC_FILTER",
    "MatrixUser",
    "SynapseError",
    "SynapseHomeserver",
    "free_port",
    "homeserver_config",
    "nio_client",
    "resolve_edits",
    "synapse",
    "synapse_default_limits",
    "sync_timeline",
    "thread_root",
]

SERVER_NAME = "relaybot.test"
"""The homeserver's name: MXIDs are ``@localpart:relaybot.test`` (``.test`` never resolves)."""

SHARED_SECRET = "relaybot-tests-registration-secret"
"""``registration_shared_secret`` of every test homeserver."""

RELAXED = {"per_second": 10_000, "burst_count": 100_000}
"""One ``rc_*`` setting no test reaches."""

SYNAPSE_DEFAULT_RC_MESSAGE = {"per_second": 0.2, "burst_count": 10}
"""Synapse's own ``rc_message`` default (``synapse/config/ratelimiting.py``), for reference."""

SYNC_FILTER: dict[str, Any] = {
    "room": {"timeline": {"limit": 200}, "state": {"lazy_load_members": True}},
    "presence": {"types": []},
    "account_data": {"types": []},
}
"""A ``/sync`` filter whose timeline limit (200 events) exceeds the default of 10."""

_RELAXED_LIMITS: dict[str, Any] = {
    "rc_message": RELAXED,
    "rc_registration": RELAXED,
    "rc_registration_token_validity": RELAXED,
    "rc_login": {"address": RELAXED, "account": RELAXED, "failed_attempts": RELAXED},
    "rc_joins": {"local": RELAXED, "remote": RELAXED},
    "rc_joins_per_room": RELAXED,
    "rc_invites": {"per_room": RELAXED, "per_user": RELAXED, "per_issuer": RELAXED},
    "rc_third_party_invite": RELAXED,
    "rc_room_creation": RELAXED,
    "rc_admin_redaction": RELAXED,
    "rc_3pid_validation": RELAXED,
    "rc_key_requests": RELAXED,
    "rc_presence": {"per_user": RELAXED},
    "rc_delayed_event_mgmt": RELAXED,
    "rc_reports": RELAXED,
    "rc_user_directory": RELAXED,
    "rc_profile": RELAXED,
    "rc_media_create": RELAXED,
}

_PROXY_VARIABLES = {
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
}


class SynapseError(RuntimeError):
    """The homeserver did not start, or refused an admin call; the message holds its log tail."""


@dataclass(frozen=True)
class MatrixUser:
    """A registered account: ``user_id`` (``@name:relaybot.test``), its first device's access
    token and device id, and the password (for tests of password login)."""

    user_id: str
    access_token: str
    device_id: str
    password: str

    @property
    def localpart(self) -> str:
        """The part of ``user_id`` between ``@`` and ``:``."""
        return self.user_id[1:].split(":", 1)[0]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def homeserver_config(
    directory: Path,
    port: int,
    *,
    server_name: str = SERVER_NAME,
    default_rc_message: bool = False,
) -> dict[str, Any]:
    """The ``homeserver.yaml`` content (a dict) for a server keeping its files in ``directory``.

    Options: https://element-hq.github.io/synapse/latest/usage/configuration/config_documentation.html
    """
    limits = dict(_RELAXED_LIMITS)
    if default_rc_message:
        del limits["rc_message"]
    return {
        "server_name": server_name,
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "pid_file": str(directory / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(directory / "homeserver.db")}},
        "signing_key_path": str(directory / "signing.key"),
        "media_store_path": str(directory / "media_store"),
        "enable_media_repo": False,
        "url_preview_enabled": False,
        "report_stats": False,
        "enable_metrics": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "federation_sender_instances": [],
        "allow_public_rooms_over_federation": False,
        "serve_server_wellknown": False,
        "ip_range_blacklist": ["0.0.0.0/0", "::/0"],
        "presence": {"enabled": False},
        "enable_registration": False,
        "registration_shared_secret": SHARED_SECRET,
        "macaroon_secret_key": "relaybot-tests-macaroon-secret",
        "form_secret": "relaybot-tests-form-secret",
        "bcrypt_rounds": 4,
        **limits,
    }


class SynapseHomeserver:
    """One Synapse process on ``127.0.0.1:<free port>``; a context manager (start/stop).

    ``directory`` must exist and is the server's working directory; nothing is written outside
    it. ``startup_timeout`` and ``stop_timeout`` are seconds. :meth:`start` raises
    :class:`SynapseError` when the process exits or is not ready in time.
    """

    def __init__(
        self,
        directory: Path,
        *,
        server_name: str = SERVER_NAME,
        default_rc_message: bool = False,
        startup_timeout: float = 180.0,
        stop_timeout: float = 15.0,
    ) -> None:
        self.directory = directory
        self.server_name = server_name
        self.default_rc_message = default_rc_message
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.port = 0
        self.config_path = directory / "homeserver.yaml"
        self.log_path = directory / "homeserver.log"
        self.startup_seconds: float | None = None
        """Seconds from spawning the server to its first 200 on ``/versions`` (key generation
        not included)."""
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self._names = itertools.count(1)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``, the homeserver URL clients are given."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> SynapseHomeserver:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Write the config, generate keys, spawn the server and wait until it answers."""
        self.port = free_port()
        config = homeserver_config(
            self.directory,
            self.port,
            server_name=self.server_name,
            default_rc_message=self.default_rc_message,
        )
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self._log_file = self.log_path.open("ab")
        command = [sys.executable, "-m", "synapse.app.homeserver", "-c", str(self.config_path)]
        generated = subprocess.run(
            [*command, "--generate-keys"],
            cwd=self.directory,
            env=_server_environment(),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            check=False,
        )
        if generated.returncode != 0:
            raise SynapseError(f"--generate-keys exited {generated.returncode}\n{self.log_tail()}")
        started = time.monotonic()
        self._process = subprocess.Popen(
            command,
            cwd=self.directory,
            env=_server_environment(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started

    def _wait_ready(self, started: float) -> None:
        deadline = started + self.startup_timeout
        url = f"{self.base_url}/_matrix/client/versions"
        with httpx.Client(trust_env=False, timeout=2.0) as http:
            while True:
                assert self._process is not None
                code = self._process.poll()
                if code is not None:
                    raise SynapseError(f"synapse exited {code} while starting\n{self.log_tail()}")
                try:
                    if http.get(url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SynapseError(
                        f"synapse not ready after {self.startup_timeout:.0f} s\n{self.log_tail()}"
                    )
                time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_timeout`` s; the log file stays. Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log_tail(self, lines: int = 80) -> str:
        """The last ``lines`` lines of ``homeserver.log`` (empty when there is none yet)."""
        if self._log_file is not None:
            self._log_file.flush()
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_size(self) -> int:
        """Bytes in ``homeserver.log`` so far (to show only what one test added)."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def register(
        self, localpart: str | None = None, *, password: str | None = None, admin: bool = False
    ) -> MatrixUser:
        """Create an account via the shared-secret admin API and log its first device in.

        ``localpart`` defaults to ``user<N>``; ``password`` to ``pw-<localpart>``. Raises
        :class:`SynapseError` with Synapse's answer when it refuses (e.g. a taken name).
        """
        name = localpart if localpart is not None else f"user{next(self._names)}"
        secret_password = password if password is not None else f"pw-{name}"
        url = f"{self.base_url}/_synapse/admin/v1/register"
        with httpx.Client(trust_env=False, timeout=30.0) as http:
            nonce = http.get(url).raise_for_status().json()["nonce"]
            mac = hmac.new(SHARED_SECRET.encode(), digestmod=hashlib.sha1)
            for part in (nonce, name, secret_password):
                mac.update(part.encode())
                mac.update(b"\x00")
            mac.update(b"admin" if admin else b"notadmin")
            body = {
                "nonce": nonce,
                "username": name,
                "password": secret_password,
                "admin": admin,
                "mac": mac.hexdigest(),
            }
            response = http.post(url, json=body)
        if response.status_code != 200:
            raise SynapseError(f"register {name!r}: {response.status_code} {response.text}")
        answer = response.json()
        return MatrixUser(
            user_id=answer["user_id"],
            access_token=answer["access_token"],
            device_id=answer["device_id"],
            password=secret_password,
        )


def _server_environment() -> dict[str, str]:
    """The caller's environment without proxy variables (Synapse honours them outbound)."""
    return {key: value for key, value in os.environ.items() if key not in _PROXY_VARIABLES}


def nio_client(homeserver: SynapseHomeserver, user: MatrixUser) -> nio.AsyncClient:
    """A matrix-nio client logged in as ``user``: no end-to-end encryption, no store, and
    ``max_limit_exceeded=0`` / ``max_timeouts=0`` so a 429 or a timeout comes back as an error
    response instead of being retried. The caller closes it (``await client.close()``)."""
    config = nio.AsyncClientConfig(
        max_limit_exceeded=0,
        max_timeouts=0,
        encryption_enabled=False,
        store_sync_tokens=False,
    )
    client = nio.AsyncClient(homeserver.base_url, user.user_id, config=config)
    client.restore_login(user.user_id, user.device_id, user.access_token)
    return client


async def sync_timeline(
    client: nio.AsyncClient, room_id: str, *, timeout_ms: int = 0
) -> list[dict[str, Any]]:
    """One ``/sync`` with :data:`SYNC_FILTER` from the client's last batch: the raw events
    (``event.source`` dicts, oldest first) the room's timeline gained; ``timeout_ms`` is the
    long-poll wait. Raises ``AssertionError`` carrying the error response when the sync fails,
    or when its timeline is ``limited`` (events were skipped)."""
    response = await client.sync(timeout=timeout_ms, sync_filter=SYNC_FILTER)
    assert isinstance(response, nio.SyncResponse), response
    room = response.rooms.join.get(room_id)
    if room is None:
        return []
    assert not room.timeline.limited, f"the sync skipped events of {room_id}"
    return [event.source for event in room.timeline.events]


def resolve_edits(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The content a client shows for each original event of ``events`` (raw dicts, any order),
    keyed by event id, after applying ``m.replace`` edits.

    Per the Client-Server API, "Event replacements" (spec v1.11 §11.37): a replacement counts
    only when it has the original's sender and is not itself replacing a replacement; the one
    with the greatest ``origin_server_ts`` (then the greatest event id) wins, and its
    ``m.new_content`` replaces the content, the original's ``m.relates_to`` kept (e.g. a thread).
    """
    originals: dict[str, dict[str, Any]] = {}
    edits: list[dict[str, Any]] = []
    for event in events:
        relation = event.get("content", {}).get("m.relates_to", {})
        if relation.get("rel_type") == "m.replace":
            edits.append(event)
        else:
            originals[event["event_id"]] = event
    shown = {event_id: dict(event["content"]) for event_id, event in originals.items()}
    winners: dict[str, dict[str, Any]] = {}
    for edit in edits:
        target = edit["content"]["m.relates_to"].get("event_id")
        original = originals.get(target)
        if original is None or original["sender"] != edit["sender"]:
            continue
        if "m.new_content" not in edit["content"]:
            continue
        best = winners.get(target)
        if best is None or (edit["origin_server_ts"], edit["event_id"]) > (
            best["origin_server_ts"],
            best["event_id"],
        ):
            winners[target] = edit
    for target, edit in winners.items():
        content = dict(edit["content"]["m.new_content"])
        relation = originals[target]["content"].get("m.relates_to")
        if relation is not None:
            content["m.relates_to"] = relation
        shown[target] = content
    return shown


def thread_root(event: dict[str, Any]) -> str | None:
    """The thread root event id of a raw event in a thread (``rel_type: m.thread``), else None."""
    relation = event.get("content", {}).get("m.relates_to", {})
    if relation.get("rel_type") == "m.thread":
        root: str = relation["event_id"]
        return root
    return None


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
