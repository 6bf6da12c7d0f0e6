"""A real PostgreSQL server for the tests: Debian's ``initdb``/``pg_ctl`` (the ``postgresql``
package, which ``python3 bootstrap.py test`` installs when missing) on 127.0.0.1 and a port the
OS chose, in a temporary directory, stopped and removed even when the test fails.

initdb refuses to run as root: as root the server runs as the package's ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path


def postgres_bin() -> Path:
    """The newest /usr/lib/postgresql/*/bin that has initdb and pg_ctl."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    for directory in reversed(candidates):
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    raise RuntimeError("no PostgreSQL server: install Debian's postgresql package "
                       "(python3 bootstrap.py test does when run as root)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def holding_port(port: int) -> Iterator[None]:
    """Keep ``port`` bound on 127.0.0.1 while the server that listened on it is stopped, so
    that the OS hands it to no other process meanwhile (a connection to it is refused, as to a
    stopped server). PostgreSQL binds with SO_REUSEADDR, as this does, so it can listen on the
    port again inside the block."""
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", port))
        yield


class PostgresServer:
    """``with PostgresServer() as pg: url = pg.create_database()``."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.root = Path(tempfile.mkdtemp(prefix="fedhh-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120,
                              cwd=self.root)

    def start(self) -> PostgresServer:
        done = self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "fedhh",
                         "--auth=trust", "-E", "UTF8", "--no-sync")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
        for _ in range(5):  # the port may be taken between the probe and the bind
            self.port = _free_port()
            options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                       f"-c unix_socket_directories={self.root} -c fsync=on")
            done = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                             str(self.log), "-o", options, "-w", "-t", "60", "start")
            if done.returncode == 0:
                return self
        raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()}\n"
                           f"{self.log.read_text(errors='replace')[-2000:]}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://fedhh@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        if self.data.exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server
