"""`fedhh experiments` on Dask: a real LocalCluster, and a real `dask scheduler` with `dask
worker` processes on 127.0.0.1 (ports chosen by the OS), against the serial run of the same
study on the tiny dataset. The report and every stored run equal the serial run's; a worker
killed in the middle of its run loses nothing (Dask gives the run to the other worker and the
client stores it); a second invocation submits nothing."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import os
import re
import select
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cli_kit
import numpy as np
import pytest

from fedhh.cli.main import main
from fedhh.data.dataset import FederatedDataset
from fedhh.errors import ConfigError, DatasetError
from fedhh.experiments import ProgressEvent, ResultStore, Suite, SuiteSettings, get_study
from fedhh.experiments import cluster as cluster_module
from fedhh.experiments.cluster import (
    CONNECT_S,
    GIB,
    ClusterOptions,
    await_workers,
    check_scheduler,
    check_workers,
    code_fingerprint,
    compute_run,
    connect,
    describe,
    execute,
    local_workers,
)

# The scheduler's HTTP routes (health, metrics) listen even without a dashboard, on
# 8787 unless told otherwise: a port of the OS's choice instead.
NO_HTTP = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}


pytestmark = pytest.mark.slow

STUDY = ["experiments", "segmentation", "--seeds", "2"]  # 4 simulated runs
RUNS = 4
UNIFORM = 2  # of them, the uniform runs (cheap)
READY_S = 60.0
# Loaded by the victim worker: its first run tells the test it started, then never ends.
VICTIM = """\
import os
import threading
from pathlib import Path

from fedhh.experiments import runner


def _blocked(*args, **kwargs):
    Path(os.environ["FEDHH_TEST_STARTED"]).touch()
    threading.Event().wait()


runner.simulate = _blocked
"""


def study(tiny_path: Path, out: Path, store: Path, *extra: str) -> list[str]:
    return [*STUDY, "--dataset", str(tiny_path), "--out", str(out), "--store", str(store),
            *extra]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, out, err = cli_kit.run_cli(argv, capsys)
    return code, out + err


@pytest.fixture(scope="module")
def serial(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The study's report and store, computed in this process (no Dask)."""
    base = tmp_path_factory.mktemp("serial")
    assert main(study(tiny_path, base / "out", base / "store", "--quiet")) == 0
    return base


def rows(path: Path) -> list[dict[str, str]]:
    """A CSV's rows without the wall times (the only numbers that depend on where runs ran)."""
    with open(path, newline="") as handle:
        return [{k: v for k, v in row.items() if "wall" not in k} for row in csv.DictReader(handle)]


def timeless(value: object) -> object:
    """A record's values without its timings (keys ``*_s``: seconds measured where it ran)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if not k.endswith("_s")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def assert_same_results(base: Path, other: Path) -> None:
    """The same stored runs (metrics, rounds, output codes) and the same report numbers."""
    keys = sorted(p.stem for p in (base / "store").glob("*.json"))
    assert len(keys) == RUNS
    assert sorted(p.stem for p in (other / "store").glob("*.json")) == keys
    mine, theirs = ResultStore(base / "store"), ResultStore(other / "store")
    for key in keys:
        a, b = mine.load(key), theirs.load(key)
        assert a is not None and b is not None
        assert a.argv == b.argv and a.command == b.command
        assert timeless(a.data) == timeless(b.data), key
        for name, array in a.arrays.items():
            assert np.array_equal(array, b.arrays[name]), (key, name)
    claims = "claims.json"
    assert json.loads((base / "out" / claims).read_text()) == json.loads(
        (other / "out" / claims).read_text())
    for name in ("summary.csv", "runs.csv", "curves.csv"):
        assert rows(base / "out" / "segmentation" / name) == rows(
            other / "out" / "segmentation" / name), name


def test_local_cluster_report_equals_serial(tiny_path: Path, serial: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(study(tiny_path, tmp_path / "out", tmp_path / "store", "--workers",
                              "2"), capsys)
    assert code == 0, out
    assert f"{RUNS} runs ({RUNS} computed, 0 reused)" in out
    assert "experiments: 2 Dask workers, 1 thread(s), 4.0 GiB" in out
    assert_same_results(serial, tmp_path)
    meta = json.loads((tmp_path / "out" / "report.json").read_text())
    assert meta["timings"]["workers"].startswith("2 Dask workers")


def test_local_cluster_is_refused_more_workers_than_the_memory_holds() -> None:
    with pytest.raises(ConfigError, match="--workers 1000 needs 1000 x 4 GiB"):
        local_workers(ClusterOptions(workers=1000))
    assert local_workers(ClusterOptions(workers=0)) >= 1
    with pytest.raises(ConfigError, match="not both"):
        ClusterOptions(workers=2, scheduler="tcp://127.0.0.1:1")


class _Workers:
    """A client as ``check_workers`` reads it: each worker's fedhh and its memory limit."""

    def __init__(self, codes: dict[str, Any], memory_gib: float) -> None:
        self.codes = codes
        self.memory_gib = memory_gib

    def run(self, function: Any, on_error: str = "raise") -> dict[str, tuple[str, str]]:
        assert on_error == "return", "a worker's error would end check_workers unnamed"
        return self.codes

    def scheduler_info(self, n_workers: int) -> dict[str, Any]:
        return {"workers": {a: {"memory_limit": self.memory_gib * GIB} for a in self.codes}}


