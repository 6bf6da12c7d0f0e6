"""What `fedhh device` and `fedhh selector` check before they act on the network.

A device process checks its local paths before any device enrolls: a --state-dir it could not
keep identities in used up every one-time enrollment token it held (the rerun was refused
UNAUTHENTICATED), no --state-dir kept them in memory only, and a --stats-file naming a folder
failed only at exit. A selector checks its --name as the leader does (one too long was retried
forever) and the leader's tasks against --coordinator-key (the key its devices get at
enrollment; a wrong one ran silently and its devices rejected every task)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from networked_kit import COORDINATOR_FLAGS, refused_port, stop_cleanly, wait_for_line

from fedhh.rpc.credentials import load_or_create_signing_key
from fedhh.rpc.tasks import CohortTasks
from fedhh.rpc.topology import LocalTopology
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.hub import MAX_NAME_BYTES, attach_transcript
from fedhh_coordinator.store import Store

pytestmark = pytest.mark.slow

# A bound for a process that should have ended by itself (before the fixes, the processes
# below ran on: enrolled and waiting for tasks, or retrying the leader).
EXIT_BOUND_S = 120


def fedhh(*args: str) -> list[str]:
    return [sys.executable, "-m", "fedhh.cli.main", *args]


def one_line_error(done: subprocess.CompletedProcess[str], command: str) -> str:
    """The line a failed command ends with, after checking it failed as a refusal does (exit
    2, the reason its last line, no traceback)."""
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "Event loop is closed" not in done.stderr, \
        done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"fedhh {command}: error: "), done.stderr[-2000:]
    return last.removeprefix(f"fedhh {command}: error: ")


# ---- the device process ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTopology]:
    root = tmp_path_factory.mktemp("startup")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as topo:
        topo.start_aggregator()
        topo.start_coordinator(COORDINATOR_FLAGS)
        yield topo


def two_users(tmp_path: Path) -> str:
    data = tmp_path / "users.txt"
    data.write_text("tea coffee\ncoffee\n", encoding="utf-8")
    return str(data)


def run_devices(topo: LocalTopology, name: str, data: str, *extra: str
                ) -> subprocess.CompletedProcess[str]:
    """A device process hosting users 0 and 1 with ``name``'s enrollment tokens."""
    return subprocess.run(
        fedhh("device", "--coordinator", topo.device_addresses(),
              "--ca", str(topo.workdir / "tls" / "ca.pem"), "--dataset", data,
              "--users", "0:2", "--enrollment-tokens-file",
              str(topo.enrollment_tokens(name, data, "0:2")), *extra),
        capture_output=True, text=True, timeout=EXIT_BOUND_S, env=topo.env)


def enroll_with_the_same_tokens(topo: LocalTopology, name: str, data: str) -> None:
    """The tokens were not used: a process with a good --state-dir enrolls with them."""
    topo.start_devices(name, data, "0:2")
    topo.wait_for_devices()  # (raises, with the log's tail, if the process exited)
    stop_cleanly(topo, name)


