"""A device's part in one secure-aggregation round, and dropout injection for tests.

The protocol itself is ``fedhh.rpc.device_client.participate`` over the pure
``fedhh.secagg.SecAggDevice``; this module builds the device from a verified task and records
the per-stage latencies the load test reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import grpc
import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from fedhh.errors import ConfigError, FedhhError
from fedhh.rpc.device_client import (
    OVERRUN_S,
    ParticipationEnd,
    RetryPolicy,
    Transport,
    decline,
    participate,
)
from fedhh.rpc.participation import ComputeTurns, computed_in_turn
from fedhh.secagg import (
    DEVICES_CHECK,
    Admission,
    DevicePolicy,
    PublicChecks,
    RoundKeys,
    SecAggDevice,
    Stage,
)
from fedhh.secagg.config import (
    SignedConfig,
    session_id_of,
    verify_config,
    verify_members,
)
from fedhh.secagg.merkle import leaf_hash
from fedhh.secagg.primitives import ed25519_verify
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.failures import RoundFailures

log = logging.getLogger(__name__)


def memoised_checks() -> PublicChecks:
    """:class:`PublicChecks` whose functions each compute a value once (for one round's
    devices: its memo grows with the distinct keys, leaves and signatures it meets). A
    roster's multiproof differs from device to device, but its leaves are the neighbours'
    (each leaf is hashed by k devices of the round)."""
    leaf = functools.lru_cache(maxsize=None)(leaf_hash)
    return PublicChecks(signature=functools.lru_cache(maxsize=None)(ed25519_verify),
                        members=functools.partial(verify_members, leaf=leaf),
                        peer_key=functools.lru_cache(maxsize=None)(
                            X25519PublicKey.from_public_bytes))


class RoundChecks:
    """The public checks of the rounds this process's devices take part in, memoised per round.

    They are pure functions: every simulated device of a process checks the same neighbours'
    leaves (k + 1 each) and the same partners' consistency signatures over one survivor set
    (t each), and parses the same neighbours' keys, so each would be computed about k (or t)
    times (devices here) / n times. Memoised, each is computed once per process. Shards are
    drawn at random, so each device process meets every shard's devices: at 50,000 devices in
    two processes, ~50,000 leaves and signatures and ~100,000 keys each, beyond the one
    LRU of 2^14 entries the process had (yet its devices' CPU did not show it: 17.6 against
    17.4 ms per device, perhaps because the shards' stages ran far enough apart). A round's
    memo lives while one of its devices here runs, and holds what that round needs, whatever
    the number of devices and shards. A real device runs its own checks; this only keeps a
    simulated fleet from spending the machine that a load test measures."""

    def __init__(self) -> None:
        self._rounds: dict[bytes, tuple[PublicChecks, list[int]]] = {}

    @contextlib.contextmanager
    def of(self, round_config: bytes) -> Iterator[PublicChecks]:
        """The memoised checks of the round whose signed config is ``round_config``, while the
        caller's device takes part in it."""
        if round_config not in self._rounds:
            self._rounds[round_config] = (memoised_checks(), [0])
        checks, users = self._rounds[round_config]
        users[0] += 1
        try:
            yield checks
        finally:
            users[0] -= 1
            if not users[0]:
                del self._rounds[round_config]

    def __len__(self) -> int:
        """How many rounds' memos are held."""
        return len(self._rounds)


_ROUND_CHECKS = RoundChecks()
# The failed and the refused rounds of this process's devices, logged once per round and cause.
_FAILURES = RoundFailures(log)
# Devices a stage closed on before their message: not failures, the protocol goes on without
# them as without a dropout (run_secure_aggregation's "late"); logged apart so that a loaded
# host's stragglers do not read as "secure aggregation failed".
_LATE = RoundFailures(log, "late for the round (a stage closed before this device's message; "
                           "the round goes on without it, as after a dropout)")
_REFUSALS = RoundFailures(log, "refused the round", detail_field="reason")
# How long a device stopped before it took part (its process asked to stop while it checked
# the round's config or made its report) tries to give up its seat (``decline_round``): one
# try, no retry, so that a stop is not held up by an aggregator that does not answer.
DECLINE_ON_STOP_S = 2.0


class _Entered(asyncio.Semaphore):
    """The fleet's bound on streams opening at once, as one device's session goes through it:
    ``entered`` once the device got in (its stream may then have told the aggregator
    something). A device waiting there has told it nothing: in a fleet of thousands, most of
    those holding a task when a stop comes."""

    def __init__(self, opening: asyncio.Semaphore) -> None:
        super().__init__()
        self._opening = opening
        self.entered = False

    async def acquire(self) -> Literal[True]:
        await self._opening.acquire()
        self.entered = True
        return True

    def release(self) -> None:
        self._opening.release()


def log_round_counts() -> None:
    """Log the counts of the failed, late and refused rounds not yet counted (as the process
    stops)."""
    _FAILURES.flush()
    _LATE.flush()
    _REFUSALS.flush()

STAGES = {"advertise": Stage.ADVERTISE_KEYS, "share": Stage.SHARE_KEYS,
          "masked": Stage.MASKED_INPUT, "unmask": Stage.UNMASK}


@dataclass(frozen=True)
class DropPlan:
    """Each task, drop out with probability ``rate`` before ``stage`` (or a random stage)."""

    rate: float = 0.0
    stage: str = "random"

    def stage_for(self, user: int, task: pb.Task, seed: int | None) -> Stage | None:
        if self.rate <= 0:
            return None
        # Not privacy-relevant: only decides whether this test device misbehaves.
        rng = random.Random(f"{seed}/{user}/{task.round}/{task.attempt}") if seed is not None \
            else random.Random()
        if rng.random() >= self.rate:
            return None
        if self.stage == "random":
            return rng.choice(list(STAGES.values()))
        return STAGES[self.stage]


@dataclass(frozen=True)
class Floors:
    """What a device refuses whoever signed the task: local epsilon above ``max_eps_local``
    (a larger one would weaken its local guarantee); reports beyond ``lifetime_eps_local``
    summed over ``budget_period_s`` (``fedhh_device.budget``); rounds whose release threshold
    n_min is below ``min_cohort`` (its report would hide in too small a crowd); rounds without
    device authentication or without the consistency check; and rounds whose (n, k, t) fail the
    lying-server bound that the device computes itself, assuming at most
    ``max_corrupt_fraction`` of the cohort colludes with the aggregator (privacy plus
    disconnection at most 2^-``security_bits``; ``fedhh.secagg.DevicePolicy``)."""

    max_eps_local: float = 10.0
    min_cohort: int = 100
    max_corrupt_fraction: float = DEVICES_CHECK.corrupt
    security_bits: float = 40.0
    lifetime_eps_local: float = 100.0
    budget_period_s: float = 30 * 24 * 3600.0

    def check_eps_local(self, eps_local: float) -> None:
        """ConfigError unless 0 < ``eps_local`` <= ``max_eps_local``, checked before any report
        is computed. Zero, a negative or NaN is not "above the limit" (before, each was refused
        so); it is no local guarantee at all."""
        if not eps_local > 0:
            raise ConfigError(f"task asks for eps_local {eps_local}, not a positive number")
        if not eps_local <= self.max_eps_local:
            raise ConfigError(f"task asks for eps_local {eps_local}, above this device's limit "
                              f"{self.max_eps_local}")

    def policy(self) -> DevicePolicy:
        return DevicePolicy(min_threshold=2, min_n_min=self.min_cohort,
                            require_device_auth=True, require_consistency_check=True,
                            max_corrupt_fraction=self.max_corrupt_fraction,
                            security_bits=self.security_bits)


def _check_clock(device: SecAggDevice) -> None:
    """ConfigError if, by this device's clock, the round's first stage closed more than
    ``OVERRUN_S`` ago: it would give up at its first wait for a request, having advertised its
    keys (a dropout the round must recover from) and spent its budget on a report. The task
    comes as the cohort is drawn, before that stage closes, so this is a device whose clock is
    ahead of the coordinator's (a device 60 s ahead timed out in every round with "no request
    before the previous stage's deadline", nothing saying why), or a task long overdue."""
    closed_ago_s = time.time() - device.config.deadlines.at_s(Stage.ADVERTISE_KEYS)
    if closed_ago_s > OVERRUN_S:
        raise ConfigError(f"the round's first stage closed {closed_ago_s:.0f} s ago by this "
                          "device's clock: the clock is at least that far ahead of the "
                          "coordinator's (check its time synchronisation), or the task came too "
                          "late to take part")


async def decline_round(channel: grpc.aio.Channel | Any, task: pb.Task, key: Ed25519PrivateKey,
                        public: bytes, round_keys: RoundKeys, coordinator_public: bytes,
                        rng: random.Random | None = None, retry: RetryPolicy | None = None
                        ) -> bool:
    """Give up this device's seat in ``task``'s round, which it refuses before sending its
    aggregator anything (its floors, its budget, its clock), so that the round's first stage
    does not wait for it to the deadline (``fedhh.rpc.device_client.decline``; it says no
    reason). Only for a config the coordinator signed: a task whose config does not verify
    names no round this device has a seat in. True if the aggregator took it."""
    try:
        config = verify_config(SignedConfig(task.round_config, task.round_config_signature),
                               coordinator_public)
        admission = Admission(task.secagg_id, public, *round_keys.public, task.admission)
    except FedhhError:
        return False
    declined = await decline(channel, session_id_of(config), identity_key=key,
                             admission=admission, retry=retry, rng=rng)
    log.debug("declined the round" if declined else "could not decline the round",
              extra={"device_id": task.device_id, "round": task.round, "attempt": task.attempt})
    return declined


async def run_secure_aggregation(channel: grpc.aio.Channel | Any, task: pb.Task,
                                 key: Ed25519PrivateKey, round_keys: RoundKeys,
                                 coordinator_public: bytes,
                                 ones: np.ndarray | Callable[[], Awaitable[np.ndarray]],
                                 drop_at: Stage | None, stats: Any,
                                 floors: Floors, *, public: bytes | None = None,
                                 rng: random.Random | None = None,
                                 transport: Transport | None = None,
                                 opening: asyncio.Semaphore | None = None,
                                 computing: ComputeTurns | None = None) -> str:
    """Run the round; returns "completed", "dropped", "late" (a stage closed before the
    device's message, its masked input not in: the round went on without it, as a secure
    aggregation round goes on without a device that dropped out) or "failed". ``ones``: the
    report, or what makes it (and spends the device's budget on it), awaited only once the round's
    config has passed the device's checks and floors, so that a round the device refuses
    costs it nothing (a coordinator sending configs below the devices' floors drained their
    lifetime budgets: each refused round was charged its eps_local all the same). ``channel``: the
    aggregator's channel or a ``SecureAggregationStub`` on it (a fleet shares one);
    ``public``: ``key``'s raw public key, if the caller keeps it; ``rng``: the retries' jitter;
    ``transport``: the session stream or the unary calls (None: ``participate``'s default);
    ``opening``: the fleet's bound on streams opening at once, ``computing``: the turns in
    which its devices compute (``participate``)."""
    if public is None:
        public = key.public_key().public_bytes(serialization.Encoding.Raw,
                                               serialization.PublicFormat.Raw)
    round_key = (task.run_id, task.round, task.attempt)
    with (_FAILURES.of(round_key) as failures, _LATE.of(round_key) as late,
          _REFUSALS.of(round_key) as refusals):
        return await _run(channel, task, key, round_keys, coordinator_public, ones, drop_at,
                          stats, floors, public, rng, transport, opening, computing, failures,
                          late, refusals)


async def _run(channel: grpc.aio.Channel | Any, task: pb.Task, key: Ed25519PrivateKey,
               round_keys: RoundKeys, coordinator_public: bytes,
               ones: np.ndarray | Callable[[], Awaitable[np.ndarray]], drop_at: Stage | None,
               stats: Any, floors: Floors, public: bytes, rng: random.Random | None,
               transport: Transport | None, opening: asyncio.Semaphore | None,
               computing: ComputeTurns | None, failures: RoundFailures.Reporter,
               late: RoundFailures.Reporter, refusals: RoundFailures.Reporter) -> str:
    started = time.perf_counter()
    entry = None if opening is None else _Entered(opening)
    began = False  # (participating: through the opening, where there is one, it sent something)
    try:
        signed = SignedConfig(task.round_config, task.round_config_signature)
        # The task carries the proof; the keys it proves are the ones this device presented.
        admission = Admission(task.secagg_id, public, *round_keys.public, task.admission)
        with _ROUND_CHECKS.of(task.round_config) as checks:
            device = await computed_in_turn(computing, functools.partial(
                SecAggDevice, signed, coordinator_public, task.secagg_id, identity_key=key,
                admission=admission, round_keys=round_keys, policy=floors.policy(),
                checks=checks))
            _check_clock(device)
            if callable(ones):
                ones = await ones()
            began = True
            result = await participate(channel, device, ones, identity_key=key,
                                       admission=admission, drop_at=drop_at, rng=rng,
                                       observe=stats.calls.record, transport=transport,
                                       opening=entry, computing=computing)
    except FedhhError as error:
        refusals.failed("refused", "config", task.secagg_id, str(error))
        await decline_round(channel, task, key, public, round_keys, coordinator_public, rng)
        return "failed"
    except asyncio.CancelledError:
        # Stopped (its process asked to stop) before it sent its aggregator anything (checking
        # the config, making its report, waiting for its turn to open its stream): its seat
        # is given up, so that the round's first stage does not wait for it to the deadline.
        # Before, nothing was sent, and the stage waited. (Once it takes part, its stream's end
        # tells the aggregator, or it is a dropout at the stage's deadline, as any. Over the
        # unary calls, which take no turn to open, one stopped after it advertised declines
        # too: refused, FAILED_PRECONDITION, which changes nothing.)
        if not began or (entry is not None and not entry.entered):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(DECLINE_ON_STOP_S):
                    await decline_round(channel, task, key, public, round_keys,
                                        coordinator_public, rng, retry=RetryPolicy(attempts=1))
        raise
    stats.outcome_seconds.setdefault(result.outcome.value, []).append(
        time.perf_counter() - started)
    if result.outcome is ParticipationEnd.COMPLETED or (result.outcome is ParticipationEnd.LATE
                                               and result.contributed):
        return "completed"
    if result.outcome is ParticipationEnd.DROPPED:
        return "dropped"
    if result.outcome is ParticipationEnd.LATE:
        late.failed(result.outcome.value, result.reached.name, task.secagg_id, result.detail)
        return "late"
    failures.failed(result.outcome.value, result.reached.name, task.secagg_id, result.detail)
    return "failed"

