"""An in-memory driver: a whole round among n simulated devices and one server, in one process.

Used by the tests and the benchmark; the gRPC service replaces the driver but not the state
machines. Every key, mask and nonce comes from a seeded :class:`DeterministicRandom`, so a round
is reproducible; this module is for simulation only.

* :func:`make_cohort` builds a signed config, a coordinator key and (with device_auth) each
  device's identity key, the cohort's identity tree and each device's admission (its proof).
* :class:`DropoutPlan` says which devices fall silent before sending their message of a stage.
* :class:`SimulatedRound` runs the round stage by stage (tests may stop between stages and inject
  messages); hooks may drop or replace any message in flight, e.g. to play a lying server.
* :func:`run_round` runs it to the end and returns a :class:`SimulatedOutcome`, with the plaintext
  sum over the devices whose masked inputs the server accepted and per-device and per-stage
  timings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.secagg.config import (
    Admission,
    IdentityTree,
    RoundConfig,
    SignedConfig,
    StageDeadlines,
    issue_admission,
    session_id_of,
    sign_config,
)
from fedhh.secagg.device import DevicePolicy, PublicChecks, RoundKeys, SecAggDevice
from fedhh.secagg.errors import ProtocolViolation, SecAggAbort, Violation
from fedhh.secagg.messages import (
    AggregateResult,
    ConsistencyRequest,
    DeviceMessage,
    MaskedInputRequest,
    ServerMessage,
    ShareKeysRequest,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
)
from fedhh.secagg.params import modulus_bits_for
from fedhh.secagg.prg import MaskGenerator
from fedhh.secagg.primitives import DeterministicRandom, ed25519_from_seed, ed25519_public_bytes
from fedhh.secagg.server import SecAggServer

__all__ = ["Cohort", "DropoutPlan", "SimulatedOutcome", "SimulatedRound", "make_cohort",
           "run_round"]

ToDevice = Callable[[Stage, int, ServerMessage], ServerMessage | None]
ToServer = Callable[[Stage, int, DeviceMessage], DeviceMessage | None]
_STAGES = (Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK,
           Stage.UNMASK)


@dataclass(frozen=True)
class Cohort:
    """Everything the coordinator sets up for a simulated round."""

    config: RoundConfig
    signed: SignedConfig
    coordinator_key: Ed25519PrivateKey
    identity_keys: Mapping[int, Ed25519PrivateKey]
    admissions: Mapping[int, Admission]
    rand: DeterministicRandom
    round_keys: Mapping[int, RoundKeys] = field(default_factory=dict)  # committed (device_auth)

    @property
    def coordinator_public(self) -> bytes:
        return ed25519_public_bytes(self.coordinator_key)

    @property
    def session_id(self) -> bytes:
        return session_id_of(self.config)

    def device(self, device_id: int, *, masks: MaskGenerator | None = None,
               policy: DevicePolicy | None = None,
               checks: PublicChecks | None = None) -> SecAggDevice:
        return SecAggDevice(self.signed, self.coordinator_public, device_id,
                            identity_key=self.identity_keys.get(device_id),
                            admission=self.admissions.get(device_id),
                            round_keys=self.round_keys.get(device_id), policy=policy,
                            rand=self.rand.spawn(b"device" + device_id.to_bytes(4, "big")),
                            masks=masks, checks=checks)

    def server(self, *, masks: MaskGenerator | None = None) -> SecAggServer:
        return SecAggServer(self.signed, self.coordinator_public, masks=masks)


def make_cohort(n: int, dimension: int, k: int, t: int, *, n_min: int | None = None,
                modulus_bits: int | None = None, device_auth: bool = False,
                consistency_check: bool = False, seed: int | bytes = 0,
                round_id: bytes = b"round-1") -> Cohort:
    """A deterministic cohort of devices 1..n with a coordinator-signed config."""
    rand = DeterministicRandom(seed if isinstance(seed, bytes) else str(seed).encode())
    coordinator_key = ed25519_from_seed(rand.spawn(b"coordinator")(32))
    graph_seed = rand.spawn(b"graph" + round_id)(32)
    identity_keys: dict[int, Ed25519PrivateKey] = {}
    admissions: dict[int, Admission] = {}
    round_keys: dict[int, RoundKeys] = {}
    root = None
    if device_auth:
        for u in range(1, n + 1):
            tag = u.to_bytes(4, "big")
            identity_keys[u] = ed25519_from_seed(rand.spawn(b"identity" + tag)(32))
            round_keys[u] = RoundKeys.generate(rand.spawn(b"round-keys" + round_id + tag))
        tree = IdentityTree(round_id, graph_seed,
                            [(ed25519_public_bytes(identity_keys[u]), *round_keys[u].public)
                             for u in range(1, n + 1)])
        admissions = {u: issue_admission(tree, u) for u in range(1, n + 1)}
        root = tree.root
    config = RoundConfig(
        round_id=round_id, num_devices=n, dimension=dimension,
        modulus_bits=modulus_bits if modulus_bits is not None else modulus_bits_for(n),
        n_min=n_min if n_min is not None else 1, k=k, t=t, graph_seed=graph_seed,
        deadlines=StageDeadlines(0, 0, 0, 0, 0),
        device_auth=device_auth, consistency_check=consistency_check, identity_root=root)
    return Cohort(config, sign_config(config, coordinator_key), coordinator_key, identity_keys,
                  admissions, rand.spawn(b"run" + round_id), round_keys)


@dataclass(frozen=True)
class DropoutPlan:
    """Per stage, the devices that fall silent before sending that stage's message."""

    by_stage: Mapping[Stage, frozenset[int]] = field(default_factory=dict)

    def before(self, stage: Stage) -> frozenset[int]:
        return self.by_stage.get(stage, frozenset())

    @classmethod
    def at(cls, stage: Stage, ids: set[int] | frozenset[int] | list[int]) -> DropoutPlan:
        return cls({stage: frozenset(ids)})

    @classmethod
    def random(cls, n: int, rate: float, rng: np.random.Generator,
               stages: tuple[Stage, ...] = _STAGES) -> DropoutPlan:
        """Each device drops with probability ``rate``, at a stage drawn uniformly from
        ``stages``."""
        drops = rng.random(n) < rate
        where = rng.integers(0, len(stages), size=n)
        plan: dict[Stage, set[int]] = {s: set() for s in stages}
        for i in np.flatnonzero(drops):
            plan[stages[int(where[i])]].add(int(i) + 1)
        return cls({s: frozenset(ids) for s, ids in plan.items()})