def test_a_state_dir_the_devices_cannot_use_is_refused_before_any_token_is(
    topology: LocalTopology, tmp_path: Path,
) -> None:
    data = two_users(tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert one_line_error(run_devices(topology, "devices-state", data, "--state-dir",
                                      str(a_file)), "device") == \
        f"--state-dir {a_file} exists and is not a folder"
    assert one_line_error(run_devices(topology, "devices-state", data, "--state-dir",
                                      str(a_file / "state")), "device") == \
        f"--state-dir {a_file / 'state'}: {a_file} is not a folder"
    if Path("/proc/self").is_dir():  # (a path no one can make a folder at, root included)
        assert one_line_error(run_devices(topology, "devices-state", data, "--state-dir",
                                          "/proc/fedhh-state"), "device").startswith(
            "--state-dir /proc/fedhh-state: cannot write in /proc: ")
    # Without a state dir the identities would be kept in memory only: refused, not enrolled.
    assert one_line_error(run_devices(topology, "devices-state", data), "device") == \
        "the following arguments are required: --state-dir"
    assert one_line_error(run_devices(topology, "devices-state", data, "--state-dir", ""),
                          "device").startswith("--state-dir must not be empty")
    enroll_with_the_same_tokens(topology, "devices-state", data)


def test_a_stats_file_that_is_a_folder_is_refused_before_any_token_is(
    topology: LocalTopology, tmp_path: Path,
) -> None:
    data = two_users(tmp_path)
    state = tmp_path / "state"
    assert one_line_error(run_devices(topology, "devices-stats", data, "--state-dir",
                                      str(state), "--stats-file", str(tmp_path)), "device") == \
        f"--stats-file {tmp_path} is a folder; give a file name, e.g. {tmp_path / 'results.json'}"
    missing = tmp_path / "missing" / "stats.json"
    assert one_line_error(run_devices(topology, "devices-stats", data, "--state-dir",
                                      str(state), "--stats-file", str(missing)), "device") == \
        f"--stats-file {missing}: the folder {missing.parent} does not exist"
    enroll_with_the_same_tokens(topology, "devices-stats", data)


def test_a_used_token_names_its_users_and_the_others_enroll_and_are_kept(
    topology: LocalTopology, tmp_path: Path,
) -> None:
    """A tokens file partly used by another --state-dir. Before: the process ended at the
    first refusal ("unknown or already used enrollment token", naming no user), and the
    identities enrolled beside it were not saved, their tokens spent."""
    data = two_users(tmp_path)
    tokens = topology.enrollment_tokens("devices-reused", data, "0:2")
    user_0 = tokens.read_text().splitlines()[0]
    first = tmp_path / "first-tokens"
    first.write_text(user_0 + "\n")
    ready = tmp_path / "first.ready.json"
    log = tmp_path / "first.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            fedhh("device", "--coordinator", topology.device_addresses(),
                  "--ca", str(topology.workdir / "tls" / "ca.pem"), "--dataset", data,
                  "--users", "tokens", "--enrollment-tokens-file", str(first),
                  "--state-dir", str(tmp_path / "first"), "--ready-file", str(ready)),
            stdout=out, stderr=subprocess.STDOUT, env=topology.env)
    try:
        deadline = time.monotonic() + EXIT_BOUND_S
        while not ready.exists():  # (enrolled: the ready file is written after)
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=EXIT_BOUND_S)
    again = tmp_path / "again"
    line = one_line_error(run_devices(topology, "devices-reused", data, "--state-dir",
                                      str(again)), "device")
    assert line.startswith("the coordinator refused the enrollment token of user 0: "
                           "unknown or already used enrollment token. A token enrolls one "
                           "identity once: if this user enrolled before, its identity is in "
                           f"the --state-dir that enrolled it ({again} holds none for it)")
    # User 1 enrolled beside it, and is kept: the next start does not spend its token again.
    assert list(json.loads((again / "devices.json").read_text())) == ["1"]


# ---- the selector ----------------------------------------------------------------------------
class FakeLeader(pb_grpc.SelectorControlServicer):
    """A leader coordinator's selector stream: after the selector's hello, a check-in opens
    and its cohort's tasks, signed with ``key_file``'s key, come in one last message."""

    def __init__(self, key_file: Path, proves: bool = True) -> None:
        key = load_or_create_signing_key(key_file)
        self.key = key if proves else None  # None: a leader from before key proofs
        tasks = CohortTasks(pb.Task(run_id="startup", round=1, eps_local=1.0), key)
        self.messages = [
            pb.LeaderMessage(opened=1),
            pb.LeaderMessage(tasks=pb.SelectorTasks(
                checkin=1, tasks={7: tasks.task(7, 1, b"admission")}, last=True)),
        ]
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_SelectorControlServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Attach(self, request_iterator: Iterator[pb.SelectorBatch],
               context: grpc.ServicerContext) -> Iterator[pb.LeaderMessage]:
        hello = next(request_iterator)
        if self.key is not None:
            yield pb.LeaderMessage(key_proof=self.key.sign(
                attach_transcript(hello.challenge, hello.name)))
        yield from self.messages
        for _ in request_iterator:  # held open until the selector goes
            pass

    def stop(self) -> None:
        self.server.stop(None)


