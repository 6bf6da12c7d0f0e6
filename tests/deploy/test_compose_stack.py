"""deploy/ for real: the image built offline by a Docker engine, the compose stack started with
its selector and four device replicas on an internal network the test creates, a discovery run
through `fedhh admin` (the compose `admin` service) that reproduces the per-device simulation
exactly (heavy hitters and ledger) with every device served by the selector (enrolling and
asking for its tasks on the selector's framed port) and running its SecAgg+ session on the
aggregator's framed session port the coordinator names, each device replica holding only its own
tokens and identities, a crashed device replica that keeps its identities, a crashed coordinator
whose run resumes with every released round counted once, a second selector replica that takes
the fleet over when the first stops, and `compose down -v` leaving nothing behind.

Needs root (or a running engine), docker.io, docker-compose and mmdebstrap: `python3 bootstrap.py
test` installs them. Deselect with `-m "not docker"`. Timings: docs/testing.md.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import secrets
import string
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerkit import (
    DEPLOY,
    DeployTestError,
    Engine,
    Project,
    base_image,
    build,
    compose_cli,
    context_listing,
    crash,
    health,
    log_lines,
    restarts,
    run,
    wait_until,
    wheelhouse,
)
from google.protobuf.json_format import ParseDict

from fedhh.data.registry import resolve_dataset
from fedhh.rpc.run_config import from_proto
from fedhh.simulation.runner import simulate
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.runs import open_ledger

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PLANTED = {"apple": 60, "berry": 50, "cherr": 40}
USERS = 200
SEED = 11
DEVICES = [f"devices-{i}" for i in range(4)]  # deploy/docker-compose.yml's device replicas
PUBLIC_HOST = "aggregator.fedhh.test"
IMAGE_UID = 10001
HEALTH_TIMEOUT_S = 300
RUN_TIMEOUT_S = 900
RUN_SETTINGS = [
    "--eps-agg", "64", "--delta", "1e-6", "--eps-local", "8", "--rounds", "3",
    "--dim-limit", "16384", "--target-devices", str(USERS), "--min-devices", str(USERS),
    "--codec", "5bit", "--max-bits", "30", "--selection", "uniform",
    "--checkin-ms", "120000", "--stage-ms", "60000",
]
# Every user checks in, so a round's check-in has nobody left to wait for once the pool holds
# all 200: it closes 0.2 s after that, not after the default 1 s quiet spell (a second of each
# round's ~3.7 s at load 3). Not for the run the coordinator crash interrupts, whose round 2
# must still be under way when the test, polling the logs, finds round 1 released.
QUICK_CLOSE = ["--checkin-quiet-ms", "200"]


def planted_dataset(path: Path) -> Path:
    """200 users, each holding one or two random five-letter words and some a planted word."""
    rng = random.Random(5)
    holders = [w for w, count in PLANTED.items() for _ in range(count)]
    holders += [""] * (USERS - len(holders))
    rng.shuffle(holders)
    lines = []
    for held in holders:
        words = [held] if held else []
        words += ["".join(rng.choice(string.ascii_lowercase) for _ in range(5))
                  for _ in range(rng.randint(1, 2))]
        lines.append(" ".join(words))
    path.write_text("\n".join(lines) + "\n")
    return path


# ---- fixtures: engine, image, stack (each torn down even when a test fails) -------------------
@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    docker = Engine(tmp_path_factory.mktemp("engine"))
    try:
        yield docker.start()
    finally:
        docker.close()


@dataclass(frozen=True)
class Image:
    base: str
    tag: str


@pytest.fixture(scope="module")
def image(engine: Engine) -> Iterator[Image]:
    base = base_image()
    wheelhouse()
    tag = f"fedhh-test:{secrets.token_hex(6)}"
    try:
        build(tag, base)
        yield Image(base, tag)
    finally:
        # --no-prune: the image's untagged parents stay in the engine as the next build's
        # cache, the layer with the dependencies' environment (~570 MB, deploy/Dockerfile's
        # "deps" stage copied into the image) among them; only fedhh's own layers (~8 MB) are
        # built again when the sources changed. Pruned, that copy was made again by every
        # session's build (~40 s of its ~55 s).
        run(["docker", "rmi", "--force", "--no-prune", tag], check=False)


@dataclass
class Stack:
    project: Project
    root: Path
    data: Path
    # `fedhh admin results` of the finished runs, by run id (a finished run's results never
    # change: the later tests compare with run "planted" without another `compose run admin`)
    finished: dict[str, Any] = field(default_factory=dict)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("FEDHH_", "COMPOSE_"))}


def write_secrets(root: Path) -> None:
    """`fedhh certs` as the operator runs it: the secrets go to the image's user."""
    owner = ["--owner", f"{IMAGE_UID}:{IMAGE_UID}"] if os.geteuid() == 0 else []
    run([sys.executable, "-m", "fedhh.cli.main", "certs", "--out", str(root / "tls"),
         "--hosts", f"coordinator,selector,aggregator,{PUBLIC_HOST}",
         "--secrets", str(root / "secrets"),
         *owner])
    if not owner:  # a non-root developer with a running engine: throwaway files, world-readable
        for path in [*(root / "tls").iterdir(), *(root / "secrets").iterdir()]:
            if path.name != "ca.key":
                path.chmod(0o644)


