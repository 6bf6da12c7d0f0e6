"""The whole system as local processes: aggregator, coordinator and device processes on
127.0.0.1 with OS-chosen ports, TLS from a freshly made development CA, fresh secrets.

Used by `fedhh up`, `fedhh loadtest` and the integration tests. Each service writes a ready file
with its bound port; the topology waits for it (no sleeps as synchronisation) and stops every
process on exit (SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from fedhh.errors import ConfigError, StateError
from fedhh.output_paths import LAST_FOLDER_MADE, check_parent_folder
from fedhh.rpc.credentials import load_or_create_signing_key, write_private
from fedhh.rpc.tls import make_dev_pki

# Generous: a busy machine (CI beside other work) can take tens of seconds to start a process
# that imports numpy, scipy and grpc, and a device process enrolls hundreds of devices.
READY_TIMEOUT_S = 300.0


def _absolute_path_list(paths: str) -> str:
    """``paths`` (os.pathsep-separated) with each relative entry made absolute against the
    current directory; an empty entry, which Python reads as the current directory, too."""
    return os.pathsep.join(str(Path(entry or ".").resolve()) for entry in paths.split(os.pathsep))


@dataclass
class Service:
    name: str
    args: list[str]
    log: Path
    ready_file: Path | None
    process: subprocess.Popen[bytes] | None = None
    ready: dict[str, Any] = field(default_factory=dict)
    # Its ports, bound (not listening) while it is stopped: a restart listens on them again.
    held: list[socket.socket] = field(default_factory=list)

    @property
    def pid(self) -> int:
        if self.process is None:
            raise StateError(f"{self.name} is not running")
        return self.process.pid


STORE_FILE = "coordinator.sqlite"  # the coordinator's store in the workdir, by default


class LocalTopology:
    """Start with ``with LocalTopology(...) as topo:``; every process stops on exit."""

    def __init__(self, workdir: str | Path | None = None, tls: bool = True,
                 env: dict[str, str] | None = None, database: str | None = None) -> None:
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="fedhh-up-")
        # absolute: the children run in it and are given paths inside it
        self.workdir = Path(workdir or self._tmp.name).resolve()  # type: ignore[union-attr]
        if self.workdir.exists() and not self.workdir.is_dir():
            raise ConfigError(f"workdir {self.workdir} is a file, not a folder")
        # A later `fedhh up` in the workdir reuses its store, keys and devices' budgets: a
        # mistyped parent made a whole new tree, and the run started afresh beside them.
        if not self.workdir.parent.exists():  # (a file there: mkdir says so, below)
            check_parent_folder(f"--workdir {self.workdir}", self.workdir, LAST_FOLDER_MADE,
                                "start afresh beside the earlier workdir: a new store, keys "
                                "and device budgets")
        try:
            self.workdir.mkdir(exist_ok=True)
        except OSError as error:
            # (before, the bare OSError: "Not a directory: /tmp/afile/sub", naming no option)
            raise ConfigError(f"workdir {self.workdir} cannot be made: "
                              f"{error.strerror or error}; give a folder that exists or can "
                              "be created") from None
        self._lock = _lock_workdir(self.workdir)
        self.tls = tls
        from fedhh.data.registry import cache_root

        # Children run in the workdir: point them at the caller's dataset cache, and at the
        # code the caller imports (a relative PYTHONPATH entry, as in `PYTHONPATH=.:server`,
        # would name another folder there, and the child would import an installed copy).
        self.env = {**os.environ, "FEDHH_CACHE": str(cache_root().resolve()), **(env or {})}
        if self.env.get("PYTHONPATH"):
            self.env["PYTHONPATH"] = _absolute_path_list(self.env["PYTHONPATH"])
        self.services: dict[str, Service] = {}
        self.pki = make_dev_pki(self.workdir / "tls", ["localhost", "127.0.0.1"]) if tls else None
        # (the selector token apart from the control token: the aggregation workers hold that
        # one, and a selector's stream can fill cohorts with any enrolled device)
        # (a new file each, renamed into place: written into the file found there, a token
        # went through a link put at its name to the file it named, and into one of 0644
        # stayed readable by all)
        for name in ("control", "admin", "selector"):
            write_private(self.workdir / f"{name}.token", secrets.token_hex(24))
        self.signing_key = self.workdir / "coordinator-signing.pem"
        load_or_create_signing_key(self.signing_key)
        # The coordinator's store: a SQLite file here, or a postgresql:// URL.
        self.database = database or str(self.workdir / STORE_FILE)

    # ---- addresses and secrets -------------------------------------------------------------
    def token(self, name: str) -> bytes:
        return (self.workdir / f"{name}.token").read_bytes()

    def enrollment_tokens(self, name: str, dataset: str, users: str) -> Path:
        """Device process ``name``'s own enrollment tokens: one minted through the coordinator's
        admin API for each user it hosts (``users``, as ``fedhh device --users`` takes it),
        written as ``USER TOKEN`` lines readable by their owner only. No process gets another's
        tokens (issue 28: a process holding every token could enroll the other processes'
        devices). A file kept in the workdir keeps its tokens, and tokens are minted for the
        hosted users it lacks: a rerun that splits the users otherwise (another dataset,
        --devices or --processes) hosts others in the same process (before, the file was
        written once, and that process stopped the rerun: "devices-1.tokens has no token for
        users [25, 26, 27, 28, 29]"); `refuse_moved_users` keeps a user where it was."""
        from fedhh.data.registry import resolve_dataset
        from fedhh.rpc.admin_client import AdminClient
        from fedhh.rpc.credentials import write_private
        from fedhh.rpc.device_users import read_tokens, user_range

        path = self.workdir / f"{name}.tokens"
        hosted = user_range(users, resolve_dataset(dataset).num_users)
        held = read_tokens(path) if path.exists() else {}
        missing = [u for u in hosted if u not in held]
        if missing:
            ca = self.workdir / "tls" / "ca.pem" if self.tls else None
            with AdminClient(self.address("coordinator"), self.token("admin"), ca) as admin:
                tokens = admin.mint_tokens(len(missing), label=f"local topology {name}")
            held.update(zip(missing, tokens, strict=True))
        if missing or not path.exists():
            write_private(path, "".join(f"{u} {t}\n" for u, t in sorted(held.items())))
        return path

    def refuse_moved_users(self, plan: dict[str, range]) -> None:
        """ConfigError if a device process of ``plan`` (name: the users it is to host) would
        host a user whose tokens file in the workdir is another process's: that user's identity
        and device budget are in the other process's state folder, so it would enrol afresh,
        its budget whole again (`fedhh up` calls this before it starts the device processes)."""
        from fedhh.rpc.device_users import read_tokens

        moved: dict[int, tuple[str, str]] = {}
        for path in sorted(self.workdir.glob("*.tokens")):
            held = read_tokens(path).keys()
            for name, users in plan.items():
                if path.stem != name:
                    for user in held & set(users):
                        moved.setdefault(user, (name, path.stem))
        if moved:
            user = min(moved)
            name, earlier = moved[user]
            raise ConfigError(
                f"workdir {self.workdir}: {name} would host user {user}, which an earlier run "
                f"there gave to {earlier} ({len(moved)} users move so); a moved user would "
                "enrol afresh, its device budget whole again. Rerun with the earlier split of "
                "the users (the same number of users, --devices and --processes) or use "
                "another --workdir")

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.services[name].ready['port']}"

    def web_address(self, name: str) -> str:
        """Where a service started with ``--web-listen`` serves the Connect protocol."""
        port = self.services[name].ready.get("web_port")
        if port is None:
            raise StateError(f"{name} serves no Connect port (start it with --web-listen)")
        return f"127.0.0.1:{port}"

    def session_address(self, name: str) -> str:
        """Where a service serves its framed port ("" if it serves none: a test's
        stand-in)."""
        port = self.services[name].ready.get("session_port")
        return f"127.0.0.1:{port}" if port else ""

    def _transport(self) -> list[str]:
        return ["--tls-dir", str(self.workdir / "tls")] if self.tls else ["--insecure"]

    # ---- processes -------------------------------------------------------------------------
    def _port(self, name: str, which: str = "port") -> int:
        """The port a service had (a restart keeps it: clients and tasks name it), else 0."""
        return int(self.services[name].ready.get(which) or 0) if name in self.services else 0

    def start_aggregator(self, extra: list[str] | None = None, name: str = "aggregator"
                         ) -> Service:
        """An aggregator; ``name`` "worker-i" for the workers of a combiner. It serves the
        framed session port too, which the coordinator names in each task."""
        args = ["aggregator", "--listen", f"127.0.0.1:{self._port(name)}", *self._transport(),
                "--session-listen", f"127.0.0.1:{self._port(name, 'session_port')}",
                "--coordinator-key", f"{self.signing_key}.pub",
                "--state-dir", str(self.workdir / f"{name}-state"),
                "--control-token-file", str(self.workdir / "control.token"), *(extra or [])]
        return self._start(name, args)

    def start_workers(self, count: int, extra: list[str] | None = None) -> list[Service]:
        """``count`` aggregators named worker-0 .. worker-(count-1), for a combiner."""
        return [self.start_aggregator(extra, f"worker-{i}") for i in range(count)]

    def start_combiner(self, extra: list[str] | None = None) -> Service:
        """The combiner in front of every started worker (in index order); the coordinator
        then takes it as its aggregation service (``aggregation_address``)."""
        workers = sorted((n for n in self.services if n.startswith("worker-")),
                         key=lambda n: int(n.split("-")[1]))
        if not workers:
            raise StateError("start the workers before the combiner")
        args = ["combiner", "--listen", f"127.0.0.1:{self._port('combiner')}",
                *self._transport(), "--coordinator-key", f"{self.signing_key}.pub",
                "--state-dir", str(self.workdir / "combiner-state"),
                "--control-token-file", str(self.workdir / "control.token"),
                *(arg for n in workers for arg in (
                    "--worker", f"{self.address(n)}={self.address(n)}=="
                                f"{self.session_address(n)}".rstrip("="))),
                *(extra or [])]
        return self._start("combiner", args)

    def aggregation_address(self) -> str:
        """Where the coordinator reaches the aggregation service: the combiner if there is
        one, else the aggregator."""
        return self.address("combiner" if "combiner" in self.services else "aggregator")

    def start_coordinator(self, extra: list[str] | None = None, selectors: bool = True
                          ) -> Service:
        """The coordinator; with ``selectors`` (the default) it takes the topology's selector
        token, so that ``start_selector``'s selectors can attach."""
        args = ["coordinator", "--listen", f"127.0.0.1:{self._port('coordinator')}",
                *self._transport(), "--db", self.database,
                "--signing-key", str(self.signing_key),
                "--aggregator", self.aggregation_address(),
                *(["--aggregator-session-address", self.session_address("aggregator")]
                  if "combiner" not in self.services and "aggregator" in self.services
                  and self.session_address("aggregator") else []),
                "--session-listen", f"127.0.0.1:{self._port('coordinator', 'session_port')}",
                "--control-token-file", str(self.workdir / "control.token"),
                "--admin-token-file", str(self.workdir / "admin.token"),
                *(["--selector-token-file", str(self.workdir / "selector.token")]
                  if selectors else []), *(extra or [])]
        return self._start("coordinator", args)

    def start_selector(self, name: str, extra: list[str] | None = None) -> Service:
        """A selector (``fedhh selector``) of the coordinator, on its store; ``name``
        "selector-i". Devices started afterwards ask the selectors instead of the coordinator
        (``device_addresses``)."""
        args = ["selector", "--listen", f"127.0.0.1:{self._port(name)}", *self._transport(),
                "--session-listen", f"127.0.0.1:{self._port(name, 'session_port')}",
                "--db", self.database, "--leader", self.address("coordinator"),
                "--coordinator-key", f"{self.signing_key}.pub", "--name", name,
                "--selector-token-file", str(self.workdir / "selector.token"), *(extra or [])]
        return self._start(name, args)

    def selectors(self) -> list[str]:
        return sorted((n for n in self.services if n.startswith("selector-")),
                      key=lambda n: int(n.split("-")[1]))

    def device_addresses(self, start: int = 0) -> str:
        """Where devices ask for tasks (``--coordinator``): every selector (from the
        ``start``-th on, round the list) if there are any, else the coordinator; each with
        its framed port."""
        names = self.selectors() or ["coordinator"]
        turn = start % len(names)
        return ",".join(f"{self.address(n)}={self.session_address(n)}".rstrip("=")
                        for n in names[turn:] + names[:turn])

    def start_devices(self, name: str, dataset: str, users: str,
                      extra: list[str] | None = None, connect: bool = False,
                      first_selector: int = 0) -> Service:
        """A device process; with ``connect``, its devices speak the Connect protocol to the
        coordinator's and the aggregator's web ports (started with ``--web-listen``). With
        selectors, its devices ask them (``device_addresses(first_selector)``)."""
        transport = ["--ca", str(self.workdir / "tls" / "ca.pem")] if self.tls else ["--insecure"]
        coordinator = self.device_addresses(first_selector)
        if connect:
            coordinator = self.web_address("coordinator")
            transport += ["--connect", "--connect-aggregator",
                          f"{self.address('aggregator')}={self.web_address('aggregator')}"]
        args = ["device", "--coordinator", coordinator, *transport,
                "--dataset", dataset, "--users", users,
                "--enrollment-tokens-file", str(self.enrollment_tokens(name, dataset, users)),
                "--state-dir", str(self.workdir / name),
                "--stats-file", str(self.workdir / f"{name}.stats.json"), *(extra or [])]
        return self._start(name, args, wait=False)

    def wait_for_devices(self) -> None:
        """Block until every device process has enrolled all its devices (they poll for tasks
        from then on): start a run only after this, or its first check-in may find nobody."""
        for service in self.services.values():
            if service.args[:1] == ["device"] and not service.ready:
                service.ready = self._wait_ready(service)

    def _start(self, name: str, args: list[str], wait: bool = True) -> Service:
        ready_file = self.workdir / f"{name}.ready.json"
        full = [*args, "--ready-file", str(ready_file)]
        log = self.workdir / f"{name}.log"
        service = Service(name, full, log, ready_file)
        if ready_file.exists():
            ready_file.unlink()
        earlier = self.services.get(name)
        held = earlier.held if earlier is not None else []
        with open(log, "ab") as out:
            service.process = subprocess.Popen(
                [sys.executable, "-m", "fedhh.cli.main", *full], stdout=out,
                stderr=subprocess.STDOUT, env=self.env, cwd=self.workdir)
        self.services[name] = service
        try:
            if wait:
                service.ready = self._wait_ready(service)
        finally:
            _release(held)
        return service

    def _wait_ready(self, service: Service) -> dict[str, Any]:
        deadline = time.monotonic() + READY_TIMEOUT_S
        ready_file, process = service.ready_file, service.process
        if ready_file is None or process is None:
            raise StateError(f"{service.name} has no ready file to wait for")
        while time.monotonic() < deadline:
            if ready_file.exists():
                return dict(json.loads(ready_file.read_text()))
            if process.poll() is not None:
                raise StateError(f"{service.name} exited with {process.returncode}; "
                                 f"see {service.log}:\n{_tail(service.log)}")
            time.sleep(0.05)  # polling a file the child writes; not synchronising on time
        raise StateError(f"{service.name} not ready after {READY_TIMEOUT_S} s; see {service.log}")

    def stop(self, name: str, sig: int = signal.SIGTERM, grace_s: float = 15.0) -> int | None:
        service = self.services.get(name)
        if service is None or service.process is None or service.process.poll() is not None:
            return None if service is None or service.process is None \
                else service.process.returncode
        service.process.send_signal(sig)
        try:
            return service.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            service.process.kill()
            return service.process.wait()
        finally:
            service.held = _hold_ports(service.ready)

    def kill(self, name: str) -> None:
        """SIGKILL, as a crash would."""
        self.stop(name, signal.SIGKILL)

    def close(self) -> None:
        for name in reversed(list(self.services)):
            if name.startswith("devices"):
                self.stop(name)
        for name in self.selectors():
            self.stop(name)
        for name in ("coordinator", "combiner", "aggregator"):
            self.stop(name)
        # The rest, workers last, and whatever the names above do not cover: before, a
        # selector started under another name than "selector-i" was left running, orphaned.
        for name in sorted(reversed(list(self.services)), key=lambda n: n.startswith("worker-")):
            self.stop(name)
        for service in self.services.values():
            _release(service.held)

    def __enter__(self) -> LocalTopology:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
        os.close(self._lock)
        if self._tmp is not None:
            self._tmp.cleanup()