def test_workers_with_other_fedhh_code_are_refused_by_name(
        caplog: pytest.LogCaptureFixture) -> None:
    mine = ("0.1.0", code_fingerprint())
    other = ("0.1.0", "f" * 64)  # same version number, other code
    with pytest.raises(ConfigError, match=r"1 of 2 Dask workers do not run this client's "
                       r"fedhh .*tcp://10\.0\.0\.2:1 \(fedhh 0\.1\.0, code ffffffffffff\)"):
        check_workers(_Workers({"tcp://10.0.0.1:1": mine, "tcp://10.0.0.2:1": other},
                               8.0))  # type: ignore[arg-type]
    check_workers(_Workers({"tcp://10.0.0.1:1": mine}, 8.0))  # type: ignore[arg-type]
    assert "memory limit" not in caplog.text
    check_workers(_Workers({"tcp://10.0.0.1:1": mine}, 1.0))  # type: ignore[arg-type]
    assert "1 Dask worker has a memory limit under 4 GiB" in caplog.text
    # A worker that joins later is checked by each task it runs.
    with pytest.raises(ConfigError, match="this worker runs other fedhh code"):
        compute_run(None, None, {}, "0" * 64)  # type: ignore[arg-type]


def test_workers_that_cannot_load_fedhh_are_refused_by_name() -> None:
    # What client.run(on_error="return") gives for a worker whose Python lacks fedhh: the
    # function, pickled by reference to fedhh, does not unpickle there.
    lacking = Exception(repr(ModuleNotFoundError("No module named 'fedhh'")))
    mine = ("0.1.0", code_fingerprint())
    with pytest.raises(ConfigError, match=r"^1 of 2 Dask workers do not run this client's "
                       r"fedhh .*: tcp://10\.0\.0\.2:1 \(cannot load fedhh: "
                       r"ModuleNotFoundError\(\"No module named 'fedhh'\"\)\); install the same "
                       r"fedhh, and the same versions of numpy, scipy, dp-accounting, "
                       r"wordfreq, pyspellchecker, on every worker$"):
        check_workers(_Workers({"tcp://10.0.0.1:1": mine, "tcp://10.0.0.2:1": lacking},
                               8.0))  # type: ignore[arg-type]


def test_workers_that_cannot_be_reached_are_passed_over_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    from distributed.comm import CommClosedError

    # What client.run(on_error="return") gives for workers the scheduler cannot reach: one
    # that just died (its connection closed) and one whose machine is gone.
    died = CommClosedError("in <TCP (closed) Scheduler Broadcast local=tcp://10.0.0.9:2>: "
                           "Stream is closed")
    gone = OSError("Timed out trying to connect to tcp://10.0.0.3:1 after 30 s")
    mine = ("0.1.0", code_fingerprint())
    check_workers(_Workers({"tcp://10.0.0.1:1": mine, "tcp://10.0.0.2:1": died,
                            "tcp://10.0.0.3:1": gone}, 8.0))  # type: ignore[arg-type]
    assert ("2 of 3 Dask workers cannot be reached, and are not checked (a dead worker is "
            "given no runs; a worker checks its fedhh for each run): tcp://10.0.0.2:1 "
            "(CommClosedError: in <TCP (closed)") in caplog.text
    assert "tcp://10.0.0.3:1 (OSError: Timed out trying to connect" in caplog.text
    with pytest.raises(ConfigError, match=r"^cannot reach any of the 1 Dask workers: "
                       r"tcp://10\.0\.0\.3:1 \(OSError: Timed out"):
        check_workers(_Workers({"tcp://10.0.0.3:1": gone}, 8.0))  # type: ignore[arg-type]
    # A worker that cannot load fedhh is refused even beside one that cannot be reached.
    lacking = Exception(repr(ModuleNotFoundError("No module named 'fedhh'")))
    with pytest.raises(ConfigError, match=r"^1 of 2 Dask workers do not run .*"
                       r"tcp://10\.0\.0\.4:1 \(cannot load fedhh"):
        check_workers(_Workers({"tcp://10.0.0.1:1": mine, "tcp://10.0.0.3:1": gone,
                                "tcp://10.0.0.4:1": lacking}, 8.0))  # type: ignore[arg-type]