def override_file(root: Path, data: Path) -> Path:
    """The test's additions to deploy/docker-compose.yml: an internal network (no route out),
    the planted dataset, and seeded device randomness (test mode) appended to the real command."""
    base = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    override = {
        "services": {name: {"command": [*base["services"][name]["command"], f"--seed={SEED}"],
                            "volumes": [f"{data}:/datasets/users.txt:ro"]}
                     for name in DEVICES},
        "networks": {"default": {"internal": True}},
    }
    path = root / "test-override.yml"
    path.write_text(yaml.safe_dump(override))
    return path


@pytest.fixture(scope="module")
def stack(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("stack")
    write_secrets(root)
    data = planted_dataset(root / "users.txt")
    env_file = root / "test.env"
    env_file.write_text("\n".join(f"{k}={v}" for k, v in {
        "FEDHH_IMAGE": image.tag, "FEDHH_TLS_DIR": root / "tls",
        "FEDHH_SECRETS_DIR": root / "secrets", "FEDHH_DEVICE_DATASET": "/datasets/users.txt",
        "FEDHH_AGGREGATOR_PUBLIC_HOST": PUBLIC_HOST,
        # Every check is a `fedhh health` run inside the container (~0.3 s of CPU at load 2),
        # one per interval after the last ended, for the stack's whole life: at 1 s, ~0.5 of a
        # core for the aggregator, coordinator and selector together. 3 s: a third of that, for
        # a service found healthy ~1 s later on average (the test waits five times).
        "FEDHH_HEALTHCHECK_INTERVAL": "3s", "FEDHH_BIND_ADDRESS": "127.0.0.1",
        # The test runs spend eps_agg 64 (an explicit eps_local 8 among 200 devices).
        "FEDHH_LIFETIME_EPS": "1e9",
    }.items()) + "\n")
    # Neither the caller's FEDHH_*/COMPOSE_* variables nor deploy/.env may leak in.
    project = Project([*compose_cli(), "--env-file", str(env_file)],
                      f"fedhhtest{secrets.token_hex(4)}",
                      [DEPLOY / "docker-compose.yml", override_file(root, data)], clean_env())
    try:
        project.compose("up", "-d", "--no-build", timeout_s=HEALTH_TIMEOUT_S)
        yield Stack(project, root, data)
    finally:
        try:
            project.compose("down", "--volumes", "--remove-orphans", "--timeout", "20",
                            check=False)
        finally:
            leftovers = {kind: run(["docker", kind, "ls", "-q", "--filter",
                                    f"label=com.docker.compose.project={project.name}"]
                                   + (["--all"] if kind == "container" else [])).stdout.split()
                         for kind in ("container", "volume", "network")}
            if any(leftovers.values()):
                raise DeployTestError(f"compose down -v left {leftovers}")


def service_health(stack: Stack, service: str) -> list[str]:
    return [health(c) for c in stack.project.containers(service)]


def wait_healthy(stack: Stack, service: str) -> None:
    wait_until(lambda: service_health(stack, service) == ["healthy"], HEALTH_TIMEOUT_S,
               f"{service} to be healthy", stack.project.logs)


def starts(container: str) -> int:
    """How many times the device process in ``container`` started its devices."""
    return sum(line.get("message") == "device process started" for line in log_lines(container))


IDENTITIES = "/data/devices/devices.json"


def identities(container: str) -> dict[str, Any]:
    """The devices a replica enrolled, by dataset user (its own volume)."""
    return dict(json.loads(run(["docker", "exec", container, "cat", IDENTITIES]).stdout))


@pytest.fixture(scope="module")
def fleet(stack: Stack) -> list[str]:
    """The device containers, devices-0 .. devices-3, once every one has started its
    devices."""
    wait_healthy(stack, "aggregator")
    wait_healthy(stack, "coordinator")
    wait_healthy(stack, "selector")
    containers = [c for name in DEVICES for c in stack.project.containers(name)]
    assert len(containers) == len(DEVICES)
    wait_until(lambda: all(starts(c) for c in containers), HEALTH_TIMEOUT_S,
               "every device replica to start", stack.project.logs)
    return containers


def counter(container: str, service: str, port: int, metric: str, label: str
            ) -> dict[str, float]:
    """The counter ``metric`` of the service in ``container`` so far, by the value of its one
    ``label``: from its metrics port, read inside that container (the test's network is
    internal: nothing is published on the host) over TLS checked for the service's name, so a
    scaled service's replica answers for itself."""
    script = ("import http.client, socket, ssl, sys; "
              "tls = ssl.create_default_context(cafile='/run/secrets/ca.pem'); "
              f"page = http.client.HTTPSConnection({service!r}, {port}, timeout=30); "
              f"page.sock = tls.wrap_socket(socket.create_connection(('127.0.0.1', {port}), 30), "
              f"server_hostname={service!r}); "
              "page.request('GET', '/metrics'); "
              "sys.stdout.write(page.getresponse().read().decode())")
    text = run(["docker", "exec", container, "python", "-c", script]).stdout
    return {m[1]: float(m[2]) for m in re.finditer(
        rf'^{re.escape(metric)}\{{{label}="([^"]+)"\}} (\S+)$', text, re.M)}


def session_opens(stack: Stack) -> dict[str, float]:
    """The aggregator's session streams opened so far, by port ("framed": its framed session
    port; "grpc": the gRPC Session stream)."""
    aggregator, = stack.project.containers("aggregator")
    return counter(aggregator, "aggregator", 9101, "fedhh_aggregator_session_opens_total", "port")


def admin(stack: Stack, *args: str) -> Any:
    return stack.project.admin(*args, timeout_s=RUN_TIMEOUT_S)


def finished_results(stack: Stack, run_id: str) -> Any:
    """`fedhh admin results RUN_ID` of a run that ended (awaited with `fedhh admin wait`), read
    once per stack."""
    if run_id not in stack.finished:
        stack.finished[run_id] = admin(stack, "results", run_id)
    return stack.finished[run_id]


def released(run_: dict[str, Any]) -> list[int]:
    return [r["round"] for r in run_["rounds"] if r["state"] == "released"]


def ledger_rounds(results: dict[str, Any]) -> list[int]:
    return [s["round_index"] for s in results["ledger"]["spends"]]


# ---- tests, in order --------------------------------------------------------------------------
def test_the_compose_cli_accepts_the_file_without_a_project_name_key() -> None:
    """Compose v1 rejects a top-level `name:`; the project name comes from -p or the env."""
    doc = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert "name" not in doc
    done = subprocess.run([*compose_cli(), "-p", "fedhhconfig", "-f",
                           str(DEPLOY / "docker-compose.yml"), "config", "--services"],
                          capture_output=True, text=True, timeout=120, cwd=DEPLOY,
                          stdin=subprocess.DEVNULL, env=clean_env())
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == {"aggregator", "coordinator", "selector", *DEVICES, "admin",
                                        "prometheus", "grafana"}


def test_build_context_holds_only_the_sources(image: Image, tmp_path: Path) -> None:
    listing = context_listing(image.base, f"fedhh-context:{secrets.token_hex(6)}", tmp_path)
    top = {path.split("/")[0] for path in listing}
    assert top == {"pyproject.toml", "README.md", "bootstrap.py", "fedhh", "server",
                   "aggregator", "device", "deploy"}, top
    assert {p for p in listing if p.startswith("deploy/")} - {"deploy/wheelhouse"} == {
        p for p in listing if p.startswith("deploy/wheelhouse/")}
    leaked = [p for p in listing if p.endswith((".key", ".token", ".pyc", "/.env"))
              or "__pycache__" in p or p.startswith((".venv", ".git", "cache"))]
    assert not leaked, leaked


def test_services_are_healthy_and_replicas_host_disjoint_users(
    stack: Stack, fleet: list[str]
) -> None:
    """Replica i hosts the users u with u mod 4 = i (the users of its tokens), and together
    the replicas host every user with data."""
    wait_until(lambda: all(run(["docker", "exec", c, "test", "-s", IDENTITIES],
                               check=False).returncode == 0 for c in fleet),
               HEALTH_TIMEOUT_S, "every replica to enroll", stack.project.logs)
    hosted = [{int(u) for u in identities(c)} for c in fleet]
    for i, users in enumerate(hosted):
        assert users and all(u % len(DEVICES) == i for u in users), (i, sorted(users)[:5])
    with_data = {u for u, line in enumerate(stack.data.read_text().splitlines()) if line}
    assert set().union(*hosted) == with_data
    for container in [*stack.project.containers("coordinator"),
                      *stack.project.containers("selector"), *fleet]:
        assert run(["docker", "exec", container, "id", "-u"]).stdout.strip() == str(IMAGE_UID)


def test_each_service_mounts_only_the_secrets_it_needs(stack: Stack, fleet: list[str]) -> None:
    @functools.cache  # (each service's containers listed and inspected once: compose ps ~1 s)
    def secrets_of(service: str) -> frozenset[str]:
        mounted = set()
        for container in stack.project.containers(service):
            mounts = json.loads(run(["docker", "inspect", "--format", "{{json .Mounts}}",
                                     container]).stdout)
            mounted |= {m["Destination"].removeprefix("/run/secrets/") for m in mounts
                        if m["Destination"].startswith("/run/secrets/")}
        return frozenset(mounted)

    for name in DEVICES:
        assert secrets_of(name) == {"ca.pem", "device-tokens.txt"}
    assert secrets_of("aggregator") == {"ca.pem", "server.pem", "server.key", "control.token",
                                        "coordinator-signing.pem.pub"}
    # (the selectors attach with a token of their own: the aggregator's control token, in
    # their hands, was also the right to attach as a selector)
    assert secrets_of("selector") == secrets_of("aggregator") - {"control.token"} | {
        "selector.token"}
    assert secrets_of("coordinator") == {
        "ca.pem", "server.pem", "server.key", "control.token", "device-tokens.txt",
        "admin.token", "selector.token", "coordinator-signing.pem",
        "coordinator-signing.pem.pub"}
    assert "ca.key" not in set().union(*(secrets_of(s) for s in ("coordinator", "aggregator",
                                                                  "selector")))


def test_a_replica_reads_its_own_tokens_and_no_one_elses(stack: Stack,
                                                         fleet: list[str]) -> None:
    """Issue 28: every replica mounted the whole device-tokens.txt, so each could enroll the
    others' devices. Now a replica sees one tokens file, holding its own users' tokens only,
    and no other token or identity is anywhere it can read."""
    every = (stack.root / "secrets" / "device-tokens.txt").read_text().split()
    for i, container in enumerate(fleet):
        listing = run(["docker", "exec", container, "ls", "/run/secrets"]).stdout.split()
        assert sorted(listing) == ["ca.pem", "device-tokens.txt"]
        mine = run(["docker", "exec", container, "cat", "/run/secrets/device-tokens.txt"]
                   ).stdout.split("\n")
        pairs = [line.split() for line in mine if line]
        assert pairs == [[str(u), every[u]] for u in range(i, len(every), len(DEVICES))]
        others = [t for j, t in enumerate(every) if j % len(DEVICES) != i]
        found = run(["docker", "exec", container, "grep", "-rlF", "-e", others[0], "-e",
                     others[-1], "/data", "/run/secrets", "/tmp"], check=False)
        assert found.returncode == 1 and not found.stdout, found.stdout


def test_discovery_through_fedhh_admin_equals_the_per_device_simulation(
    stack: Stack, fleet: list[str]
) -> None:
    admin(stack, "start", "--run-id", "planted", *RUN_SETTINGS, *QUICK_CLOSE)
    run_ = admin(stack, "wait", "planted")
    results = finished_results(stack, "planted")
    assert run_["state"] == "done", run_.get("error")
    found = [(h["item"], h["estimate"], h["round"]) for h in results.get("heavyHitters", [])]
    assert set(PLANTED) <= {item for item, _, _ in found}
    assert all(r["participants"] == USERS for r in run_["rounds"] if r["state"] == "released")
    # Every member got its task from the selector: the devices ask it, not the coordinator.
    selector, = stack.project.containers("selector")
    delivered = [line["members"] for line in log_lines(selector)
                 if line.get("message") == "tasks delivered"]
    assert delivered.count(USERS) >= len(released(run_)), delivered
    # And they asked for it, and enrolled, on the selector's framed port (--session-listen),
    # which their --coordinator names after its gRPC port (selector:7000=selector:7001): a call
    # a task, each round (and one enrolment per device), as frames rather than gRPC.
    calls = counter(selector, "selector", 9103, "fedhh_framed_calls_total", "method")
    assert calls.get("/fedhh.v1.DeviceService/GetTask", 0) >= USERS * len(released(run_)), calls
    assert calls.get("/fedhh.v1.DeviceService/Enroll", 0) >= USERS, calls
    # Every member ran its session on the aggregator's framed session port (--session-listen),
    # which the coordinator names in the tasks (--aggregator-session-address): none on gRPC.
    opens = session_opens(stack)
    assert opens.get("framed", 0) >= USERS * len(released(run_)), opens
    assert opens.get("grpc", 0) == 0, opens

    cfg = run_["config"]
    dataset = resolve_dataset(str(stack.data), cache_dir=stack.root / "cache")
    # The run's own configuration, its ledger opened as the coordinator opens it (with the
    # completion rounds' allocation), simulated per device with the devices' test seed.
    stored = from_proto(ParseDict(cfg, pb.RunConfig()))
    ledger = open_ledger(stored)
    sim = simulate(dataset, replace(stored, seed=SEED, per_device=True), ledger=ledger)
    assert found == [(h.item, h.estimate, h.round) for h in sim.heavy_hitters]
    finished = [r for r in run_["rounds"] if r["state"] == "released"]
    assert [(r.get("kept", 0), r.get("finished", 0)) for r in finished] == \
        [(r["kept"], r["finished"]) for r in sim.rounds]
    assert sim.ledger is not None
    assert results["ledger"] == json.loads(json.dumps(sim.ledger.to_dict()))


def test_a_crashed_device_replica_comes_back_with_its_identities(
    stack: Stack, fleet: list[str]
) -> None:
    victim = fleet[0]
    before = identities(victim)
    assert before and all(int(u) % len(DEVICES) == 0 for u in before)
    count = restarts(victim)
    crash(victim)
    wait_until(lambda: restarts(victim) > count and starts(victim) == 2,
               HEALTH_TIMEOUT_S, f"{victim} to restart", stack.project.logs)
    assert identities(victim) == before  # same device ids and credentials: nothing re-enrolled


def test_a_run_survives_a_coordinator_crash(stack: Stack, fleet: list[str]) -> None:
    coordinator, = stack.project.containers("coordinator")
    admin(stack, "start", "--run-id", "resume", *RUN_SETTINGS)

    def first_release() -> bool:
        return any(line.get("message") == "round released" and line.get("run_id") == "resume"
                   for line in log_lines(coordinator))

    wait_until(first_release, RUN_TIMEOUT_S, "the first round of run resume",
               stack.project.logs)
    count = restarts(coordinator)
    crash(coordinator)  # round 2 is now checking in or aggregating
    wait_until(lambda: restarts(coordinator) > count, HEALTH_TIMEOUT_S,
               "the restart policy to restart the coordinator", stack.project.logs)
    wait_healthy(stack, "coordinator")
    run_ = admin(stack, "wait", "resume")
    results = admin(stack, "results", "resume")
    assert run_["state"] == "done", run_.get("error")
    assert released(run_) == [1, 2, 3]  # each round released exactly once
    assert ledger_rounds(results) == [0, 1, 2]  # and spent exactly once
    aborted = [r for r in run_["rounds"] if r["state"] != "released"]
    assert all("coordinator stopped" in r.get("reason", "") for r in aborted), aborted
    # Seeded devices draw per (round, user): the resumed run finds what the first one did.
    first = finished_results(stack, "planted")
    assert results.get("heavyHitters") == first.get("heavyHitters")


def test_a_second_selector_serves_the_fleet_when_the_first_stops(
    stack: Stack, fleet: list[str]
) -> None:
    """`--scale selector=2`, then the replica the devices use is stopped: they ask the
    service's name again, reach the other, and a run releases every round through it."""
    first, = stack.project.containers("selector")
    stack.project.compose("up", "-d", "--no-build", "--no-recreate", "--scale", "selector=2",
                          "selector", timeout_s=HEALTH_TIMEOUT_S)
    wait_until(lambda: service_health(stack, "selector") == ["healthy", "healthy"],
               HEALTH_TIMEOUT_S, "two healthy selectors", stack.project.logs)
    second, = set(stack.project.containers("selector")) - {first}
    run(["docker", "stop", "--time", "5", first])  # deliberate: the restart policy leaves it
    admin(stack, "start", "--run-id", "moved", *RUN_SETTINGS, *QUICK_CLOSE)
    run_ = admin(stack, "wait", "moved")
    assert run_["state"] == "done", run_.get("error")
    assert released(run_) == [1, 2, 3]
    delivered = [line["members"] for line in log_lines(second)
                 if line.get("message") == "tasks delivered"]
    assert delivered.count(USERS) >= 3, delivered
    # The same seeded devices: the run finds what the first one did.
    assert admin(stack, "results", "moved").get("heavyHitters") == \
        finished_results(stack, "planted").get("heavyHitters")
