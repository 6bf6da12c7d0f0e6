"""Shared pieces of the networked integration tests: a planted population, a run config, and
the planted population's stack."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.topology import LocalTopology
from fedhh.v1 import coordinator_pb2 as pb

PLANTED = {"apple": 60, "berry": 50, "cherr": 40}
# The test runs spend eps_agg 64 and more (explicit local epsilons): above the default lifetime
# budget of a device (10 per 30 days), which the tests of that budget exercise on their own.
COORDINATOR_FLAGS = ["--lifetime-eps", "1e9"]
USERS = 200
SEED = 11


def planted_dataset(path: Path) -> Path:
    """200 users, each holding 1-3 words: planted words plus unique random ones."""
    rng = random.Random(5)
    lines = []
    holders = [w for w, count in PLANTED.items() for _ in range(count)]
    holders += [""] * (USERS - len(holders))
    rng.shuffle(holders)
    for held in holders:
        words = [held] if held else []
        for _ in range(rng.randint(1, 2)):
            words.append("".join(rng.choice(string.ascii_lowercase) for _ in range(5)))
        lines.append(" ".join(words))
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.contextmanager
def planted_stack(tmp_path: Path, database: str | None = None) -> Iterator[LocalTopology]:
    """An aggregator, a coordinator (its store ``database``, else SQLite in the workdir) and
    the planted population's 200 devices in two processes, enrolled."""
    data = planted_dataset(tmp_path / "users.txt")
    with LocalTopology(tmp_path / "topology", env={"FEDHH_CACHE": str(tmp_path / "cache")},
                       database=database) as topo:
        topo.start_aggregator()
        topo.start_coordinator(COORDINATOR_FLAGS)
        for i, users in enumerate(("0:100", "100:200")):
            topo.start_devices(f"devices-{i}", str(data), users)
        topo.wait_for_devices()
        yield topo


def admin_client(topo: LocalTopology) -> AdminClient:
    """The operator's client of ``topo``'s coordinator."""
    return AdminClient(topo.address("coordinator"), topo.token("admin"),
                       topo.workdir / "tls" / "ca.pem")


def run_config(**overrides: object) -> pb.RunConfig:
    values: dict[str, object] = dict(
        eps_agg=64.0, delta=1e-6, eps_local=8.0, rounds=3, dim_limit=1 << 14,
        target_devices=USERS, min_devices=USERS, codec="5bit", max_bits=30,
        selection="uniform", checkin_ms=30_000, stage_ms=20_000,
        completion_rounds=0,  # the rounds of the tree only (test_networked_completion.py)
    )
    values.update(overrides)
    return pb.RunConfig(**values)  # type: ignore[arg-type]


SHORT = {"a": 70, "b": 60, "c": 50}


def short_dataset(path: Path) -> Path:
    """200 users whose planted items are one letter (10 bits in the 5-bit code), for quick
    one- and two-round runs; the other items are random two-letter words."""
    rng = random.Random(7)
    holders = [w for w, count in SHORT.items() for _ in range(count)]
    holders += [""] * (USERS - len(holders))
    rng.shuffle(holders)
    lines = []
    for held in holders:
        other = "".join(rng.choice(string.ascii_lowercase[3:]) for _ in range(2))
        lines.append(f"{held} {other}".strip())
    path.write_text("\n".join(lines) + "\n")
    return path


def wait_for_line(path: Path, needle: str, timeout_s: float = 120.0) -> None:
    """Block until a service's log has a line containing ``needle`` (the service's own
    announcement of an event, not a guess at timing)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{needle!r} never appeared in {path}")


class LogMarks:
    """What each service's log gained since this was made (a restarted service appends to its
    log): the lines of one test's run alone, where the tests of a module share a topology."""

    def __init__(self, topo: LocalTopology) -> None:
        self.topo = topo
        self.offsets = {name: self._size(name) for name in topo.services}

    def _size(self, name: str) -> int:
        log = self.topo.services[name].log
        return log.stat().st_size if log.exists() else 0

    def new(self, name: str) -> str:
        with open(self.topo.services[name].log, "rb") as f:
            f.seek(self.offsets.get(name, 0))
            return f.read().decode(errors="replace")

    def wait_for(self, name: str, needle: str, timeout_s: float = 120.0) -> None:
        """Block until ``name``'s log gains a line containing ``needle`` (as
        :func:`wait_for_line`, of what was written since)."""
        import time

        deadline = time.monotonic() + timeout_s
        while needle not in self.new(name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{needle!r} never appeared in {name}'s log")
            time.sleep(0.05)


# How long a test lets a service stop after SIGTERM before it is killed (LocalTopology.stop's
# default grace is 15 s): a deadline, not a window. What a process writes as it stops (a device
# process's --stats-file, its count of refused rounds) is lost if the grace runs out first, as
# it can on a busy machine.
def cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (user and system, from /proc): what a test bounds
    where it means work done, which a loaded machine does not stretch as it does wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


STOP_GRACE_S = 300.0


def stop_cleanly(topo: LocalTopology, name: str) -> None:
    """SIGTERM service ``name`` and wait for it to exit by itself (0), so that what it writes
    on its way out is there to read."""
    assert topo.stop(name, grace_s=STOP_GRACE_S) == 0, f"{name} did not stop cleanly"


@contextlib.contextmanager
def refused_port(shared: bool = False) -> Iterator[int]:
    """A loopback port on which a connection is refused for as long as the block runs: bound
    by the test and not listening, so no other process can take it meanwhile (a port the OS
    handed out and that was closed at once may be handed to another test's service before it
    is dialled). With ``shared``, it is bound with SO_REUSEPORT, so that a server of this
    process (gRPC binds with SO_REUSEPORT) can listen on it later in the block."""
    with socket.socket() as held:
        if shared:
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


class RefusingAggregator:
    """Stands in for a device's aggregator stub: records every call in ``calls`` and refuses
    it (ABORTED, which a device does not retry), so a device stops at its first call if it
    takes part at all."""

    def __init__(self, calls: list[str] | None = None) -> None:
        self.calls: list[str] = [] if calls is None else calls

    def __getattr__(self, name: str) -> Any:
        async def refuse(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            raise grpc.aio.AioRpcError(grpc.StatusCode.ABORTED, grpc.aio.Metadata(),
                                       grpc.aio.Metadata(), details="test")
        return refuse