def test_a_worker_that_cannot_read_its_fedhh_is_not_taken_for_one_unreachable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable() -> str:
        raise PermissionError(13, "Permission denied", "fedhh/codec.py")

    monkeypatch.setattr(cluster_module, "code_fingerprint", unreadable)
    with pytest.raises(ImportError, match="cannot read its fedhh package: PermissionError"):
        cluster_module._worker_code()


def tasks(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


def test_interrupt_cancels_the_pending_runs_and_keeps_the_finished(
        tiny_path: Path, tiny: FederatedDataset, tmp_path: Path) -> None:
    suite = Suite(SuiteSettings(str(tiny_path)), ResultStore(tmp_path / "store"), tiny)
    # The uniform run at four seeds (~0.2 s each; before, segmentation at two seeds, whose
    # adaptive runs take ~2 s each of noise over a dimension of 10^7, and one was computing when
    # the cluster closed: its nanny waited 4 s for it).
    plan = [run for run in suite.plan([get_study("segmentation")], range(4))
            if run.label == "uniform s=15"]
    assert len(plan) == RUNS

    def interrupt(event: ProgressEvent) -> None:
        if event.kind == "done":
            raise KeyboardInterrupt

    with connect(ClusterOptions(workers=1)) as client:
        with pytest.raises(KeyboardInterrupt):
            execute(suite, plan, client, interrupt)
        # Cancelled: the scheduler forgets the runs (the cancel travels on its own).
        deadline = time.monotonic() + READY_S
        while client.run_on_scheduler(tasks) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.run_on_scheduler(tasks) == 0
    assert suite.computed == 1
    assert sum(suite.require_store().has(r.key) for r in plan) == 1


def _dask(*argv: str, env: dict[str, str] | None = None, cwd: Path | None = None
          ) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "dask", *argv], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _address(scheduler_file: Path, process: subprocess.Popen[bytes]) -> str:
    """The scheduler's address once it listens (it writes the file then)."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        assert process.poll() is None, "dask scheduler exited"
        try:
            return str(json.loads(scheduler_file.read_text())["address"])
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            time.sleep(0.05)
    raise AssertionError(f"no scheduler file after {READY_S} s")


@dataclass
class Cluster:
    """A `dask scheduler` and its `dask worker` processes (one task at a time each), started
    in a directory of their own (``workers``); ``victim``, if any, never ends a run (it touches
    ``started`` when one starts)."""

    address: str
    scheduler: subprocess.Popen[bytes]
    workers: Path
    victim: subprocess.Popen[bytes] | None
    started: Path


def _worker_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "FEDHH_CACHE": str(tmp_path / "cache")}


def _worker_argv(address: str) -> list[str]:
    return ["worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
            "127.0.0.1"]


def _start_victim(address: str, tmp_path: Path, where: Path, started: Path
                  ) -> subprocess.Popen[bytes]:
    preload = tmp_path / "victim.py"
    preload.write_text(VICTIM)
    return _dask(*_worker_argv(address), "--name", "victim", "--preload", str(preload),
                 env={**_worker_env(tmp_path), "FEDHH_TEST_STARTED": str(started)}, cwd=where)


def _await_worker_count(address: str, count: int) -> None:
    """Wait until the scheduler at ``address`` counts exactly ``count`` workers."""
    from distributed import Client

    with Client(address, timeout="30s") as client:
        deadline = time.monotonic() + READY_S
        while len(client.scheduler_info(n_workers=-1)["workers"]) != count:
            assert time.monotonic() < deadline, f"the scheduler never had {count} workers"
            time.sleep(0.05)


@contextlib.contextmanager
def dask_cluster(tmp_path: Path, *, victim: bool) -> Iterator[Cluster]:
    """A scheduler with a healthy worker, and a victim worker when asked."""
    from distributed import Client

    processes: list[subprocess.Popen[bytes]] = []
    env = _worker_env(tmp_path)
    where = tmp_path / "workers"
    where.mkdir()
    try:
        scheduler_file = tmp_path / "scheduler.json"
        # No work stealing: the runs Dask first gives the victim stay the victim's. (Seen once
        # under load: the victim, slow to load fedhh and the dataset, never started a run, its
        # queued runs stolen by the healthy worker, which did them all; "the victim worker
        # never started a run".)
        processes.append(_dask("scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(scheduler_file),
                               env={**env,
                                    "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}))
        address = _address(scheduler_file, processes[0])
        started = tmp_path / "victim-started"
        blocked = None
        if victim:
            blocked = _start_victim(address, tmp_path, where, started)
            processes.append(blocked)
        processes.append(_dask(*_worker_argv(address), "--name", "healthy", env=env, cwd=where))
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(len(processes) - 1, timeout=READY_S)
        yield Cluster(address, processes[0], where, blocked, started)
    finally:
        for process in reversed(processes):
            _stop(process)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A scheduler with one healthy worker, started once for the module's tests that leave
    both running (each test's victim, ``dask_pair``, joins it and is killed at the test's end).
    (Before, each test started a scheduler and its workers of its own: ~2.5 s of CPU and
    ~1 s of wall to start, as much again to stop.)"""
    with dask_cluster(tmp_path_factory.mktemp("shared"), victim=False) as cluster:
        yield cluster


