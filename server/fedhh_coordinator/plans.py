"""One plan object per round mode: what the coordinator signed for an attempt, and how the
release it gets back is judged and settled (docs/scaling.md, "Sharded rounds").

An attempt is one or more signed cohorts (:class:`SignedCohort`): the whole cohort at a single
aggregator (:class:`UnshardedPlan`), or one shard per worker behind a combiner
(:class:`ShardedPlan`). A plan is built when the attempt opens, stored in the attempt's round
summary (:meth:`annotation`) before the aggregation service hears of it, and rebuilt from
there after a restart (:func:`plan_from_annotation`) with the identity keys of its members
read back from the store: it holds what settling the attempt needs, so a restarted coordinator
judges a release exactly as the one that opened the round would have.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fedhh.secagg import ReleaseEvidence, ReleaseEvidenceError, RoundConfig, verify_release
from fedhh.secagg.config import SignedConfig
from fedhh.secagg.shards import ShardRelease, verify_sharded_release
from fedhh_coordinator.aggregation import AggregatorApi, RoundService
from fedhh_coordinator.store import Store, stored_members, stored_members_field

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SignedCohort:
    """A signed secure-aggregation cohort: its config, its members' device ids (secure-
    aggregation id i is ``members[i-1]``), their identity keys by secure-aggregation id, and
    the combiner's worker that serves it (0 at a single aggregator)."""

    config: RoundConfig
    members: tuple[int, ...]
    identity_keys: Mapping[int, bytes]
    worker: int = 0

    def stored(self) -> dict[str, Any]:
        return {"round_config": self.config.to_bytes().hex(),
                **stored_members_field(self.members)}

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any], store: Store, worker: int = 0) -> SignedCohort:
        """The cohort as stored; a member whose record is gone has no identity key (its
        signature cannot count)."""
        members = stored_members(stored)
        if members is None:
            raise KeyError("the stored cohort names no members")
        keys = {}
        for i, device_id in enumerate(members, start=1):
            record = store.device(device_id)
            if record is not None:
                keys[i] = record[1]
        return cls(RoundConfig.from_bytes(bytes.fromhex(stored["round_config"])), members, keys,
                   worker)