def selector(tmp_path: Path, leader_port: int, key_file: Path, *extra: str) -> list[str]:
    store = tmp_path / "coordinator.sqlite"
    if not store.exists():
        Store(store).close()  # (the coordinator makes its store; a selector only opens it)
    token = tmp_path / "selector.token"
    token.write_text("0123456789abcdef0123456789abcdef")
    return fedhh("selector", "--leader", f"127.0.0.1:{leader_port}", "--insecure",
                 "--listen", "127.0.0.1:0", "--db", str(store), "--coordinator-key",
                 f"{key_file}.pub", "--selector-token-file", str(token), *extra)


@pytest.mark.parametrize("proves", [True, False], ids=["at-attach", "at-first-tasks"])
def test_a_selector_given_another_key_than_the_coordinators_stops_with_its_name(
    tmp_path: Path, proves: bool,
) -> None:
    """The leader proves its key as the stream opens (it signs the hello's challenge): the
    selector stops before it serves a device (before: it served, enrolling devices with the
    wrong key and spending their tokens, until the first round's tasks failed to verify; a
    leader from before key proofs is still caught there)."""
    leader = FakeLeader(tmp_path / "coordinator-signing.pem", proves)
    other = tmp_path / "other-signing.pem"
    load_or_create_signing_key(other)
    ready = tmp_path / "selector.ready.json"
    try:
        done = subprocess.run(selector(tmp_path, leader.port, other, "--ready-file", str(ready)),
                              capture_output=True, text=True, timeout=EXIT_BOUND_S)
    finally:
        leader.stop()
    assert one_line_error(done, "selector") == (
        f"--coordinator-key {other}.pub is not the key the leader signs its tasks with "
        "(give the .pub beside the coordinator's --signing-key)")
    assert ready.exists() is not proves  # (with the proof: never serving)


def test_a_selector_given_the_coordinators_key_hands_its_tasks_out(tmp_path: Path) -> None:
    key_file = tmp_path / "coordinator-signing.pem"
    leader = FakeLeader(key_file)
    log = tmp_path / "selector.log"
    try:
        with open(log, "w") as out:
            process = subprocess.Popen(selector(tmp_path, leader.port, key_file),
                                       stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for_line(log, '"message": "tasks delivered"')
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=EXIT_BOUND_S) == 0, log.read_text()[-2000:]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        leader.stop()


def test_a_selector_name_the_leader_would_refuse_is_refused_at_startup(tmp_path: Path) -> None:
    key_file = tmp_path / "coordinator-signing.pem"
    load_or_create_signing_key(key_file)
    name = "s" * (MAX_NAME_BYTES + 1)
    with refused_port() as port:  # (the selector asks the leader's health before the name)
        done = subprocess.run(selector(tmp_path, port, key_file, "--name", name),
                              capture_output=True, text=True, timeout=EXIT_BOUND_S)
    assert one_line_error(done, "selector") == (
        f"--name must be 1 to {MAX_NAME_BYTES} printable bytes, got {MAX_NAME_BYTES + 1} bytes")
    with refused_port() as port:
        done = subprocess.run(selector(tmp_path, port, key_file, "--name", "é" * 33),
                              capture_output=True, text=True, timeout=EXIT_BOUND_S)
    assert one_line_error(done, "selector") == (
        f"--name must be 1 to {MAX_NAME_BYTES} printable bytes, got 66 bytes")