@pytest.fixture
def dask_pair(shared: Cluster, tmp_path: Path) -> Iterator[Cluster]:
    """The shared scheduler and its healthy worker, with a victim worker of this test's."""
    started = tmp_path / "victim-started"
    victim = _start_victim(shared.address, tmp_path, shared.workers, started)
    try:
        _await_worker_count(shared.address, 2)
        yield Cluster(shared.address, shared.scheduler, shared.workers, victim, started)
    finally:
        victim.kill()  # its run never ends: it would hold a graceful stop for 10 s
        victim.wait()
        _await_worker_count(shared.address, 1)  # the scheduler has let it go


@pytest.fixture
def dask_one(shared: Cluster) -> Cluster:
    """The shared scheduler with its one healthy worker (no victim: dask_pair waits for the
    scheduler to let each go)."""
    return shared


@pytest.fixture
def dask_own_pair(tmp_path: Path) -> Iterator[Cluster]:
    """A scheduler of this test's (it kills it) with a victim worker and a healthy one."""
    with dask_cluster(tmp_path, victim=True) as cluster:
        yield cluster


def _uniform_left(serial: Path, store: Path) -> None:
    """The serial store with its two uniform runs taken out, into ``store``: those are left to
    compute (~0.2 s each), the adaptive ones (~2 s each of noise over a dimension of 10^7)
    stored. (Before, the tests that kill a worker or the scheduler computed all four.)"""
    shutil.copytree(serial / "store", store)
    uniform = sorted(path for path in store.glob("*.json")
                     if json.loads(path.read_text())["spec"].get("segment_bits") == 15)
    assert len(uniform) == UNIFORM, uniform
    for path in uniform:
        path.unlink()
        path.with_suffix(".npz").unlink()


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + READY_S
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"no {path.name} after {READY_S} s"


def test_killed_worker_loses_no_result_and_a_rerun_submits_nothing(
        tiny_path: Path, serial: Path, tmp_path: Path, dask_pair: Cluster,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    address, victim, started = dask_pair.address, dask_pair.victim, dask_pair.started
    assert victim is not None
    killed = threading.Event()

    def kill_the_victim_once_its_run_started() -> None:
        _wait_for(started)
        victim.kill()
        killed.set()

    _uniform_left(serial, tmp_path / "store")  # one run for each worker
    killer = threading.Thread(target=kill_the_victim_once_its_run_started, daemon=True)
    killer.start()
    code, out = run_cli(study(tiny_path, tmp_path / "out", tmp_path / "store", "--scheduler",
                              address), capsys)
    killer.join()
    assert killed.is_set(), "the victim worker never started a run"
    assert victim.wait(timeout=10) == -signal.SIGKILL
    assert code == 0, out
    assert f"{RUNS} runs ({UNIFORM} computed, {RUNS - UNIFORM} reused)" in out
    assert_same_results(serial, tmp_path)

    import distributed

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stored run was submitted")

    monkeypatch.setattr(distributed.Client, "submit", refuse)
    stored = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "store").iterdir()}
    code, out = run_cli(study(tiny_path, tmp_path / "again", tmp_path / "store", "--scheduler",
                              address), capsys)
    assert code == 0, out
    assert f"{RUNS} runs (0 computed, {RUNS} reused)" in out
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "store").iterdir()} == stored