@dataclass(frozen=True)
class ReleaseJudgement:
    """The coordinator's reading of a release: ``refusal`` None, the sum may be read and the
    ledger is charged at ``charge`` contributors; otherwise the sum exists but is never read,
    charged at ``charge`` (None: at n_min, which the round driver applies). ``proven``: the
    contributors whose signatures verify. ``over``: whose reports the sum holds, as the
    evidence names them (each released part's round id and survivors): a sum read again
    under one charge must be over the same reports, not only of the same charge (a total
    with a shard lost outside it is charged n_min over whichever shards it holds)."""

    charge: int | None
    proven: int = 0
    refusal: str | None = None
    over: tuple[tuple[bytes, tuple[int, ...]], ...] = ()

    @property
    def over_digest(self) -> str:
        """``over`` as the charge stores it for a restart to compare (``fedhh.rounds``
        ``ChargeHook``): SHA-256 over a canonical encoding of the parts, each part's round id
        and survivors sorted, so that the same reports give the same digest in any order."""
        parts = sorted((round_id.hex(), sorted(map(int, survivors)))
                       for round_id, survivors in self.over)
        encoded = json.dumps(parts, separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(encoded).hexdigest()


class RoundPlan(Protocol):
    """One attempt's secure aggregation in one round mode."""

    @property
    def round_id(self) -> bytes: ...

    @property
    def cohorts(self) -> Sequence[SignedCohort]: ...

    @property
    def deadline_ms(self) -> int:
        """When the last cohort's unmasking stage ends (unix ms)."""
        ...

    kind: str  # the service that runs it, as the operator knows it ("aggregator", "combiner")
    released: str  # what it releases ("sum", "total")

    def annotation(self) -> dict[str, Any]:
        """What a restart needs to settle the attempt (the round summary's fields)."""
        ...

    def service(self, api: AggregatorApi) -> RoundService[Any]: ...

    async def open(self, api: AggregatorApi, signed: Sequence[SignedConfig]) -> None:
        """Open the round at the service; ``signed[j]`` is ``cohorts[j]``'s config, signed."""
        ...

    def judge(self, release: Any) -> ReleaseJudgement: ...


@dataclass(frozen=True)
class UnshardedPlan:
    """The whole cohort at a single aggregator, which releases one sum."""

    cohort: SignedCohort
    kind = "aggregator"
    released = "sum"

    @property
    def round_id(self) -> bytes:
        return self.cohort.config.round_id

    @property
    def cohorts(self) -> tuple[SignedCohort]:
        return (self.cohort,)

    @property
    def deadline_ms(self) -> int:
        return self.cohort.config.deadlines.unmask

    def annotation(self) -> dict[str, Any]:
        return {"aggregator_round_id": self.round_id.decode(), **self.cohort.stored(),
                "deadline_unix_ms": self.deadline_ms}

    def service(self, api: AggregatorApi) -> RoundService[ReleaseEvidence]:
        return api.single

    async def open(self, api: AggregatorApi, signed: Sequence[SignedConfig]) -> None:
        (config,) = signed
        await api.single.open_round(config)

    def judge(self, release: ReleaseEvidence) -> ReleaseJudgement:
        """Charged at the number of contributors the evidence proves
        (``fedhh.secagg.verify_release``: survivors' signatures over U3). Evidence that does
        not prove at least n_min contributors is refused, charged at n_min, not at what it
        proves: a device unmasks only for a survivor set of at least n_min that t of its
        neighbours signed, so any sum holding an honest device's report is over n_min reports
        or more, and n_min costs most among those counts. Charging the proven count (down to
        2) would let one lying release burn the run's budget."""
        config = self.cohort.config
        try:
            proven = verify_release(config, self.cohort.identity_keys, release)
        except ReleaseEvidenceError as error:
            return ReleaseJudgement(config.n_min, 0, str(error))
        if proven < config.n_min:
            return ReleaseJudgement(config.n_min, proven, f"the release proves {proven} "
                                    f"contributors < n_min {config.n_min}")
        return ReleaseJudgement(proven, proven, over=((config.round_id, release.survivors),))


@dataclass(frozen=True)
class ShardedPlan:
    """One shard per cohort, each on a combiner's worker; the combiner releases one total
    with every shard's evidence, checked shard by shard against the configs signed here and
    charged once (``fedhh.secagg.shards.verify_sharded_release``)."""

    round_id: bytes
    cohorts: tuple[SignedCohort, ...]
    min_devices: int
    kind = "combiner"
    released = "total"

    @property
    def deadline_ms(self) -> int:
        return max(c.config.deadlines.unmask for c in self.cohorts)

    def annotation(self) -> dict[str, Any]:
        return {"aggregator_round_id": self.round_id.decode(), "sharded": True,
                "shards": [{**c.stored(), "worker": c.worker} for c in self.cohorts],
                "deadline_unix_ms": self.deadline_ms}

    def service(self, api: AggregatorApi) -> RoundService[list[ShardRelease]]:
        return api.combiner

    async def open(self, api: AggregatorApi, signed: Sequence[SignedConfig]) -> None:
        await api.combiner.open_round(
            self.round_id, [(s, c.worker) for s, c in zip(signed, self.cohorts, strict=True)])

    def judge(self, release: list[ShardRelease]) -> ReleaseJudgement:
        """Charged at the count the shards' evidence proves (n_min instead if a shard reached
        unmasking outside the total). A release that does not follow the plan, or a shard that
        proves fewer than its n_min, refuses the total: the attempt is charged and its total
        never read."""
        try:
            verdict = verify_sharded_release([c.config for c in self.cohorts],
                                             [c.identity_keys for c in self.cohorts], release,
                                             self.min_devices)
        except ReleaseEvidenceError as error:
            return ReleaseJudgement(None, 0, str(error))
        if verdict.refusal is None and verdict.lost:
            log.warning("a shard reached unmasking outside the total: charged at n_min",
                        extra={"round_id": self.round_id.decode(errors="replace"),
                               "lost": [r.decode(errors="replace") for r in verdict.lost]})
        return ReleaseJudgement(verdict.charge, verdict.proven, verdict.refusal,
                                tuple((shard.round_id, shard.evidence.survivors)
                                      for shard in release
                                      if shard.released and shard.evidence is not None))


def plan_from_annotation(annotation: Mapping[str, Any], store: Store, min_devices: int
                         ) -> RoundPlan:
    """The plan an attempt's round summary records (:meth:`RoundPlan.annotation`)."""
    if annotation.get("sharded"):
        return ShardedPlan(annotation["aggregator_round_id"].encode(),
                           tuple(SignedCohort.from_stored(s, store, int(s["worker"]))
                                 for s in annotation["shards"]), min_devices)
    return UnshardedPlan(SignedCohort.from_stored(annotation, store))


def stored_cohort(annotation: Mapping[str, Any]) -> tuple[frozenset[int], int] | None:
    """The device ids an attempt's stored plan names (every shard's) and when its last stage
    ends (``deadline_unix_ms``, Unix ms), as :meth:`RoundPlan.annotation` stored them; None
    if it names none (an attempt that ended before its cohort was signed). A restarted
    coordinator holds its first check-in for them (``Lobby.expect``)."""
    if "deadline_unix_ms" not in annotation:
        return None
    parts = annotation.get("shards") if annotation.get("sharded") else [annotation]
    members: set[int] = set()
    for part in parts or ():
        named = stored_members(part)
        if named is not None:
            members.update(named)
    if not members:
        return None
    return frozenset(members), int(annotation["deadline_unix_ms"])
