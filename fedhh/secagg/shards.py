"""Sharded rounds: one round's cohort split into shards, each an independent SecAgg+ instance,
and the check of a combined release (docs/scaling.md).

A round of n devices with a shard size m on W workers runs S = max(1, floor(n / m)) shards,
rounded down to a multiple of W when S >= W (shard j runs on worker j mod W, so every worker gets
S / W shards; 9 shards on 2 workers would give one worker 25% more devices than the other, and
a round waits for its slowest shard), with sizes differing by at most one, so each shard has at
least m members when S > 1. Each shard has its own signed
:class:`~fedhh.secagg.RoundConfig` (ids 1..n_j, its own graph seed, (k, t) for n_j, and the
Merkle root of its own members) and releases, like any round, only the sum over its own U3 and
only with at least its n_min survivors. The aggregation service's leader (the combiner) adds the
released shard sums and gives the coordinator one total with every shard's evidence.

The rules the coordinator applies to that evidence (:func:`verify_sharded_release`):

- every shard of the round is accounted for, in order; each released shard's evidence is
  checked against *its own* config with :func:`~fedhh.secagg.verify_release`, and must prove at
  least that shard's n_min contributors, or the whole total is refused unread (a shard sum over
  fewer devices would not hide its members; the total would expose the difference);
- at least one shard released (each released shard proves >= n_min, so the total is over at
  least the round's n_min); otherwise nothing was released;
- the round is charged once, at the sum of the verified counts; but if some shard reached
  unmasking and its sum is *not* in the total (it aborted after unmasking, or its worker lost
  it), a sum over that shard's devices may exist outside the total, and the round is charged at
  ``round_n_min`` instead (the smallest count any such sum can have, which gives the largest
  charge: conservative for every device of the round).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fedhh.secagg.config import RoundConfig
from fedhh.secagg.errors import ReleaseEvidenceError
from fedhh.secagg.messages import ReleaseEvidence
from fedhh.secagg.release import verify_release

__all__ = ["MAX_SHARDS", "ShardRelease", "ShardedVerdict", "shard_sizes", "split_cohort",
           "verify_sharded_release"]

MAX_SHARDS = 4096


def shard_sizes(n: int, shard_size: int | None, workers: int = 1) -> list[int]:
    """The sizes of the shards of a cohort of ``n`` devices: ``max(1, n // shard_size)``
    shards (one when ``shard_size`` is None), rounded down to a multiple of ``workers`` when
    there are at least that many (module docstring), sizes differing by at most one, largest
    first. With more than one shard each has at least ``shard_size`` members."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"a cohort has at least one device, got {n!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if shard_size is None:
        return [n]
    if not isinstance(shard_size, int) or shard_size < 1:
        raise ValueError(f"shard_size must be a positive integer, got {shard_size!r}")
    count = min(max(1, n // shard_size), MAX_SHARDS)
    if count >= workers:
        count -= count % workers
    base, extra = divmod(n, count)
    return [base + 1] * extra + [base] * (count - extra)


def split_cohort(cohort: Sequence[int], shard_size: int | None, workers: int = 1
                 ) -> list[list[int]]:
    """``cohort`` (device ids) in shards of :func:`shard_sizes`, each device placed uniformly
    at random (OS entropy), so which devices share a shard is nobody's choice but chance."""
    order = list(cohort)
    secrets.SystemRandom().shuffle(order)
    shards, start = [], 0
    for size in shard_sizes(len(order), shard_size, workers):
        shards.append(order[start:start + size])
        start += size
    return shards


@dataclass(frozen=True)
class ShardRelease:
    """What the combiner says became of one shard: ``released`` (its sum is in the total and
    ``evidence`` proves its contributors) or not, and whether its unmasking began."""

    round_id: bytes
    released: bool
    reached_unmask: bool
    evidence: ReleaseEvidence | None = None
    abort_reason: str = ""


@dataclass(frozen=True)
class ShardedVerdict:
    """The coordinator's reading of a combined release.

    ``proven``: distinct contributors whose signatures verify, summed over the released shards;
    ``contributors``: the sum of the released shards' |U3| (the number of reports in the total,
    which the estimator needs); ``charge``: the count the ledger is charged at (module
    docstring); ``refusal``: why the total must not be read (None: it may);
    ``lost``: round ids of shards that reached unmasking without being in the total."""

    proven: int
    contributors: int
    charge: int
    refusal: str | None
    lost: tuple[bytes, ...] = ()


def verify_sharded_release(configs: Sequence[RoundConfig],
                           identity_keys: Sequence[Mapping[int, bytes]],
                           shards: Sequence[ShardRelease], round_n_min: int) -> ShardedVerdict:
    """Check a combined release against the configs the coordinator signed for its shards
    (``configs[j]`` with ``identity_keys[j]``, by secure-aggregation id within shard j).

    Raises :class:`ReleaseEvidenceError` if the report does not follow the plan (a shard
    missing, added, reordered, or released without evidence). Evidence that proves too few
    contributors is not an exception: the verdict carries a ``refusal`` and the charge for a
    total that exists but must not be read: ``round_n_min``, not the count the evidence
    proves. A device unmasks only for a survivor set of at least its shard's n_min (the
    round's) that t of its neighbours signed, so every sum holding an honest device's report
    is over at least n_min reports, and n_min costs most among those counts; the proven count
    of a lying release (down to 0) would charge a sum of two and burn the run's budget.
    """
    if len(configs) != len(identity_keys):
        raise ValueError("one identity-key map per shard config")
    if len(shards) != len(configs):
        raise ReleaseEvidenceError(f"the release accounts for {len(shards)} shards, the round "
                                   f"has {len(configs)}")
    proven_by_shard: list[int] = []
    contributors = 0
    lost: list[bytes] = []
    problems: list[str] = []
    for j, (config, keys, shard) in enumerate(zip(configs, identity_keys, shards, strict=True)):
        if shard.round_id != config.round_id:
            raise ReleaseEvidenceError(f"shard {j} of the release is {shard.round_id!r}, the "
                                       f"round's is {config.round_id!r}")
        if not shard.released:
            if shard.reached_unmask:
                lost.append(config.round_id)
            continue
        if shard.evidence is None:
            raise ReleaseEvidenceError(f"shard {j} is released without evidence")
        try:
            proven = verify_release(config, keys, shard.evidence)
        except ReleaseEvidenceError as error:
            proven = 0
            problems.append(f"shard {j}: {error}")
        else:
            if proven < config.n_min:
                problems.append(f"shard {j} proves {proven} contributors < its n_min "
                                f"{config.n_min}")
        proven_by_shard.append(proven)
        contributors += shard.evidence.num_contributors
    if not proven_by_shard:
        raise ReleaseEvidenceError("a release with no released shard")
    total = sum(proven_by_shard)
    if problems:
        return ShardedVerdict(total, contributors, round_n_min, "; ".join(problems), tuple(lost))
    charge = min(total, round_n_min) if lost else total
    return ShardedVerdict(total, contributors, charge, None, tuple(lost))
