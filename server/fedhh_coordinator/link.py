"""The coordinator's ``AggregatorLink`` (``fedhh.rounds``): a round attempt over the network.

One attempt, as the coordinator runs it (docs/networked.md, "A round"):

0. the aggregation service is asked which kind it is (a combiner's workers); one that does not
   answer (stopped, restarting, a network blip), or a combiner none of whose workers serves,
   is waited for, polled with a backoff, before any device is drawn (one that refuses the
   coordinator, its control token, is not): the attempt stays open and is not spent, its
   progress says "waiting for the aggregator at ADDRESS". An outage longer than
   ``AGGREGATOR_PATIENCE_S`` gives the attempt up, and every later attempt of the same outage
   at once, with the address and the outage's length in the reason (the run fails with it
   once its attempts are spent);
1. check-in: a cohort of up to ``target_devices`` is drawn from the devices that check in
   (``Lobby``); with fewer than ``min_devices`` the attempt is aborted before anything is sent;
2. a secure-aggregation round config is signed for the cohort (ids 1..n, lying-server (k, t)
   for n, the consistency check on, a fresh graph seed from the OS, the Merkle root of the
   members' identity and round keys) and opened at the aggregator; what a restart needs to
   settle the attempt is stored before the aggregator hears of it;
3. the members are charged their lifetime budgets (``RunAdmission``), and each gets its
   signed task with its admission (its Merkle proof);
4. the aggregator's outcome: before the sum is read, the driver's charge hook records the spend
   at the number of contributors; an abort releases nothing; a lost aggregator is asked, once it
   answers again, whether unmasking began.

Sharded rounds (``RunConfig.shard_size``; docs/scaling.md): when the aggregation address is a
combiner, the cohort is split at random into shards (``fedhh.secagg.shards``), each with its own
signed config (ids 1..n_j, its own graph seed and (k, t), the Merkle root of its own members)
placed on one of the combiner's serving workers; each member's task names its shard's config
and its worker's address. The combiner releases one total with every shard's evidence; it is
checked shard by shard against the configs signed here (``verify_sharded_release``) and charged
once. A single aggregator runs unsharded rounds exactly as before; a round that would need
several shards is refused there (the coordinator must never see a shard sum).

Both modes run the same steps; what differs (how the round opens, which service settles it,
how its release is judged) is the attempt's plan (``fedhh_coordinator.plans``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.backoff import Backoff
from fedhh.codec import codes as cw
from fedhh.config import WINDOW_FIELDS, RunConfig
from fedhh.config.flags import flag
from fedhh.errors import ConfigError, FedhhError, RoundAborted
from fedhh.rounds import AttemptId, ChargeHook, Recovered, Recovery, Released
from fedhh.rpc.device_client import OVERRUN_S
from fedhh.rpc.tasks import CohortTasks
from fedhh.secagg import (
    DEVICES_CHECK,
    IdentityTree,
    RoundConfig,
    SecAggConfigError,
    StageDeadlines,
    Threat,
    choose_parameters,
    sign_config,
)
from fedhh.secagg.config import SignedConfig
from fedhh.secagg.merkle import Member
from fedhh.secagg.shards import shard_sizes, split_cohort
from fedhh.server import RoundQuery
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import metrics
from fedhh_coordinator.aggregation import (
    AggregatorApi,
    AggregatorOutcome,
    AggregatorRefused,
    AggregatorUnavailable,
    ControlTokenRefused,
    DeviceAddresses,
    RoundService,
)
from fedhh_coordinator.budgets import RunAdmission
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.plans import (
    ReleaseJudgement,
    RoundPlan,
    ShardedPlan,
    SignedCohort,
    UnshardedPlan,
    plan_from_annotation,
)
from fedhh_coordinator.progress import Progress
from fedhh_coordinator.store import Store
from fedhh_coordinator.stretch import (
    CAP,
    LATE,
    REFUSED,
    STRETCH,
    aborted_late,
    fell_short,
    next_stretch,
    stretch_cap,
    stretched,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# How long an aggregation service that does not answer is waited for before an attempt opens
# (step 0 of the module docstring), and the first and the longest pause between two of its
# polls (each pause doubles the last).
AGGREGATOR_PATIENCE_S = 600.0
AGGREGATOR_POLL_S = 0.2
AGGREGATOR_POLL_MAX_S = 5.0
# How long a link waits for a lost aggregator to answer again, once it ran the attempt's
# round, before it gives the attempt up as unknown (and so charged at n_min): the same
# patience. (It was 120 s: an aggregator restarted 150 s into an outage, whose journal would
# have said the round never reached unmasking, found the attempt already charged.)
RECOVERY_PATIENCE_S = AGGREGATOR_PATIENCE_S
# The stage watch's long-poll (``NetworkLink._watch_stage``): each ask waits up to this long
# for the round's stage to change (the service caps it: an aggregator at its --max-wait-ms); a
# service that answers at once (a version before the long-poll) or is away is asked again
# after the pace.
STAGE_WATCH_WAIT_S = 30.0
STAGE_WATCH_PACE_S = 1.0


class NetworkLink:
    """Round attempts of one run over the network (module docstring)."""

    def __init__(self, config: RunConfig, round_epsilon: Callable[[int], float], store: Store,
                 aggregator: AggregatorApi, lobby: Lobby, key: Ed25519PrivateKey,
                 aggregator_address: DeviceAddresses, admission: RunAdmission,
                 progress: Progress | None = None,
                 cancelled: Callable[[], bool] = lambda: False) -> None:
        """``round_epsilon``: the local epsilon of a round (0-based index), the ledger's;
        ``aggregator_address``: where devices reach a single aggregator (a combiner names its
        workers'); ``cancelled``: whether the operator cancelled the run (a wait for the
        aggregation service ends then)."""
        self.config = config
        self.round_epsilon = round_epsilon
        self.store = store
        self.aggregator = aggregator
        self.lobby = lobby
        self.key = key
        self.aggregator_address = aggregator_address
        self.admission = admission
        self.progress = progress or Progress()
        self.recovery_patience_s = RECOVERY_PATIENCE_S
        self.cancelled = cancelled
        self.aggregator_patience_s = AGGREGATOR_PATIENCE_S
        self.aggregator_poll_s = AGGREGATOR_POLL_S
        self._down_since: float | None = None  # (loop time) the outage under way began
        self._tag: str | None = None  # run_tag of the run, read from the store once
        self._stretch = 1  # the attempt's stage windows: the configured ones times this

    # ---- AggregatorLink -------------------------------------------------------------------
    async def collect(self, attempt: AttemptId, query: RoundQuery,
                      charge: ChargeHook) -> Released:
        s = self.config
        workers = await self._await_aggregator(attempt)
        if workers is None and s.shard_size is not None and len(
                shard_sizes(s.target_devices, s.shard_size)) > 1:
            raise RoundAborted("sharded rounds (shard_size) need a combiner at --aggregator: "
                               "a single aggregator would hand the coordinator shard sums")
        self.progress.enter(attempt.round, attempt.attempt, "check-in")
        self._stretch_windows(attempt)
        try:
            cohort = await self.lobby.collect(
                s.target_devices, s.checkin_ms / 1000,
                pool_size=math.ceil(s.oversubscription * s.target_devices),
                quiet_s=s.checkin_quiet_ms / 1000, eligible=self.admission.eligible,
                min_size=s.min_devices, stop=self.cancelled)
            if self.cancelled():
                # Before, the check-in ran its window (up to a day) and the round then opened,
                # charged and released as if the cancel had come after it.
                raise RoundAborted("cancelled during check-in: no device was drawn or charged")
            if len(cohort) < s.min_devices:
                raise RoundAborted(f"only {len(cohort)} devices checked in (min_devices "
                                   f"{s.min_devices}){self.admission.shortfall()}")
            members = {device_id: (record[1], *self.lobby.round_keys(device_id))
                       for device_id in cohort
                       if (record := self.store.device(device_id)) is not None}
            plan, signed = self._plan(attempt, query, members, workers)
            self._check_windows_ahead(plan, len(members))
            # What a restart needs to settle or collect the attempt, stored before the
            # aggregation service hears of it.
            self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt,
                                      plan.annotation())
            try:
                await plan.open(self.aggregator, [config for config, _, _ in signed])
            except AggregatorUnavailable as error:
                raise RoundAborted(f"the {plan.kind} at {self._control_address()} stopped "
                                   f"answering before the round opened ({error})") from None
            except ControlTokenRefused:
                self._token_refused(attempt)
                raise
            except FedhhError as error:
                # (only a refused config can be its windows' doing: a busy service, one that
                # holds its --max-rounds, says nothing of them)
                stretch = self._refused_stretch(attempt) if isinstance(error, ConfigError) else ""
                raise RoundAborted(f"the {plan.kind} refused the round: {error}{stretch}"
                                   ) from None
            # The service has the round now: a restart that finds it without a record of it
            # does not take the attempt as never opened (``_verdict``).
            self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt,
                                      {OPENED: True})
            # Charged before the devices hear of the round (their lifetime budgets), and
            # only once it opened: a round the service never opened asks nothing of them.
            # (Before, they were charged first, also for a round a lost service never ran.)
            self.admission.charge(list(members))
            tasks: dict[int, pb.SignedTask] = {}
            for cohort_plan, (config, identities, address) in zip(plan.cohorts, signed,
                                                                  strict=True):
                tasks.update(self._tasks(attempt, query, cohort_plan, config, identities,
                                         address))
            # Its members may be busy with the round until they give up on its last stage.
            self.lobby.deliver(tasks, max(c.config.deadlines.unmask for c in plan.cohorts)
                               / 1000 + OVERRUN_S)
            metrics.ROUND_DEVICES.set(len(members))
            self.progress.enter(attempt.round, attempt.attempt, "secure aggregation",
                                len(members))
            return await self._fetch_and_remember(attempt, plan, charge)
        finally:
            self.lobby.clear()

    async def recover(self, attempt: AttemptId) -> Recovered:
        annotation = self._annotation(attempt)
        if annotation.get(TOKEN_REFUSED) and not annotation.get(OPENED):
            # (the mark taken off: a retry that a crash stops is settled as any other)
            self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt,
                                      {TOKEN_REFUSED: False})
            return Recovered(Recovery.NOTHING, "the aggregation service refused the "
                             "coordinator's control token before the round opened",
                             unsent=True, retry=True)
        if "aggregator_round_id" not in annotation:
            return Recovered(Recovery.NOTHING, "the round never reached the aggregator",
                             unsent=True)
        plan = plan_from_annotation(annotation, self.store, self.config.min_devices)
        outcome = await self._patient_outcome(plan)
        if outcome.state == "aborted":
            # An attempt the service aborted while no coordinator listened stretches the next
            # one's windows as one aborted under this process does (``_stretch_windows``).
            # Before, a restart between the two left the mark out and the next attempt ran the
            # windows that had been too short again.
            self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt, {
                LATE: aborted_late(outcome.reason, outcome.reached_unmask,
                                   outcome.stage_devices)})
        return _verdict(outcome, opened=annotation.get(OPENED) is True)

    async def resume(self, attempt: AttemptId, query: RoundQuery,
                     charge: ChargeHook) -> Released:
        annotation = self._annotation(attempt)
        plan = plan_from_annotation(annotation, self.store, self.config.min_devices)
        self._stretch = int(annotation.get(STRETCH, 1))
        self.progress.enter(attempt.round, attempt.attempt, "secure aggregation",
                            sum(len(c.members) for c in plan.cohorts))
        return await self._fetch_and_remember(attempt, plan, charge)

    # ---- the aggregation service's availability ----------------------------------------------
    def _control_address(self) -> str:
        """Where the coordinator reaches the aggregation service (its ``--aggregator``)."""
        return str(getattr(self.aggregator, "address", "") or self.aggregator_address.grpc)

    async def _await_aggregator(self, attempt: AttemptId
                                ) -> list[tuple[int, DeviceAddresses]] | None:
        """The service's workers (``AggregatorApi.workers``) once it answers, and, a
        combiner, once one of its workers serves (step 0 of the module docstring). Before, a
        service that did not answer, or a combiner whose workers were all restarting, aborted
        the attempt at once, and a run's attempts were all spent within seconds. A service
        that refuses the coordinator is not waited for: a refused control token stops the
        coordinator (``ControlTokenRefused``, ``_token_refused``), any other refusal aborts
        the attempt."""
        loop = asyncio.get_running_loop()
        backoff, waiting = Backoff(self.aggregator_poll_s, AGGREGATOR_POLL_MAX_S), False
        where = self._control_address()
        while True:
            try:
                workers = await self.aggregator.workers()
                if workers is not None and not workers:
                    raise AggregatorUnavailable("the combiner has no serving worker")
            except ControlTokenRefused:
                self._token_refused(attempt)
                raise
            except AggregatorRefused as error:
                raise RoundAborted(f"the aggregation service at {where}: {error}") from None
            except AggregatorUnavailable as error:
                now = loop.time()
                if self._down_since is None:
                    self._down_since = now
                down = now - self._down_since
                if down >= self.aggregator_patience_s:
                    raise RoundAborted(
                        f"the aggregation service at {where} has not answered for {down:.0f} s "
                        f"(the coordinator waits up to {self.aggregator_patience_s:g} s for "
                        f"it before an attempt; the last answer: {error})") from None
                if self.cancelled():
                    raise RoundAborted(f"cancelled while waiting for the aggregation service "
                                       f"at {where}") from None
                if not waiting:
                    waiting = True
                    metrics.AGGREGATOR_WAITS.inc()
                    log.warning("waiting for the aggregator", extra={
                        "run_id": attempt.run_id, "round": attempt.round,
                        "attempt": attempt.attempt, "address": where, "error": str(error)})
                    self.progress.enter(attempt.round, attempt.attempt,
                                        f"waiting for the aggregator at {where}")
                await asyncio.sleep(min(backoff.pause(), self.aggregator_patience_s - down))
                continue
            if self._down_since is not None:
                log.warning("the aggregator answers again", extra={
                    "run_id": attempt.run_id, "address": where,
                    "waited_s": round(loop.time() - self._down_since, 1)})
                self._down_since = None
            return workers

    # ---- the plan -------------------------------------------------------------------------
    def _plan(self, attempt: AttemptId, query: RoundQuery, members: dict[int, Member],
              workers: list[tuple[int, DeviceAddresses]] | None
              ) -> tuple[RoundPlan, list[tuple[SignedConfig, IdentityTree, DeviceAddresses]]]:
        """The attempt's plan in the mode the aggregation service runs (module docstring),
        and per cohort its signed config, identity tree and where its members send.
        A single aggregator takes the whole cohort; a combiner's workers take it split at
        random into shards (``fedhh.secagg.shards``)."""
        deadlines = self._deadlines()
        if self._tag is None:
            self._tag = run_tag(attempt.run_id, self.store.run_created_at(attempt.run_id))
        round_id = _round_id(attempt, self._tag)
        if workers is None:
            groups = [(list(members), round_id, 0, self.aggregator_address)]
        else:
            groups = [(shard, _shard_round_id(attempt, self._tag, j), *workers[j % len(workers)])
                      for j, shard in enumerate(split_cohort(list(members),
                                                             self.config.shard_size,
                                                             len(workers)))]
        cohorts, signed = [], []
        try:
            for devices, group_id, worker, address in groups:
                config, identities = self._round_config(query, [members[d] for d in devices],
                                                        group_id, deadlines)
                cohorts.append(SignedCohort(
                    config, tuple(devices),
                    {i: members[d][0] for i, d in enumerate(devices, start=1)}, worker))
                signed.append((sign_config(config, self.key), identities, address))
        except SecAggConfigError as error:
            raise RoundAborted(f"no secure-aggregation parameters: {error}") from None
        plan: RoundPlan = (UnshardedPlan(cohorts[0]) if workers is None else
                           ShardedPlan(round_id, tuple(cohorts),
                                       self.config.min_devices))
        return plan, signed

    # ---- the pieces -----------------------------------------------------------------------
    def _stretch_windows(self, attempt: AttemptId) -> None:
        """The attempt's stage windows (``fedhh_coordinator.stretch``): longer than the
        configured ones after an attempt of the round aborted with too few devices in time,
        said in the log and the progress, and kept in the round summary. Before, every attempt
        ran the configured windows: on a loaded host (load average 12 to 26 on 2 cores) round
        3 of ``fedhh up`` aborted 4 times at key sharing, 1,053 to 1,215 devices in time of the
        1,248 needed, and never released."""
        previous = (self._annotation(AttemptId(attempt.run_id, attempt.round,
                                               attempt.attempt - 1))
                    if attempt.attempt > 1 else None)
        self._stretch = next_stretch(previous, self.config.stage_windows())
        self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt,
                                  {STRETCH: self._stretch, CAP: stretch_cap(previous)})
        if self._stretch > 1:
            note = (f"attempt {attempt.attempt} of round {attempt.round}: stage windows "
                    f"x{self._stretch} after too few devices in time")
            log.warning(note, extra={"run_id": attempt.run_id, "round": attempt.round,
                                     "attempt": attempt.attempt, "stretch": self._stretch,
                                     "windows_ms": list(self._windows())})
            self.progress.stage = note

    def _refused_stretch(self, attempt: AttemptId) -> str:
        """Mark a stretched attempt whose config the service refused (``stretch_cap``: the
        round's later attempts stretch at most half as far) and say so; "" for one not
        stretched. Not for another refusal: a service busy with its --max-rounds refused the
        x2 attempt, and every later attempt of the round ran x1, the windows its late abort
        had shown too short."""
        if self._stretch == 1:
            return ""
        self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt,
                                  {REFUSED: True})
        return (f" (its stage windows were stretched x{self._stretch} after too few devices in "
                f"time: the round's next attempts stretch them at most x{self._stretch // 2})")

    def _windows(self) -> tuple[int, ...]:
        """The attempt's stage windows in ms, in ``WINDOW_FIELDS``' order."""
        return stretched(self.config.stage_windows(), self._stretch)

    def _token_refused(self, attempt: AttemptId) -> None:
        """Mark an attempt whose round the service never opened, its control token refused:
        it stays open and the coordinator stops (``ControlTokenRefused``), and the next
        process tries it again as it stands, not counted against max_attempts (``recover``).
        Before, the refusal aborted the attempt free and the next was opened, refused alike:
        the run failed once its attempts were spent, though the operator had only the token
        file to fix."""
        self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt,
                                  {TOKEN_REFUSED: True})

    def _annotation(self, attempt: AttemptId) -> dict[str, Any]:
        row = next((r for r in self.store.rounds(attempt.run_id)
                    if (r.round, r.attempt) == (attempt.round, attempt.attempt)), None)
        return {} if row is None else row.summary

    def _slack_s(self) -> float:
        """Time allowed past the last deadline for the unmasking work and the transfer."""
        return max(self._windows()) / 1000 + 30

    async def _fetch_and_remember(self, attempt: AttemptId, plan: RoundPlan,
                                  charge: ChargeHook) -> Released:
        """``_fetch``, then the attempt's steps and the service's last per-stage counts kept
        in its round summary, whatever the outcome (the operator's dropout rates)."""
        ended: RoundAborted | None = None
        try:
            return await self._fetch(plan, charge)
        except RoundAborted as aborted:
            ended = aborted
            raise
        finally:
            with contextlib.suppress(AggregatorUnavailable, AggregatorRefused):
                outcome = await plan.service(self.aggregator).outcome(plan.round_id)
                self.progress.observe_stage("", outcome.stage_devices)
            # (the next attempt's windows: ``_stretch_windows``)
            late = ended is not None and aborted_late(ended.reason, ended.reached_unmask,
                                                      self.progress.stage_devices)
            self.store.annotate_round(attempt.run_id, attempt.round, attempt.attempt,
                                      {**self.progress.summary(), LATE: late})

    async def _fetch(self, plan: RoundPlan, charge: ChargeHook) -> Released:
        """The round's sum, charged before it is read at the count the plan's judgement of
        the release gives (``RoundPlan.judge``); a refused release is charged too (the sum
        exists) and its sum is cancelled unread."""
        service = plan.service(self.aggregator)
        round_id = plan.round_id
        charged = False
        # (the release charged before the sum's first read)
        first_charged: ReleaseJudgement | None = None

        async def on_release(release: Any) -> None:
            nonlocal charged, first_charged
            judgement = plan.judge(release)
            if first_charged is not None:
                # The held sum read again after its first read broke off (``_await_sum``):
                # charged once, so read only where it is the release charged, over the same
                # reports. (Before, the count alone was compared: a total rebuilt from fewer
                # shards, charged n_min as the first for a shard lost outside both, was read.)
                if judgement.refusal is None and (judgement.charge, judgement.over) == (
                        first_charged.charge, first_charged.over):
                    return
                await service.drop(round_id)  # (unread)
                raise RoundAborted(
                    f"the {plan.released} read again after its first read broke off "
                    f"({judgement.refusal or f'{judgement.charge} contributors'}) is not the "
                    f"one charged at {first_charged.charge}: refused unread", reached_unmask=True)
            if judgement.refusal is not None:
                await service.drop(round_id)  # (unread)
                charged = True
                raise RoundAborted(f"refused the {plan.released}: {judgement.refusal}",
                                   reached_unmask=True, contributors=judgement.charge)
            assert judgement.charge is not None
            self.progress.enter(self.progress.round, self.progress.attempt, "releasing",
                                judgement.proven)
            try:
                await charge(judgement.charge, judgement.over_digest)
            except (StoreUnavailable, asyncio.CancelledError):
                # The sum stays unread at the service, which holds it for the attempt's resume
                # once the store answers, or the next process's (the charge written then,
                # once: ``_ServiceControl``). Before, it was cancelled here: a store away past
                # the charge's patience (a disk full for 20 s) lost the round's sum, charged,
                # and its round ran again; so did a coordinator stopped while its charge waited
                # for the store, the attempt then settled lost at n_min by the next process.
                raise
            except BaseException:
                await service.drop(round_id)  # (unread)
                raise
            charged, first_charged = True, judgement

        return await self._await_sum(plan, service, on_release, lambda: charged)

    async def _await_sum(self, plan: RoundPlan, service: RoundService[Any],
                         on_release: Callable[[Any], Any], charged: Callable[[], bool]
                         ) -> Released:
        """The round's result until its sum arrives. A round past its deadline is cancelled
        and settled by the aggregation service's word on it. A service that stops answering
        (restarting, or starved past a call's timeout) is asked patiently what became of the
        round; while it still runs the round or holds its sum, the wait goes on (until the
        deadline), instead of giving up an attempt that may still release."""
        round_id = plan.round_id
        loop = asyncio.get_running_loop()
        until = loop.time() + max(plan.deadline_ms / 1000 - time.time() + self._slack_s(), 1.0)
        watcher = asyncio.create_task(self._watch_stage(plan, service))
        # (the pause before each read again: a GetResult that keeps failing while GetOutcome
        # answers is not called again in a tight loop till the deadline)
        again = Backoff(self.aggregator_poll_s, AGGREGATOR_POLL_MAX_S)
        try:
            while True:
                try:
                    total, contributors = await service.result(
                        round_id, plan.cohorts[0].config.dimension,
                        max(until - loop.time(), 1.0), on_release)
                    return Released(total.astype(np.int64), contributors,
                                    stored=lambda: service.delivered(round_id))
                except RoundAborted as aborted:
                    if aborted.reached_unmask or "too_few_devices" not in aborted.reason:
                        raise
                    raise RoundAborted(aborted.reason + await self._too_few(plan, service),
                                       contributors=aborted.contributors) from None
                except TimeoutError:
                    log.warning(f"the round did not finish by its deadline: cancelling it at "
                                f"the {plan.kind} and asking what became of it, for up to "
                                f"{self.recovery_patience_s:g} s (--aggregator-patience-"
                                f"seconds) while the {plan.kind} does not answer; past that "
                                "the attempt is settled as unknown, charged at n_min", extra={
                                    "round_id": round_id.decode(errors="replace"),
                                    "address": self._control_address(),
                                    "patience_s": self.recovery_patience_s})
                    raise _aborted("the round did not finish before its deadline",
                                   await self._cancel_and_ask(plan, service)) from None
                except ControlTokenRefused:
                    raise  # (settled by the next process, holding the service's token)
                except AggregatorRefused as refused:
                    # An answer no later read changes: the round is ended and settled at
                    # once by the service's word, a round that may still unmask charged at
                    # n_min (``_verdict``). Before, the read was tried again till the
                    # round's deadline while GetOutcome said the round ran.
                    log.error(f"the {plan.kind} refused the round's result: it is cancelled "
                              "and settled by the service's word on it", extra={
                                  "round_id": round_id.decode(errors="replace"),
                                  "address": self._control_address(), "error": str(refused)})
                    raise _aborted(str(refused), await self._cancel_and_ask(plan, service)
                                   ) from None
                except AggregatorUnavailable as error:
                    outcome = await self._patient_outcome(plan)
                    if charged():
                        # Read again while the service holds it (GetResult's hold), or
                        # rebuilds it (a combiner back from a restart takes the released
                        # round over, said running till its workers' held sums are in
                        # again), under the one charge: the hook reads only the sum charged.
                        # Before, a read broken off after the charge (a network blip, a call
                        # past its deadline) lost the attempt, charged, although the sum was
                        # still there, and the round ran again, charged again; a restarted
                        # combiner's total, said running while rebuilt, was lost so until
                        # this read too.
                        held = outcome.state == "running" or (outcome.state == "released"
                                                              and outcome.sum_available)
                        if not held or loop.time() >= until:
                            raise RoundAborted(f"lost the {plan.kind} while reading the sum "
                                               f"({error})", reached_unmask=True) from None
                        log.info(f"the {plan.kind} still holds the sum: reading it again",
                                 extra={"round_id": round_id.decode(errors="replace")})
                        await again.sleep()
                        continue
                    if _verdict(outcome, opened=True).verdict is not Recovery.RESUME \
                            or loop.time() >= until:
                        raise _aborted(f"lost the {plan.kind} ({error})", outcome) from None
                    log.info(f"the {plan.kind} answers again and still has the round",
                             extra={"round_id": round_id.decode(errors="replace")})
                    await again.sleep()
        finally:
            watcher.cancel()

    async def _cancel_and_ask(self, plan: RoundPlan, service: RoundService[Any]
                              ) -> AggregatorOutcome:
        """The round cancelled at the service, then its word on it, both asked again while
        the service is away, within one ``recovery_patience_s``. Cancelled as patiently as
        its outcome is asked: before, one failed try (the service restarting) left the round
        running there, and the outcome read next, "running", charged the attempt at n_min as
        one that may yet unmask, although the cancel would have ended it before unmasking,
        free. One patience for both: before, each had its own, and a service away past the
        deadline held the attempt for twice recovery_patience_s and more (each wait's last
        pause ran past it: 3.0 s at a patience of 1 s, 20 minutes and more at 600 s) before
        it was settled. A cancel refused leaves the word to decide (a round it says still
        runs is charged at n_min); a refused token settles nothing (``ControlTokenRefused``)."""
        give_up = asyncio.get_running_loop().time() + self.recovery_patience_s
        try:
            await self._patiently(plan, service.cancel, give_up)
        except ControlTokenRefused:
            raise
        except FedhhError:
            pass  # (the service's word says what became of the round)
        return await self._patient_outcome(plan, give_up)

    async def _too_few(self, plan: RoundPlan, service: RoundService[Any]) -> str:
        """What an abort for too few devices adds to its reason: how many of the cohort each
        stage accepted, the members that declined, and where to look. A device that refuses a
        round sends the aggregator at most its decline, so the reason said only
        "too_few_devices" while every device of the cohort refused it (its n_min below their
        floor, its (n, k, t) failing their lying-server bound, a task signed by another key
        than the one they enrolled with) and said why in its own log only."""
        cohort = sum(len(c.members) for c in plan.cohorts)
        stages: dict[str, int] = {}
        declined: int | None = None
        with contextlib.suppress(FedhhError):
            outcome = await service.outcome(plan.round_id)
            stages, declined = dict(outcome.stage_devices), outcome.declined
        return too_few_hint(stages, cohort, self.config.min_devices, self._windows()[0],
                            declined)

    async def _watch_stage(self, plan: RoundPlan, service: RoundService[Any]) -> None:
        """Show the service's stage in the run's progress while the round runs: one
        long-poll at a time, answered as the stage changes (``RoundService.watch``). Before,
        the service was asked every second: a call in and out at the coordinator, and at a
        combiner one more to each worker, about 1 ms of CPU a side each, for every second
        a round was held open. Display only: what settles the round asks on its own."""
        seen: AggregatorOutcome | None = None
        while True:
            try:
                outcome = await service.watch(plan.round_id, seen, STAGE_WATCH_WAIT_S)
            except AggregatorRefused:
                return  # (no later ask is answered: ``_patient_outcome`` says why)
            except AggregatorUnavailable:
                outcome = None
            if outcome is not None and outcome.state == "running":
                self.progress.observe_stage(outcome.stage, outcome.stage_devices)
                seen = outcome
                if outcome.watched:
                    continue
            await asyncio.sleep(STAGE_WATCH_PACE_S)

    async def _patient_outcome(self, plan: RoundPlan, give_up: float | None = None
                               ) -> AggregatorOutcome:
        """The service's word on a round, waiting (with backoff) while it is unreachable;
        unknown if it stays silent for ``recovery_patience_s`` (or till ``give_up``, of the
        loop's clock: the patience the caller began). Meanwhile the progress's stage
        reads "waiting for the aggregator at ADDRESS", a step of its own (``Progress.wait``),
        and once the service answers the stage it interrupted is a step again
        (``Progress.resume``); one given up stays the attempt's last step. (Before, the stage
        text alone was overwritten, so the round's timeline kept the interrupted stage
        running through the wait.)

        A service that refuses to say (``AggregatorRefused``: a call it does not serve, an
        answer that breaks the wire contract) leaves the round unknown at once, charged at
        n_min, and the log says why and what to do: no wait changes such an answer. Before,
        it was waited on for ``recovery_patience_s``, or, for a refusal the client maps to
        its own error, the run failed with its attempt left open and uncharged. A refused
        control token (``ControlTokenRefused``) is raised: the attempt is settled by a
        coordinator that holds the service's token, which learns what became of the round.
        Before, it was settled unknown, charged at n_min: a coordinator restarted with the
        wrong --control-token-file charged every attempt it found open so."""
        where = f"the {plan.kind} at {self._control_address()}"
        try:
            return await self._patiently(plan, plan.service(self.aggregator).outcome, give_up)
        except ControlTokenRefused:
            raise  # (no settlement: ``ControlTokenRefused``)
        except AggregatorUnavailable as error:
            return AggregatorOutcome("unknown", reason=f"{where} stayed unreachable for "
                                     f"{self.recovery_patience_s:g} s ({error})")
        except AggregatorRefused as refused:
            log.error(f"{where} refused to say what became of a round: it is settled as "
                      "unknown now, charged at n_min as one whose unmasking nobody can rule "
                      "out", extra={"round_id": plan.round_id.decode(errors="replace"),
                                    "address": self._control_address(), "error": str(refused)})
            return AggregatorOutcome("unknown", reason=f"at {self._control_address()}, "
                                     f"{refused}")

    async def _patiently(self, plan: RoundPlan, call: Callable[[bytes], Awaitable[T]],
                         give_up: float | None = None) -> T:
        """``call(plan.round_id)`` at the service, tried again with backoff while it raises
        ``AggregatorUnavailable``, for up to ``recovery_patience_s`` (or till ``give_up``, of
        the loop's clock): no try starts past it but the first, and no pause runs past it;
        then its last error is raised. The progress shows the wait as ``_patient_outcome``
        says."""
        loop = asyncio.get_running_loop()
        if give_up is None:
            give_up = loop.time() + self.recovery_patience_s
        backoff = Backoff(self.aggregator_poll_s, AGGREGATOR_POLL_MAX_S)
        interrupted = None
        while True:
            try:
                answer = await call(plan.round_id)
            except AggregatorUnavailable:
                left = give_up - loop.time()
                if left <= 0:
                    raise
                if interrupted is None:
                    interrupted = self.progress.wait(
                        f"waiting for the aggregator at {self._control_address()}")
                await asyncio.sleep(min(backoff.pause(), left))
                if loop.time() >= give_up:
                    raise
            else:
                if interrupted is not None:
                    self.progress.resume(interrupted)
                return answer

    def _check_windows_ahead(self, plan: RoundPlan, devices: int) -> None:
        """RoundAborted when the plan's last deadline passed while it was drawn and signed:
        the stage windows are shorter than that work (``--stage-ms 5``, meant as seconds). The
        aggregation service would refuse the opening by the deadline's epoch milliseconds
        alone, which names neither the windows nor their unit."""
        windows = self._windows()
        last = max(c.config.deadlines.unmask for c in plan.cohorts)
        now = int(time.time() * 1000)
        if now < last:
            return
        took = now - (last - sum(windows))
        each = ", ".join(f"{flag(name)} {ms}" for name, ms in zip(WINDOW_FIELDS, windows,
                                                                 strict=True))
        # (a stretched attempt's windows are not the ones the flags set: say whose they are)
        whose = ("--stage-ms sets all five" if self._stretch == 1 else
                 f"these are the configured ones stretched x{self._stretch} after too few "
                 "devices in time; --stage-ms sets all five configured ones")
        raise RoundAborted(
            f"the round's stage windows ended before it could open: they last {sum(windows)} "
            f"ms in all ({each}), and drawing and signing its cohort of {devices} devices "
            f"took {took} ms; the windows are milliseconds: give longer ones ({whose})")

    def _deadlines(self) -> StageDeadlines:
        advertise, share, masked, consistency, unmask = self._windows()
        t0 = int(time.time() * 1000)
        t1 = t0 + advertise
        t2 = t1 + share
        t3 = t2 + masked
        t4 = t3 + consistency
        return StageDeadlines(t1, t2, t3, t4, t4 + unmask)

    def _round_config(self, query: RoundQuery, members: list[Member], round_id: bytes,
                      deadlines: StageDeadlines) -> tuple[RoundConfig, IdentityTree]:
        """The config of a cohort whose member i (1-based) holds ``members[i-1]``
        (identity key, c_pk, s_pk), and the Merkle tree over those keys whose root the config
        commits to (built once per attempt; each member's admission is its proof in it)."""
        s = self.config
        n = len(members)
        params = choose_parameters(n, s.expected_dropout, s.corrupt_fraction, Threat.LYING,
                                   devices=DEVICES_CHECK)
        graph_seed = os.urandom(32)
        identities = IdentityTree(round_id, graph_seed, members)
        config = RoundConfig(
            round_id=round_id, num_devices=n, dimension=query.domain_size,
            modulus_bits=params.modulus_bits, n_min=min(s.min_devices, n), k=params.k,
            t=params.t, graph_seed=graph_seed, deadlines=deadlines, device_auth=True,
            consistency_check=True, identity_root=identities.root,
        )
        return config, identities

    def _tasks(self, attempt: AttemptId, query: RoundQuery, cohort: SignedCohort,
               signed: SignedConfig, identities: IdentityTree, address: DeviceAddresses
               ) -> dict[int, pb.SignedTask]:
        """One task per member of the cohort: what they all receive serialized and signed
        once, then each member's own fields (``fedhh.rpc.tasks``)."""
        s = self.config
        cohort_tasks = CohortTasks(pb.Task(
            run_id=attempt.run_id, round=attempt.round, attempt=attempt.attempt,
            prefix_bits=query.prefix_bits,
            prefixes=cw.to_wire(query.prefixes, query.prefix_bits),
            deny_list=cw.to_wire(query.deny, query.max_bits), segment_bits=query.segment_bits,
            eps_local=self.round_epsilon(query.round - 1), codec=s.codec,
            max_bits=query.max_bits, selection=s.selection,
            prefix_conditioning=s.prefix_conditioning, aggregator_address=address.grpc,
            aggregator_web_url=address.web_url, aggregator_session_address=address.session,
            round_config=signed.payload,
            round_config_signature=signed.signature,
            deadline_unix_ms=cohort.config.deadlines.unmask,
        ), self.key)
        return {device_id: cohort_tasks.task(device_id, secagg_id, identities.proof(secagg_id))
                for secagg_id, device_id in enumerate(cohort.members, start=1)}


def run_tag(run_id: str, created_at: float) -> str:
    """What a run's round ids at the aggregation service carry beside its id: a digest of the
    id and when this store created the run. The service refuses an id it has seen finish
    (tombstones, its journal): before, ids were run/round/attempt alone, so a fresh store
    (or another coordinator) reusing a run id against the same service had each round's
    first attempt refused, 'has already finished'."""
    return hashlib.sha256(f"{run_id}\x00{created_at!r}".encode()).hexdigest()[:8]


def _round_id(attempt: AttemptId, tag: str) -> bytes:
    return _bounded(f"{attempt.run_id}/{attempt.round}/{attempt.attempt}/{tag}".encode())


def _shard_round_id(attempt: AttemptId, tag: str, shard: int) -> bytes:
    return _bounded(f"{attempt.run_id}/{attempt.round}/{attempt.attempt}/{tag}/s{shard}"
                    .encode())


def _bounded(round_id: bytes) -> bytes:
    """A round id within RoundConfig's 64 bytes (a long one by its digest)."""
    if len(round_id) <= 64:
        return round_id
    return b"h/" + hashlib.sha256(round_id).hexdigest()[:62].encode()


# The round summary's mark that the aggregation service accepted the attempt's round.
OPENED = "service_opened"
# The attempt's opening met a refused control token (``NetworkLink._token_refused``).
TOKEN_REFUSED = "control_token_refused"


def _verdict(outcome: AggregatorOutcome, opened: bool = False) -> Recovered:
    """What an attempt left unsettled costs, from the aggregator's word on it.

    A lost attempt carries no count: the aggregator's ``contributors`` is its own unverified
    word, and a larger count would shrink the charge of a sum that exists. The driver charges
    such an attempt at n_min, the smallest survivor set an honest device unmasks for (issue 28:
    charged at the aggregator's count before).

    ``opened``: the service accepted the round (``OPENED``). A journaling service that has no
    record of a round it accepted lost its record (its journal replaced: a new --state-dir, a
    volume lost, the file moved away as a damaged one; or the record pruned), so nobody can
    say whether unmasking began: charged. Before, "never opened" was taken at its word also
    then, and such an attempt was free whatever its devices had revealed."""
    if outcome.state == "never" and opened:
        return Recovered(Recovery.LOST, f"nobody can say whether unmasking began ({outcome.reason}"
                         f", although it had accepted the round: its record of it is lost)")
    if outcome.state == "never":
        return Recovered(Recovery.NOTHING, outcome.reason)
    if outcome.state == "running":
        return Recovered(Recovery.RESUME, "the aggregator is still running it")
    if outcome.state == "released" and outcome.sum_available:
        return Recovered(Recovery.RESUME, "the aggregator still holds its sum")
    if outcome.state == "released":
        return Recovered(Recovery.LOST, "its sum was delivered to a coordinator that stopped")
    if outcome.state == "aborted" and not outcome.reached_unmask:
        return Recovered(Recovery.NOTHING, f"the aggregator aborted it before unmasking "
                         f"({outcome.reason})")
    if outcome.state == "aborted":
        return Recovered(Recovery.LOST, f"the aggregator aborted it after unmasking began "
                         f"({outcome.reason})")
    return Recovered(Recovery.LOST, f"nobody can say whether unmasking began "
                     f"({outcome.reason or 'the aggregator does not know the round'})")


def too_few_hint(stages: dict[str, int], cohort: int, n_min: int,
                 advertise_ms: int | None = None, declined: int | None = None) -> str:
    """What an abort for too few devices adds to its reason (``RoundLink._too_few``): the
    devices each stage accepted, the cohort and n_min, and where to look. Devices that refuse
    a round send their aggregator only their decline (``SecureAggregation.Decline``: no keys,
    no report); devices that took part and then fell short at a later
    stage were late or dropped out. (The refusals are the device's: ``fedhh_device.budget``
    for the spent budget; before 2026-12-05 the list left out the budget and
    --max-eps-local, the reasons of a device that had taken part in earlier rounds.)
    Before, the hint named refusals alone, also for a round
    whose 400 devices all advertised keys and then mostly missed the 10 s key-sharing window
    on a loaded machine: their logs said "late", not "refused the round". ``advertise_ms``, the
    first stage's window, is named when that stage missed devices: one shorter than a task's
    way to its device (``--stage-ms 5``, meant as seconds) leaves every device late, the
    refusals alone named before. ``declined``, the members that gave up their seats as the
    service counted them (None: it does not say, an aggregator before the count), is named
    beside the stages' counts, and where it accounts for every member the first stage missed,
    that stage's window is not named: before, only the aggregator's metric told refusals from
    the late at the first stage."""
    counts = ", ".join(f"{stage.lower()} {n}" for stage, n in stages.items())
    accepted = f"accepted per stage: {counts}; " if counts else ""
    if declined is not None:
        accepted += f"{declined} declined; "
    numbers = list(stages.values())
    fell = fell_short(stages)
    late = ("; devices that took part and then missed a stage's window were late (on a "
            "loaded machine, or a large cohort) or dropped out: their logs say \"late for "
            "the round\" (outcome late) or \"secure aggregation failed\" (outcome "
            "timed_out), and longer windows (--stage-ms, or the stage's own) give them "
            "time") if fell else ""
    # (not where the declines account for every member the first stage missed)
    missed = cohort - (numbers[:1] or [0])[0]
    if advertise_ms is not None and missed > 0 and (declined is None or declined < missed):
        late += (f"; a device whose task reached it after the key-advertisement window "
                 f"closed, {advertise_ms} ms after the round opened (--advertise-ms, or "
                 "--stage-ms for every stage: milliseconds), was late")
    # A device refuses a task before it advertises its keys: where the first stage
    # accepted the whole cohort, none refused, and the list of refusals (before, named in
    # every such abort, three quarters of a 1,000-character reason) is left out.
    refusals = ("; devices that refuse a round (n_min below their --min-cohort, a local "
                "epsilon above their --max-eps-local, their own privacy budget spent: the "
                "report would take their local epsilons' sum past --lifetime-eps-local in the "
                "period, an (n, k, t) failing the lying-server bound they check at 5% corrupt "
                "and 30% dropout, as a low expected_dropout can choose, a task not signed by "
                "the coordinator key they enrolled with) only give up their seats: their "
                "logs say \"refused the round\" and why") if (numbers[:1] or [0])[0] < cohort \
        else ""
    return f" ({accepted}{cohort} devices in the cohort, n_min {n_min}{refusals}{late})"


def _aborted(reason: str, outcome: AggregatorOutcome) -> RoundAborted:
    """An attempt whose round the service accepted, given up (``_await_sum``)."""
    verdict = _verdict(outcome, opened=True)
    if verdict.verdict is Recovery.NOTHING:
        return RoundAborted(f"{reason}; {verdict.reason}")
    return RoundAborted(f"{reason}; {verdict.reason}", reached_unmask=True)