def _lock_workdir(workdir: Path) -> int:
    """An exclusive lock on ``workdir`` for this process's topology (its descriptor; the lock
    goes with the process, however it ends), or ConfigError naming the holder: a second
    `fedhh up` in the same workdir rewrote the first's tokens and keys and shared its store,
    and the first's run failed."""
    try:
        fd = os.open(workdir / ".fedhh-up.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as error:
        # (before, "Permission denied: /sys/fs/.fedhh-up.lock", naming neither the workdir
        # nor what to do)
        raise ConfigError(f"workdir {workdir} cannot be written: {error.strerror or error}; "
                          "give a folder this user can write (--workdir), or none for a "
                          "temporary one") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise ConfigError(f"workdir {workdir} is in use by another fedhh up or load test "
                          f"(pid {holder}): give another --workdir, or stop that one "
                          f"first") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _hold_ports(ready: dict[str, Any]) -> list[socket.socket]:
    """The ports a stopped service listened on that a restart asks for again (``_port``),
    bound on 127.0.0.1 without listening: until the restart listens (gRPC and
    ``fedhh.rpc.http_listener`` bind with SO_REUSEADDR, as this does, which Linux allows beside
    a socket that does not listen), the OS hands them to no other process, neither as another
    service's port nor as a client's local port, and a connection to them is refused, as to
    the stopped service. Before, a restart on a busy machine could find its port taken."""
    held = []
    for which in ("port", "session_port"):
        port = int(ready.get(which) or 0)
        if not port:
            continue
        sock = socket.socket()
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
        except OSError:  # (taken already: the restart will say so)
            sock.close()
            continue
        held.append(sock)
    return held


def _release(held: list[socket.socket]) -> None:
    for sock in held:
        sock.close()
    held.clear()
