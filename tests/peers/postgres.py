"""A real PostgreSQL server for tests (architecture §8, §9), started with the system's
``initdb`` and ``pg_ctl``.

Theory of operation
-------------------
:func:`find_pg_bin` finds the server programs: on ``PATH`` (``pg_ctl``), else the newest
``/usr/lib/postgresql/*/bin`` (where Debian's ``postgresql`` package puts them; ``.ci/run``
installs it where it is missing). :class:`PostgresServer` makes a cluster in a fresh temporary
directory (``initdb``: superuser ``relaybot``, password authentication over TCP with
SCRAM-SHA-256, the unix socket in the same directory), starts it on 127.0.0.1 on a free port
and stops it (``pg_ctl stop -m immediate``) and removes the directory at the end. PostgreSQL
refuses to run as root: as root the cluster belongs to the ``postgres`` user, or ``nobody``.

:meth:`PostgresServer.new_database` creates an empty database and returns its URL (without the
password, which the clients read from ``PGPASSWORD``, as relaybot's do).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg

__all__ = ["PASSWORD", "PostgresServer", "find_pg_bin"]

PASSWORD = "test-password-not-secret"
USER = "relaybot"


def find_pg_bin() -> Path | None:
    """The directory of ``pg_ctl``/``initdb``, or None when PostgreSQL is not installed."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster on 127.0.0.1; see the module docstring."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.directory = Path(tempfile.mkdtemp(prefix="relaybot-pg-"))
        self.data = self.directory / "data"
        self.port = _free_port()
        self._names = itertools.count(1)
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = "postgres" if _has_user("postgres") else "nobody"
            entry = pwd.getpwnam(self._user)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)

    @property
    def admin_url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self._user is not None:
            command = ["setpriv", f"--reuid={self._user}", f"--regid={self._user}",
                       "--clear-groups", *command]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True, cwd=self.directory, timeout=120)

    def start(self) -> None:
        pwfile = self.directory / "pw"
        pwfile.write_text(PASSWORD)
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}",
            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port}"
            f" -c unix_socket_directories={self.directory} -c max_connections=200"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.directory / "log"),
            "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.directory, ignore_errors=True)

    def new_database(self) -> str:
        """A new, empty database; returns its URL (no password in it)."""
        name = f"test_{next(self._names)}"
        with psycopg.connect(self.admin_url, password=PASSWORD, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}".encode())
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
