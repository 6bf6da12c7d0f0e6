"""The load test: the real services with many devices across several processes.

Builds a population of N devices (each holding three words of a 64-word vocabulary, so a round
has real heavy hitters), starts the aggregator, the coordinator and K device processes over TLS
on 127.0.0.1, runs R rounds of dimension D with dropout rate p injected at random stages, and
reports: the round wall times (check-in, then secure aggregation through release), the latency
percentiles of every protocol call as devices see them, the bytes each device sends, and each
service's CPU time and peak memory (from /proc).

Sharded rounds (``shards`` > 1 or ``workers`` > 1): W worker aggregators behind the combiner,
each round split into S shards of N / S devices (``RunConfig.shard_size``), placed on the
workers in turn; n_min then applies to each shard (docs/scaling.md).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.config import RunConfig
from fedhh.errors import ConfigError, StateError
from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.run_config import to_proto
from fedhh.rpc.topology import LocalTopology
from fedhh.server.segment import floor_log2
from fedhh.v1 import coordinator_pb2 as pb

VOCABULARY = 64
MAX_ATTEMPTS = 2  # of each round
# How long a device process may take to stop and write its stats file: one that hosts tens of
# thousands of devices on a loaded host ends its sessions for longer than LocalTopology's
# 15 s grace, after which it would be killed with its figures unwritten.
STATS_GRACE_S = 300.0
WORD_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class LoadSpec:
    devices: int
    dim: int
    dropout: float
    rounds: int = 1
    processes: int | None = None  # device processes; None: one per core
    # Stage window (None: 30 s + 10 ms per device) and the aggregator's --quiet-close-ms (None:
    # 250 ms + 1.2 ms per device; 0: off). These defaults let the live devices of a busy 2-core
    # machine finish each stage (1000 devices need ~3 s for the heaviest, 10,000 about 45 s)
    # and do not cut a device merely behind the others (a 1 s quiet spell once cut 12% of
    # 10,000 devices that were still working; at 50,000 devices, whose tasks now arrive within
    # a second, 15 s cut 3,637, and a shard then waited for its deadline, since closing would
    # have aborted it: 60 s cut 123).
    stage_ms: int | None = None
    quiet_close_ms: int | None = None
    checkin_ms: int = 120_000
    # Per-stage windows (advertise, share keys, masked input, consistency, unmask); 0: stage_ms.
    windows: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    seed: int | None = None  # test mode: seeded device randomness and dropout draws
    eps_local: float = 4.0
    shards: int = 1  # shards per round (> 1, or workers > 1: a combiner and its workers)
    workers: int = 1
    # The aggregators' --quiet-close-tail (None: their default): silence closes a stage only
    # while at most four times this share of its devices is missing.
    quiet_close_tail: float | None = None
    coordinators: int = 1  # device-facing processes: > 1 starts that many selectors

    @property
    def sharded(self) -> bool:
        return self.shards > 1 or self.workers > 1

    @property
    def rounds_per_worker(self) -> int:
        """What a worker is let hold at once (its ``--max-rounds``): an attempt's shards on it,
        and as many again for the next attempt's while the last one's are not yet fetched. At
        its default, 16, a round of 40 shards on 2 workers was refused before any device ran."""
        return max(16, 2 * math.ceil(self.shards / self.workers))

    def aggregator_flags(self) -> list[str]:
        """The options the load test gives its aggregator or workers."""
        flags = ["--metrics-port", "0", "--quiet-close-ms", str(self.quiet_close_ms)]
        if self.quiet_close_tail is not None:
            flags += ["--quiet-close-tail", str(self.quiet_close_tail)]
        return [*flags, *self._max_round_flags(), "--max-rounds", str(self.rounds_per_worker)]

    def combiner_flags(self) -> list[str]:
        """The options the load test gives its combiner: its workers' --max-round-seconds,
        since it refuses a shard config whose last deadline is further ahead as they do (at its
        default, 3600 s, it refused the shards of a round whose stage_ms is above 720 s: 69,000
        devices at the default stage_ms)."""
        return ["--metrics-port", "0", *self._max_round_flags()]

    def _max_round_flags(self) -> list[str]:
        # A round's last deadline is five stages ahead; an aggregator or combiner refuses a
        # round whose last deadline is further ahead than this.
        return ["--max-round-seconds", str(5 * int(self.stage_ms or 0) / 1000 + 600)]

    @property
    def cohort(self) -> int:
        """The devices n_min refers to: a shard's when sharded, else the round's."""
        return self.devices // self.shards

    def __post_init__(self) -> None:
        if self.stage_ms is None:
            object.__setattr__(self, "stage_ms", 30_000 + 10 * self.devices)
        if self.quiet_close_ms is None:
            object.__setattr__(self, "quiet_close_ms", 250 + (12 * self.devices) // 10)


def population(path: Path, devices: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    words = ["".join(rng.choice(WORD_LETTERS) for _ in range(rng.randint(3, 8)))
             for _ in range(VOCABULARY)]
    weights = [1 / (i + 1) for i in range(VOCABULARY)]
    lines = [" ".join(rng.choices(words, weights, k=3)) for _ in range(devices)]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_load(spec: LoadSpec, workdir: Path | None = None) -> dict[str, Any]:
    if spec.dim < 2 or spec.dim & (spec.dim - 1):
        raise ConfigError(f"--dim must be a power of two >= 2, got {spec.dim}")
    if not 0 <= spec.dropout < 1:
        raise ConfigError(f"--drop-rate must be in [0, 1), got {spec.dropout}")
    if spec.shards < 1 or spec.workers < 1:
        raise ConfigError(f"--shards and --workers must be >= 1, got {spec.shards} and "
                          f"{spec.workers}")
    if spec.coordinators < 1:
        raise ConfigError(f"--coordinators must be >= 1, got {spec.coordinators}")
    if spec.cohort < 3:
        raise ConfigError(f"{spec.devices} devices make shards of {spec.cohort}: fewer than 3")
    bits = floor_log2(spec.dim)
    max_bits = min(bits * spec.rounds, 63)
    with LocalTopology(workdir) as topo:
        data = population(topo.workdir / "load.txt", spec.devices)
        aggregator_flags = spec.aggregator_flags()
        if spec.sharded:
            topo.start_workers(spec.workers, aggregator_flags)
            topo.start_combiner(spec.combiner_flags())
        else:
            topo.start_aggregator(aggregator_flags)
        # The load test's run is charged eps_agg 1e6 (its local epsilon is set, not solved):
        # far above a device's lifetime budget, which is not what it measures. Enrollment is
        # not what it measures either: tens of thousands of devices enroll at start.
        enrolment = ["--enroll-rate", "5000", "--enroll-burst", "100000"]
        topo.start_coordinator(["--metrics-port", "0", "--lifetime-eps", "1e9", *enrolment])
        if spec.coordinators > 1:
            for i in range(spec.coordinators):
                topo.start_selector(f"selector-{i}", ["--metrics-port", "0", *enrolment])
        processes = max(1, min(spec.processes or os.cpu_count() or 1, spec.devices))
        per = math.ceil(spec.devices / processes)
        min_devices = max(3, math.floor(spec.cohort * (1 - spec.dropout) * 0.8))
        extra = ["--min-cohort", str(min_devices)]
        if spec.dropout:
            extra += ["--drop-rate", str(spec.dropout), "--drop-stage", "random"]
        if spec.seed is not None:
            extra += ["--seed", str(spec.seed)]
        started = time.monotonic()
        for i in range(processes):
            lo, hi = i * per, min((i + 1) * per, spec.devices)
            topo.start_devices(f"devices-{i}", str(data), f"{lo}:{hi}", extra, first_selector=i)
        # The round starts once every device process is up and enrolled, so check-in
        # measures a round, not process start-up.
        topo.wait_for_devices()
        before = {name: _usage(service.pid) for name, service in topo.services.items()}
        sampler = CpuSampler({name: service.pid for name, service in topo.services.items()})
        sampler.start()
        advertise, share, masked, consistency, unmask = (ms or None for ms in spec.windows)
        config = to_proto(RunConfig(
            eps_agg=1e6, delta=1e-6, eps_local=spec.eps_local, rounds=spec.rounds,
            dim_limit=spec.dim, target_devices=spec.devices, min_devices=min_devices,
            codec="5bit", max_bits=max_bits, checkin_ms=spec.checkin_ms,
            completion_rounds=0,  # a load test runs exactly the rounds it is asked for
            # The whole fleet is the target: drawing the cohort from a pool of everyone is the
            # same uniform draw, and check-in closes when the last device is in instead of after
            # a quiet spell that waits for devices that do not exist.
            oversubscription=1.0,
            stage_ms=int(spec.stage_ms or 0), expected_dropout=max(spec.dropout, 0.05),
            max_attempts=MAX_ATTEMPTS, advertise_ms=advertise, share_keys_ms=share,
            masked_input_ms=masked, consistency_ms=consistency, unmask_ms=unmask,
            shard_size=spec.cohort if spec.sharded else None,
        ))
        with AdminClient(topo.address("coordinator"), topo.token("admin"),
                         topo.workdir / "tls" / "ca.pem") as admin:
            admin.start_run(config, run_id="load")
            # Every attempt may use its whole check-in and all five stage windows.
            attempt_s = (spec.checkin_ms + 5 * int(spec.stage_ms or 0)) / 1000
            run = _wait(admin, 600 + spec.rounds * MAX_ATTEMPTS * attempt_s)
        wall = time.monotonic() - started
        sampler.stop()
        usage = {name: _usage(service.pid) for name, service in topo.services.items()}
        for name, u in usage.items():
            u["run_cpu_s"] = u["cpu_s"] - before.get(name, {}).get("cpu_s", 0.0)
        for i in range(processes):
            topo.stop(f"devices-{i}", grace_s=STATS_GRACE_S)
        topo.close()
        stats = [_device_stats(topo.workdir, i) for i in range(processes)]
        logs = [topo.services[name].log for name in topo.services
                if name == "aggregator" or name.startswith("worker-")]
        stages = stage_profile(logs, sampler.samples)
        return _report(spec, run, wall, usage, stats, stages)


def _device_stats(workdir: Path, process: int) -> dict[str, Any]:
    """What device process ``process`` wrote as it stopped; a clear error if it wrote nothing
    (it died, or did not stop within ``STATS_GRACE_S``: its log says which)."""
    path = workdir / f"devices-{process}.stats.json"
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as error:
        raise StateError(f"device process {process} left no figures ({path}: "
                          f"{getattr(error, 'strerror', None) or error}); see "
                          f"{workdir / f'devices-{process}.log'}") from None


def _wait(admin: AdminClient, timeout_s: float) -> pb.Run:
    """The load run once it ends; a coordinator too busy (tens of thousands of devices
    checking in on a starved machine) to answer one status call in time is asked again."""
    import grpc

    until = time.monotonic() + timeout_s
    while True:
        try:
            return admin.wait("load", max(until - time.monotonic(), 1.0))
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED or time.monotonic() > until:
                raise


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _clock_ticks()


def _usage(pid: int) -> dict[str, float]:
    """CPU seconds and peak resident memory (MiB) of a live process."""
    peak_kib = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak_kib = int(line.split()[1])
    return {"cpu_s": _cpu_seconds(pid), "peak_mib": peak_kib / 1024}


def _clock_ticks() -> int:
    import os

    return int(os.sysconf("SC_CLK_TCK"))


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    array = np.array(values) * 1000
    return {f"p{q}": float(np.percentile(array, q)) for q in (50, 90, 99)} | {
        "max": float(array.max()), "count": int(array.size)}


class CpuSampler(threading.Thread):
    """Every ``period_s``: (Unix time, {service: CPU seconds so far}) of the given processes."""

    def __init__(self, pids: dict[str, int], period_s: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.period_s = period_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            cpu = {}
            for name, pid in self.pids.items():
                with contextlib.suppress(OSError):
                    cpu[name] = _cpu_seconds(pid)
            self.samples.append((time.time(), cpu))
            self._done.wait(self.period_s)

    def stop(self) -> None:
        self._done.set()
        self.join()


def stage_profile(aggregator_logs: list[Path], samples: list[tuple[float, dict[str, float]]]
                  ) -> list[dict[str, Any]]:
    """Where a round's time went: from each round's (or shard's) opening at its aggregator to
    each stage's close (the structured logs), the wall time, the devices accepted, whether the
    stage closed early, and the CPU seconds each service (all aggregator processes together,
    all device processes together) used meanwhile."""
    by_round: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    for log in aggregator_logs:
        for line in log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if entry.get("message") in ("round opened", "stage closed"):
                    at = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
                    by_round.setdefault(str(entry.get("round_id")), []).append((at, entry))

    def cpu_at(t: float) -> dict[str, float]:
        before = [cpu for at, cpu in samples if at <= t]
        return before[-1] if before else (samples[0][1] if samples else {})

    def grouped(cpu: dict[str, float]) -> dict[str, float]:
        return {"aggregator": sum(v for k, v in cpu.items()
                                  if k == "aggregator" or k.startswith("worker-")),
                "combiner": cpu.get("combiner", 0.0),
                "coordinator": cpu.get("coordinator", 0.0),
                "selectors": sum(v for k, v in cpu.items() if k.startswith("selector-")),
                "devices": sum(v for k, v in cpu.items() if k.startswith("dev"))}

    stages = []
    pairs = [pair for events in by_round.values() for pair in itertools.pairwise(events)]
    for (t0, _), (t1, entry) in sorted(pairs, key=lambda pair: pair[1][0]):
        if entry["message"] != "stage closed":
            continue
        a, b = grouped(cpu_at(t0)), grouped(cpu_at(t1))
        stages.append({"round_id": entry.get("round_id"), "stage": entry["stage"],
                       "seconds": t1 - t0, "accepted": entry.get("accepted"),
                       "early": entry.get("early"),
                       "cpu_s": {k: b[k] - a[k] for k in b}})
    return stages


def _report(spec: LoadSpec, run: pb.Run, wall: float, usage: dict[str, dict[str, float]],
            stats: list[dict[str, Any]], stages: list[dict[str, Any]]) -> dict[str, Any]:
    rpc: dict[str, list[float]] = {}
    sent: dict[str, int] = {}
    for s in stats:
        for name, values in s["rpc_seconds"].items():
            rpc.setdefault(name, []).extend(values)
        for name, value in s["rpc_bytes_sent"].items():
            sent[name] = sent.get(name, 0) + value
    tasks = sum(s["tasks"] for s in stats)
    aggregator_bytes = sum(v for k, v in sent.items() if k != "GetTask" and k != "Enroll")
    devices_usage = {"cpu_s": sum(u["cpu_s"] for n, u in usage.items() if n.startswith("dev")),
                     "run_cpu_s": sum(u["run_cpu_s"] for n, u in usage.items()
                                      if n.startswith("dev")),
                     "peak_mib": max((u["peak_mib"] for n, u in usage.items()
                                      if n.startswith("dev")), default=0.0)}
    return {
        "spec": spec.__dict__,
        "state": run.state,
        "error": run.error,
        "wall_s": wall,
        # contributors: a released round's reports in its total; participants: its charge
        # (n_min for a sharded round with a shard lost after unmasking). Before, only the
        # charge, printed as the contributors. (fedhh.cli.narrator.contributors: a coordinator
        # before the field sends 0, its charge then.)
        "rounds": [{"round": r.round, "attempt": r.attempt, "state": r.state,
                    "contributors": (r.contributors or r.participants
                                     if r.state == "released" else r.contributors),
                    "participants": r.participants, "domain_size": r.domain_size,
                    "seconds": r.seconds,
                    "reason": r.reason} for r in run.rounds],
        "devices": {"tasks": tasks, "completed": sum(s["completed"] for s in stats),
                    "dropped": sum(s["dropped"] for s in stats),
                    "late": sum(s["late"] for s in stats),
                    "failed": sum(s["failed"] for s in stats)},
        "rpc_latency_ms": {name: _percentiles(v) for name, v in sorted(rpc.items())},
        "stages": stages,
        "bytes_per_device_round": aggregator_bytes / max(tasks, 1),
        "usage": {**{name: u for name, u in usage.items()
                     if name in ("aggregator", "combiner") or name.startswith("worker-")},
                  "coordinator": usage.get("coordinator", {}),
                  **{name: u for name, u in usage.items() if name.startswith("selector-")},
                  "devices (all processes)": devices_usage},
    }


def render(report: dict[str, Any]) -> str:
    spec = report["spec"]
    sharding = (f", {spec['shards']} shard(s) on {spec['workers']} worker(s)"
                if spec.get("shards", 1) > 1 or spec.get("workers", 1) > 1 else "")
    if spec.get("coordinators", 1) > 1:
        sharding += f", {spec['coordinators']} selectors"
    lines = [f"load test: {spec['devices']} devices, D = {spec['dim']}, "
             f"dropout {spec['dropout']}{sharding}, {spec['rounds']} round(s): "
             f"{report['state']} {report['error']}".rstrip()]
    for r in report["rounds"]:
        devices = f"{r['participants']} contributors"
        if r["state"] == "released" and r["contributors"] != r["participants"]:
            devices = f"{r['contributors']} contributors (charged at {r['participants']})"
        lines.append(f"  round {r['round']}.{r['attempt']}: {r['state']}, "
                     f"{devices}, {r['seconds']:.2f} s wall "
                     f"(check-in + secure aggregation + server) {r['reason']}".rstrip())
    d = report["devices"]
    lines.append(f"  devices: {d['tasks']} tasks, {d['completed']} completed, "
                 f"{d['dropped']} dropped (injected), {d['late']} late (a stage closed "
                 f"before their message, as after a dropout), {d['failed']} failed")
    lines.append(f"  bytes sent per device per round: {report['bytes_per_device_round']:,.0f}")
    if report["stages"]:
        lines.append("  stages at the aggregator(s) (wall s; CPU s of all aggregators / "
                     "coordinator / all devices, meanwhile):")
    width = max((len(st["stage"]) for st in report["stages"]), default=0)
    for st in report["stages"]:
        cpu = st["cpu_s"]
        how = "early" if st["early"] else "at its deadline"
        lines.append(f"    {st['round_id']} {st['stage']:{width}s} {st['seconds']:6.2f} s, "
                     f"{st['accepted']} accepted, closed {how}; CPU {cpu['aggregator']:.1f} / "
                     f"{cpu['coordinator']:.1f} / {cpu['devices']:.1f}")
    lines.append("  call latency as devices see it (ms):")
    for name, p in report["rpc_latency_ms"].items():
        if p:
            lines.append(f"    {name:18s} p50 {p['p50']:8.1f}  p90 {p['p90']:8.1f}  "
                         f"p99 {p['p99']:8.1f}  max {p['max']:8.1f}  (n={p['count']})")
    for name, u in report["usage"].items():
        if u:
            lines.append(f"  {name}: CPU {u['cpu_s']:.1f} s ({u['run_cpu_s']:.1f} s during the "
                         f"run), peak memory {u['peak_mib']:.0f} MiB")
    lines.append(f"  total wall time incl. start-up and enrolment: {report['wall_s']:.1f} s")
    return "\n".join(lines)
