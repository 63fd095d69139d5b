"""A real Synapse homeserver for tests (architecture §8), run as a subprocess on 127.0.0.1.

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
signing key, ``homeserver.log`` with its stdout and stderr) stays in the directory.

The configuration (:func:`homeserver_config`) keeps the server off the network:

* one ``client`` listener on 127.0.0.1 (no ``federation`` resource, no TLS), SQLite;
* ``trusted_key_servers: []`` (the default fetches keys from matrix.org),
  ``federation_domain_whitelist: []``, ``federation_sender_instances: []``;
* ``report_stats: false`` (phone-home statistics), ``url_preview_enabled: false``,
  ``enable_metrics: false``, presence off; the media repository on (users' files, through
  authenticated media ``/_matrix/client/v1/media``), its store in the server's directory;
* ``ip_range_blacklist`` covers every address, so any outbound HTTP Synapse might still try
  (push gateways, identity servers, federation) is refused before a connection is made;
* ``bcrypt_rounds: 4``, a fixed ``registration_shared_secret``, open registration off.

Rate limits: every ``rc_*`` limit is relaxed (:data:`RELAXED`) unless ``default_rc_message`` is
set, which leaves ``rc_message`` at Synapse's default (:data:`SYNAPSE_DEFAULT_RC_MESSAGE`:
0.2 messages per second, bursts of 10) so sends get real ``429 M_LIMIT_EXCEEDED`` answers with
``retry_after_ms``.

The session fixtures are in :mod:`tests.peers.synapse_fixtures`; the human's side (a
matrix-nio client, a filtered sync, edits resolved) in :mod:`tests.peers.matrix_client`.

Example::

    with SynapseHomeserver(tmp_path) as server:
        bot = server.register("bot")  # MatrixUser(user_id, access_token, device_id, password)
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import yaml

__all__ = [
    "RELAXED",
    "SERVER_NAME",
    "SHARED_SECRET",
    "SYNAPSE_DEFAULT_RC_MESSAGE",
    "MatrixUser",
    "SynapseError",
    "SynapseHomeserver",
    "free_port",
    "homeserver_config",
]

SERVER_NAME = "relaybot.test"
"""The homeserver's name: MXIDs are ``@localpart:relaybot.test`` (``.test`` never resolves)."""

SHARED_SECRET = "relaybot-tests-registration-secret"
"""``registration_shared_secret`` of every test homeserver."""

RELAXED = {"per_second": 10_000, "burst_count": 100_000}
"""One ``rc_*`` setting no test reaches."""

SYNAPSE_DEFAULT_RC_MESSAGE = {"per_second": 0.2, "burst_count": 10}
"""Synapse's own ``rc_message`` default (``synapse/config/ratelimiting.py``), for reference."""

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

_PORT_ATTEMPTS = 3
"""Ports tried when the one picked was taken before Synapse bound it."""

_PR_SET_PDEATHSIG = 1
"""``prctl`` option, from ``<linux/prctl.h>``."""

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
                "resources": [{"names": ["client", "media"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(directory / "homeserver.db")}},
        "signing_key_path": str(directory / "signing.key"),
        "media_store_path": str(directory / "media_store"),
        "enable_media_repo": True,  # users' files (m.file, m.audio); no thumbnails asked
        "max_upload_size": "50M",
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
        """Write the config, generate keys, spawn the server and wait until it answers.

        A port another process took between :func:`free_port` and Synapse's bind is replaced
        by a new one (up to :data:`_PORT_ATTEMPTS` tries).
        """
        self._log_file = self.log_path.open("ab")
        try:
            self._write_config()
            generated = subprocess.run(
                [*self._command(), "--generate-keys"],
                cwd=self.directory,
                env=_server_environment(),
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                check=False,
            )
            if generated.returncode != 0:
                raise SynapseError(
                    f"--generate-keys exited {generated.returncode}\n{self.log_tail()}"
                )
            for attempt in range(1, _PORT_ATTEMPTS + 1):
                started = time.monotonic()
                log_offset = self.log_size()
                self._process = subprocess.Popen(
                    self._command(),
                    cwd=self.directory,
                    env=_server_environment(),
                    stdin=subprocess.DEVNULL,
                    stdout=self._log_file,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent,
                )
                if self._wait_ready(started, retry_port=attempt < _PORT_ATTEMPTS, since=log_offset):
                    self.startup_seconds = time.monotonic() - started
                    return
                self._write_config()
        except BaseException:
            self.stop()
            raise

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "synapse.app.homeserver", "-c", str(self.config_path)]

    def _write_config(self) -> None:
        self.port = free_port()
        config = homeserver_config(
            self.directory,
            self.port,
            server_name=self.server_name,
            default_rc_message=self.default_rc_message,
        )
        self.config_path.write_text(yaml.dump(config, Dumper=_PlainDumper, sort_keys=False))

    def _wait_ready(self, started: float, *, retry_port: bool, since: int) -> bool:
        """True once ``/versions`` answers 200; False when the port was taken and
        ``retry_port``; else raises :class:`SynapseError`."""
        deadline = started + self.startup_timeout
        url = f"{self.base_url}/_matrix/client/versions"
        with httpx.Client(trust_env=False, timeout=2.0) as http:
            while True:
                assert self._process is not None
                code = self._process.poll()
                if code is not None:
                    self._process = None
                    if retry_port and b"Address already in use" in self._log_since(since):
                        return False
                    raise SynapseError(f"synapse exited {code} while starting\n{self.log_tail()}")
                try:
                    if http.get(url).status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SynapseError(
                        f"synapse not ready after {self.startup_timeout:.0f} s\n{self.log_tail()}"
                    )
                time.sleep(0.1)

    def _log_since(self, offset: int) -> bytes:
        assert self._log_file is not None
        self._log_file.flush()
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return log.read()

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


class _PlainDumper(yaml.SafeDumper):
    """Writes a shared value (``RELAXED``) out in full each time, not as a YAML alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _die_with_parent() -> None:
    """In the child before exec: on Linux, SIGTERM the server when the test process dies, so a
    killed test run leaves no homeserver behind (``prctl(PR_SET_PDEATHSIG)``)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _server_environment() -> dict[str, str]:
    """The caller's environment without proxy variables (Synapse honours them outbound)."""
    return {key: value for key, value in os.environ.items() if key not in _PROXY_VARIABLES}