@dataclass
class SimulatedOutcome:
    """What happened in a simulated round."""

    result: AggregateResult | None
    abort: SecAggAbort | None
    expected_total: np.ndarray  # plaintext sum over the accepted masked inputs (int64)
    contributors: frozenset[int]
    device_aborts: dict[int, SecAggAbort]
    rejected: list[tuple[Stage, int, Violation]]
    revealed: dict[int, set[str]]  # owner -> the share types honest devices sent ("b", "s")
    device_seconds: dict[int, float]  # wall time of each device's calls
    server_seconds: dict[str, float]  # wall time, keys "<stage>.handle" and "<stage>.close"
    device_cpu_seconds: dict[int, float]  # CPU time of this thread (robust to a busy machine)
    server_cpu_seconds: dict[str, float]


class SimulatedRound:
    """Runs one simulated round stage by stage."""

    def __init__(self, cohort: Cohort, reports: Mapping[int, np.ndarray],
                 dropouts: DropoutPlan | None = None, *, to_device: ToDevice | None = None,
                 to_server: ToServer | None = None, masks: MaskGenerator | None = None,
                 policy: DevicePolicy | None = None) -> None:
        cfg = cohort.config
        self.cohort = cohort
        self.masks = masks or MaskGenerator(cfg.dimension, cfg.modulus_bits)
        self.server = cohort.server(masks=self.masks)
        self.devices = {u: cohort.device(u, masks=self.masks, policy=policy)
                        for u in range(1, cfg.num_devices + 1)}
        self.reports = {u: np.asarray(reports.get(u, np.zeros(0, np.int64)), dtype=np.int64)
                        for u in self.devices}
        self.dropouts = dropouts or DropoutPlan()
        self.to_device, self.to_server = to_device, to_server
        self.pending: dict[int, ServerMessage] = {}
        self.gone: set[int] = set()
        self.outcome = SimulatedOutcome(None, None, np.zeros(cfg.dimension, np.int64), frozenset(),
                                    {}, [], {}, dict.fromkeys(self.devices, 0.0), {},
                                    dict.fromkeys(self.devices, 0.0), {})

    @property
    def finished(self) -> bool:
        return self.outcome.abort is not None or self.server.stage == Stage.DONE

    def _device_turn(self, stage: Stage, u: int, request: ServerMessage | None) -> None:
        device = self.devices[u]
        if request is not None and self.to_device is not None:
            request = self.to_device(stage, u, request)
            if request is None:
                return
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            message: DeviceMessage
            if stage == Stage.ADVERTISE_KEYS:
                message = device.advertise_keys()
            elif isinstance(request, ShareKeysRequest):
                message = device.share_keys(request)
            elif isinstance(request, MaskedInputRequest):
                message = device.masked_input(request, self.reports[u])
            elif isinstance(request, ConsistencyRequest):
                message = device.consistency_check(request)
            elif isinstance(request, UnmaskRequest):
                message = device.unmask(request)
            else:
                return
        except SecAggAbort as exc:
            self.outcome.device_aborts[u] = exc
            self.gone.add(u)
            return
        finally:
            self.outcome.device_seconds[u] += time.perf_counter() - start
            self.outcome.device_cpu_seconds[u] += time.thread_time() - cpu
        if isinstance(message, UnmaskResponse):
            for owner, _ in message.b_shares:
                self.outcome.revealed.setdefault(owner, set()).add("b")
            for owner, _ in message.s_shares:
                self.outcome.revealed.setdefault(owner, set()).add("s")
        if self.to_server is not None:
            tampered = self.to_server(stage, u, message)
            if tampered is None:
                return
            message = tampered
        self.deliver(stage, u, message)

    def deliver(self, stage: Stage, u: int, message: DeviceMessage) -> bool | None:
        """Hand one message to the server, recording a rejection; returns handle's result."""
        key = f"{stage.name.lower()}.handle"
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            accepted = self.server.handle(stage, message)
        except ProtocolViolation as exc:
            self.outcome.rejected.append((stage, u, exc.reason))
            return None
        except SecAggAbort as exc:  # the round was aborted from outside
            self.outcome.abort = exc
            return None
        finally:
            self._account(key, time.perf_counter() - start, time.thread_time() - cpu)
        if accepted and stage == Stage.MASKED_INPUT:
            self.outcome.expected_total[self.reports[u]] += 1
            self.outcome.contributors = self.outcome.contributors | {u}
        return accepted

    def _account(self, key: str, wall: float, cpu: float) -> None:
        out = self.outcome
        out.server_seconds[key] = out.server_seconds.get(key, 0.0) + wall
        out.server_cpu_seconds[key] = out.server_cpu_seconds.get(key, 0.0) + cpu

    def step(self) -> None:
        """Run the server's open stage: every live device answers, then the stage closes."""
        self.answer()
        self.close()

    def answer(self) -> None:
        """Every live device answers the server's open stage (the stage stays open)."""
        if self.finished:
            return
        stage = self.server.stage
        self.gone |= self.dropouts.before(stage)
        turns: list[tuple[int, ServerMessage | None]] = (
            [(u, None) for u in self.devices] if stage == Stage.ADVERTISE_KEYS
            else [(u, self.pending[u]) for u in sorted(self.pending)])
        for u, request in turns:
            if self.outcome.abort is not None:
                return
            if u not in self.gone:
                self._device_turn(stage, u, request)

    def close(self) -> None:
        """Close the server's open stage."""
        if self.finished:
            return
        stage = self.server.stage
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            self.pending = self.server.close_stage()
        except SecAggAbort as exc:
            self.outcome.abort = exc
            self.pending = {}
        finally:
            self._account(f"{stage.name.lower()}.close", time.perf_counter() - start,
                          time.thread_time() - cpu)
        if self.server.result is not None:
            self.outcome.result = self.server.result

    def run(self) -> SimulatedOutcome:
        """Run the remaining stages."""
        while not self.finished:
            self.step()
        return self.outcome


def run_round(cohort: Cohort, reports: Mapping[int, np.ndarray],
              dropouts: DropoutPlan | None = None, *, to_device: ToDevice | None = None,
              to_server: ToServer | None = None, masks: MaskGenerator | None = None,
              policy: DevicePolicy | None = None) -> SimulatedOutcome:
    """Run a whole simulated round (see :class:`SimulatedRound`)."""
    return SimulatedRound(cohort, reports, dropouts, to_device=to_device, to_server=to_server,
                       masks=masks, policy=policy).run()