# `fedhh experiments` in a process of its own, its CONNECT_S shortened to argv[1]: what it
# prints is all it prints (pytest's handler does not take its logs), and a hang is a timeout.
CLI = """\
import sys

from fedhh.cli.main import main
from fedhh.experiments import cluster

cluster.CONNECT_S = float(sys.argv[1])
sys.exit(main(sys.argv[2:]))
"""
CLI_S = 30.0  # how long such a process may take


def _fedhh(argv: list[str], connect_s: float = CONNECT_S,
           then: str = "") -> subprocess.Popen[str]:
    """``fedhh argv`` in a process of its own; ``then``: Python run first, after CONNECT_S is
    set (``cluster`` imported)."""
    program = CLI.replace("sys.exit(", f"{then}\nsys.exit(", 1)
    return subprocess.Popen([sys.executable, "-c", program, str(connect_s), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen[str]) -> tuple[str, str]:
    """stdout and stderr of ``process``, killed if it runs past CLI_S."""
    try:
        return process.communicate(timeout=CLI_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


class _Silent(socketserver.BaseRequestHandler):
    """Reads and never answers, as an HTTP server waits for the end of a request's headers
    (Dask's handshake has none)."""

    def handle(self) -> None:
        self.request.recv(1 << 16)
        self.server.closing.wait()  # type: ignore[attr-defined]


class _NotFound(socketserver.BaseRequestHandler):
    """Answers anything with HTTP 404 and keeps the connection open (a proxy's answer)."""

    def handle(self) -> None:
        self.request.recv(1 << 16)
        self.request.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        self.server.closing.wait()  # type: ignore[attr-defined]


@contextlib.contextmanager
def _server(handler: type[socketserver.BaseRequestHandler]) -> Iterator[str]:
    """A TCP server on 127.0.0.1 (a port of the OS's choice) that is no Dask scheduler."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.closing = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.closing.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(("handler", "says"), [
    (_Silent, "is not a Dask scheduler, or not answering: no Dask reply within 2 s"),
    (_NotFound, "is not a Dask scheduler: it answered in another protocol, not with a Dask "
                "message (an HTTP server, such as a dashboard? a scheduler listens on 8786 by "
                "default, its dashboard on 8787)\n"),
])
def test_an_address_that_is_no_dask_scheduler_is_refused_in_one_line(
        handler: type[socketserver.BaseRequestHandler], says: str, tiny_path: Path,
        tmp_path: Path) -> None:
    with _server(handler) as address:
        started = time.monotonic()
        client = _fedhh(study(tiny_path, tmp_path / "out", tmp_path / "store", "--quiet",
                              "--scheduler", address), connect_s=2.0)
        out, err = _finish(client)
    assert client.returncode == 2, err
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"fedhh experiments segmentation: error: {address} {says}"), err
    assert time.monotonic() - started < CLI_S
    assert not (tmp_path / "store").exists() and not (tmp_path / "out").exists()


@contextlib.contextmanager
def _unconnectable() -> Iterator[str]:
    """A listener whose accept queue is full: Linux drops the next connection attempts (SYNs)
    without an answer, as a host that is down or an address that is blackholed."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # room for one connection, never accepted
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            # Queued once the listener reads ready: the next attempt finds the queue full.
            assert select.select([listener], [], [], READY_S)[0]
            yield f"tcp://127.0.0.1:{port}"


def test_an_address_that_never_connects_cannot_be_reached() -> None:
    with _unconnectable() as address, pytest.raises(
            ConfigError, match=rf"^cannot reach the Dask scheduler {re.escape(address)} "
            r"within 0\.5 s: no connection$"):
        check_scheduler(address, 0.5)
    with socket.socket() as bound:  # a port that nothing listens on: refused
        bound.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{bound.getsockname()[1]}"
        with pytest.raises(ConfigError, match=rf"^cannot reach the Dask scheduler "
                           rf"{re.escape(address)} within 0\.5 s: ConnectionRefusedError: "):
            check_scheduler(address, 0.5)


def test_an_address_is_checked_from_inside_a_running_event_loop() -> None:
    from distributed import LocalCluster

    async def caller(address: str) -> None:  # as in Jupyter, or any async caller
        check_scheduler(address, READY_S)

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", dashboard_address=None, scheduler_kwargs=NO_HTTP) as local:
        asyncio.run(caller(local.scheduler_address))
        worker = next(iter(local.workers.values())).address
        with pytest.raises(ConfigError, match=r"is not a Dask scheduler but a Dask Worker$"):
            asyncio.run(caller(worker))


def test_a_lost_scheduler_ends_the_suite_in_one_line_and_a_rerun_resumes(
        tiny_path: Path, serial: Path, tmp_path: Path, dask_own_pair: Cluster,
        capsys: pytest.CaptureFixture[str]) -> None:
    dask_pair = dask_own_pair
    _uniform_left(serial, tmp_path / "store")  # one run for each worker
    client = _fedhh(study(tiny_path, tmp_path / "out", tmp_path / "store", "--quiet",
                          "--scheduler", dask_pair.address))
    try:
        _wait_for(dask_pair.started)  # the victim holds a run: the suite cannot be done
    finally:
        os.killpg(dask_pair.scheduler.pid, signal.SIGKILL)
    out, err = _finish(client)
    assert dask_pair.victim is not None
    dask_pair.victim.kill()  # its run never ends: it would hold a graceful stop for 10 s
    assert client.returncode == 2, err
    assert out == "" and len(err.splitlines()) == 1, err
    stored = len(list((tmp_path / "store").glob("*.json"))) - (RUNS - UNIFORM)
    assert err == ("fedhh experiments segmentation: error: lost the Dask scheduler "
                   f"{dask_pair.address}: "
                   f"{stored} of the {UNIFORM} runs sent finished and are stored; run the same "
                   f"command again to compute the other {UNIFORM - stored}\n")
    code, out = run_cli(study(tiny_path, tmp_path / "out", tmp_path / "store"), capsys)
    assert code == 0, out
    assert f"{RUNS} runs ({UNIFORM - stored} computed, {RUNS - UNIFORM + stored} reused)" in out
    assert_same_results(serial, tmp_path)


def test_a_relative_dataset_path_is_the_clients_and_a_worker_names_itself_in_refusals(
        tiny_path: Path, tiny: FederatedDataset, serial: Path, tmp_path: Path,
        dask_one: Cluster, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker runs in a directory of its own, where "tiny" is nothing. (A dataset named by
    # path or by name has the same store keys: the serial store's adaptive run is reused.)
    _uniform_left(serial, tmp_path / "store")
    monkeypatch.chdir(tiny_path.parent)
    code, out = run_cli(["experiments", "segmentation", "--seeds", "1", "--dataset",
                         tiny_path.name, "--out", str(tmp_path / "out"), "--store",
                         str(tmp_path / "store"), "--scheduler", dask_one.address], capsys)
    assert code == 0, out
    assert "2 runs (1 computed, 1 reused)" in out
    suite = Suite(SuiteSettings(str(tiny_path)), None, tiny)
    run = suite.plan([get_study("segmentation")], [0])[0]
    with connect(ClusterOptions(scheduler=dask_one.address)) as client:
        worker = next(iter(client.scheduler_info(n_workers=-1)["workers"]))
        future = client.submit(compute_run, SuiteSettings("nowhere"), run, suite.identity,
                               code_fingerprint())
        with pytest.raises(DatasetError, match=rf"^on worker {re.escape(worker)}: .*nowhere"):
            future.result()


def test_a_finished_suite_rewrites_the_report_without_a_scheduler(
        tiny_path: Path, serial: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(serial / "store", tmp_path / "store")

    def unreachable(options: ClusterOptions) -> None:
        raise AssertionError("connected to a scheduler with nothing to compute")

    monkeypatch.setattr(cluster_module, "connect", unreachable)
    code, out = run_cli(study(tiny_path, tmp_path / "out", tmp_path / "store", "--scheduler",
                              "tcp://127.0.0.1:1"), capsys)
    assert code == 0, out
    assert f"{RUNS} runs (0 computed, {RUNS} reused)" in out
    assert_same_results(serial, tmp_path)


def test_help_documents_the_cluster_options(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(["experiments", "--help"], capsys)
    assert code == 0
    assert "--workers N" in out and "--scheduler ADDRESS" in out and "4 GiB" in out
    code, out = run_cli(["experiments", "segmentation", "--help"], capsys)
    assert code == 0
    for option in ("--workers [N]", "--scheduler ADDRESS", "--worker-memory GIB"):
        assert option in out


def _group_ended(leader: int) -> bool:
    """Whether every process of the session ``leader`` started has exited, by a deadline."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        try:
            os.killpg(leader, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("whom", ["process", "group"])
def test_sigterm_stops_a_local_cluster_suite_as_ctrl_c_does(
        whom: str, tiny_path: Path, tmp_path: Path) -> None:
    """SIGTERM to fedhh (`kill`, docker stop) or to its process group (`timeout`): the runs are
    cancelled and the LocalCluster closed, exit 130, one line, no worker process left."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(VICTIM)  # every process: the workers' runs block
    started = tmp_path / "started"
    env = {**os.environ, "FEDHH_TEST_STARTED": str(started),
           "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    process = subprocess.Popen(
        [sys.executable, "-c", CLI, str(CONNECT_S),
         *study(tiny_path, tmp_path / "out", tmp_path / "store", "--quiet", "--workers", "1")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True)
    try:
        _wait_for(started)
        if whom == "group":
            os.killpg(process.pid, signal.SIGTERM)
        else:
            process.send_signal(signal.SIGTERM)
        out, err = _finish(process)
        assert _group_ended(process.pid), "a worker process outlived fedhh"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err
    assert (out, err) == ("", "fedhh experiments segmentation: interrupted\n")
    assert not (tmp_path / "out").exists()


def test_sigterm_stops_a_suite_on_a_scheduler_and_cancels_its_runs(
        tiny_path: Path, serial: Path, tmp_path: Path, dask_pair: Cluster) -> None:
    from distributed import Client

    _uniform_left(serial, tmp_path / "store")  # one run for each worker
    process = _fedhh(study(tiny_path, tmp_path / "out", tmp_path / "store", "--quiet",
                           "--scheduler", dask_pair.address))
    try:
        _wait_for(dask_pair.started)  # the victim holds a run: the suite cannot be done
        process.send_signal(signal.SIGTERM)
        out, err = _finish(process)
        assert process.returncode == 130, err
        # The healthy worker's run may have come back before the signal (~0.2 s): stored.
        computed = len(list((tmp_path / "store").glob("*.json"))) - (RUNS - UNIFORM)
        assert computed in (0, 1), computed
        assert (out, err) == ("", (
            f"fedhh experiments segmentation: {RUNS - UNIFORM + computed} of {RUNS} runs are "
            "stored in "
            f"{tmp_path / 'store'} ({computed} computed by this invocation); the same command "
            f"computes the other {UNIFORM - computed} and writes the report\n"
            "fedhh experiments segmentation: interrupted\n"))
        with Client(dask_pair.address, timeout="30s") as client:
            # (by value: the scheduler's process cannot import this module)
            def held() -> int:
                return int(client.run_on_scheduler(
                    lambda dask_scheduler: len(dask_scheduler.tasks)))

            deadline = time.monotonic() + READY_S  # (the cancel travels on its own)
            while held() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert held() == 0
    finally:
        assert dask_pair.victim is not None
        dask_pair.victim.kill()  # its run never ends: it would hold a graceful stop for 10 s


def test_a_scheduler_without_workers_is_waited_on_for_a_bounded_time(
        tiny_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import LocalCluster

    monkeypatch.setattr(cluster_module, "WORKERS_WAIT_S", 0.5)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None, scheduler_kwargs=NO_HTTP) as empty:
        address = empty.scheduler_address
        code, out = run_cli(study(tiny_path, tmp_path / "out", tmp_path / "store", "--quiet",
                                  "--scheduler", address), capsys)
    command = f"dask worker {address} --nthreads 1 --memory-limit 4GiB"
    assert code == 2, out
    assert out == (f"experiments: the Dask scheduler {address} has no workers yet; waiting up "
                   f"to 0.5 s for one (start them with `{command}`)\n"
                   "fedhh experiments segmentation: error: no Dask worker joined the scheduler "
                   f"{address} "
                   f"in 0.5 s: start workers with `{command}` on each machine (fedhh "
                   "installed), then run the same command again\n")


def test_the_wait_for_workers_ends_when_one_joins_and_the_workers_are_told_without_blanks(
        ) -> None:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None,
                      scheduler_kwargs=NO_HTTP, threads_per_worker=1, memory_limit="2GiB"
                      ) as local, \
            Client(local) as client:
        assert describe(client) == "no Dask workers"
        said: list[str] = []

        def say(line: str) -> None:
            said.append(line)
            local.scale(1)

        await_workers(client, local.scheduler_address, READY_S, say)
        assert len(said) == 1 and "has no workers yet" in said[0]
        assert describe(client) == "1 Dask worker, 1 thread(s), 2.0 GiB"
        await_workers(client, local.scheduler_address, READY_S, say)  # one is there: no word
        assert len(said) == 1


def test_a_warning_during_the_progress_bar_starts_a_line_of_its_own(
        tiny_path: Path, serial: Path, tmp_path: Path) -> None:
    from distributed import LocalCluster

    # One cheap run (a uniform one) is left to compute, the others are stored (the serial
    # fixture's, which the module computes once): the warning comes when the workers are
    # checked, the bar drawn. (Before, the 4 runs were computed here: ~8 s on a quiet machine,
    # ~21 s on a busy one, once past CLI_S at a load of 20.)
    shutil.copytree(serial / "store", tmp_path / "store")
    uniform = sorted(path for path in (tmp_path / "store").glob("*.json")
                     if json.loads(path.read_text())["spec"].get("segment_bits") == 15)
    assert len(uniform) == 2, uniform
    uniform[0].unlink()
    uniform[0].with_suffix(".npz").unlink()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", dashboard_address=None,
                      scheduler_kwargs=NO_HTTP, memory_limit="2GiB") as small:
        # (the memory warning is for the default dataset's runs: the tiny file stands for it)
        process = _fedhh(study(tiny_path, tmp_path / "out", tmp_path / "store",
                               "--scheduler", small.scheduler_address),
                         then=f"cluster.DEFAULT_DATASET = {str(tiny_path)!r}")
        out, err = _finish(process)
    assert process.returncode == 0, err
    assert f"{RUNS} runs (1 computed, {RUNS - 1} reused)" in out, out
    # What a terminal shows of each line: the text after its last carriage return.
    shown = [line.rsplit("\r", 1)[-1] for line in err.split("\n")]
    warning = [line for line in shown if "a memory limit under 4 GiB" in line]
    assert len(warning) == 1, err
    # (written as the command's own warnings are, as tqdm's handler copies the CLI's)
    assert warning[0].startswith("fedhh experiments segmentation: warning: 1 Dask worker has "
                                 "a memory limit"), err


def test_a_refused_address_is_told_while_it_is_retried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, a mistyped port (refused) sat silent for the whole of CONNECT_S (30 s).
    monkeypatch.setattr(cluster_module, "REFUSED_SAY_S", 0.0)
    said: list[str] = []
    with socket.socket() as bound:  # a port that nothing listens on: refused
        bound.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{bound.getsockname()[1]}"
        with pytest.raises(ConfigError, match=r"^cannot reach the Dask scheduler "):
            check_scheduler(address, 0.5, said.append)
    assert len(said) == 1, said
    assert said[0].startswith(f"the Dask scheduler {address} does not accept the connection "
                              "(ConnectionRefusedError: ")
    assert "retrying for up to 0.5 s" in said[0] and "Ctrl-C stops" in said[0]
    # An address that connects at once is not told of.
    with socketserver.TCPServer(("127.0.0.1", 0), socketserver.BaseRequestHandler) as server:
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with pytest.raises(ConfigError, match="is not a Dask scheduler"):
                check_scheduler(f"tcp://127.0.0.1:{port}", 5.0, said.append)
        finally:
            server.shutdown()
    assert len(said) == 1


def test_the_memory_warning_is_for_the_default_dataset_only(
        caplog: pytest.LogCaptureFixture) -> None:
    """The 4 GiB a worker is told it may lack is what a run over the 1.6M-user default dataset
    may need: before, it was said whatever the dataset, a 3,000-user file's too."""
    small = _Workers({"tcp://10.0.0.1:1": ("0.1.0", code_fingerprint())}, 1.0)
    check_workers(small, {"/data/users-3000.jsonl"})  # type: ignore[arg-type]
    assert "memory limit" not in caplog.text
    check_workers(small, {"/data/users-3000.jsonl", "synthetic-reddit"})  # type: ignore[arg-type]
    assert "1 Dask worker has a memory limit under 4 GiB, what one run over the 1.6M-user " \
        "default dataset may need" in caplog.text
