"""Sharded rounds' rules (fedhh.secagg.shards, docs/scaling.md): how a cohort is split, and the
documented shard-failure rule the coordinator applies to a combined release: which totals it may
read, and the one count each round is charged at."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from fedhh.secagg import ReleaseEvidence, ReleaseEvidenceError, RoundConfig, StageDeadlines
from fedhh.secagg.config import session_id_of
from fedhh.secagg.messages import consistency_transcript, survivors_digest
from fedhh.secagg.primitives import ed25519_from_seed, ed25519_public_bytes
from fedhh.secagg.shards import (
    MAX_SHARDS,
    ShardRelease,
    shard_sizes,
    split_cohort,
    verify_sharded_release,
)

SHARD = 8  # devices per shard in the release tests
N_MIN = 5  # each shard's n_min, and the round's


# ---- splitting ------------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "size", "expected"), [
    (200, 100, [100, 100]),
    (299, 100, [150, 149]),  # never a shard below shard_size: the remainder is spread
    (99, 100, [99]),  # fewer than one shard's worth: one shard of them all
    (1000, 300, [334, 333, 333]),
    (7, None, [7]),
])
def test_shard_sizes_differ_by_at_most_one_and_none_is_below_the_shard_size(
        n: int, size: int | None, expected: list[int]) -> None:
    assert shard_sizes(n, size) == expected


@pytest.mark.parametrize(("n", "size", "workers", "expected"), [
    (49_204, 5_000, 2, [6151, 6151, 6151, 6151, 6150, 6150, 6150, 6150]),  # 9 -> 8: 4 each
    (50_000, 5_000, 2, [5_000] * 10),  # already a multiple
    (900, 100, 4, [113, 113, 113, 113, 112, 112, 112, 112]),  # 9 -> 8
    (300, 100, 4, [100, 100, 100]),  # fewer shards than workers: kept, one each
    (700, 100, 3, [117, 117, 117, 117, 116, 116]),  # 7 -> 6
])
def test_the_number_of_shards_is_a_multiple_of_the_workers_so_each_gets_as_many(
        n: int, size: int, workers: int, expected: list[int]) -> None:
    sizes = shard_sizes(n, size, workers)
    assert sizes == expected and sum(sizes) == n and min(sizes) >= size
    per_worker = Counter()
    for j, shard in enumerate(split_cohort(list(range(n)), size, workers)):
        per_worker[j % workers] += len(shard)
    assert max(per_worker.values()) - min(per_worker.values()) <= len(sizes) // workers


def test_bad_worker_counts_are_refused_with_the_value() -> None:
    with pytest.raises(ValueError, match="workers must be a positive integer, got 0"):
        shard_sizes(100, 10, 0)


def test_the_number_of_shards_is_capped() -> None:
    sizes = shard_sizes(10 * MAX_SHARDS + 5, 2)
    assert len(sizes) == MAX_SHARDS and sum(sizes) == 10 * MAX_SHARDS + 5


@pytest.mark.parametrize(("n", "size"), [(0, 10), (-1, 10), (10, 0), (10, -3)])
def test_bad_sizes_are_refused_with_the_value(n: int, size: int) -> None:
    with pytest.raises(ValueError, match=str(n if n < 1 else size)):
        shard_sizes(n, size)


def test_split_cohort_is_a_partition_in_shard_sizes() -> None:
    cohort = list(range(1000, 1523))
    shards = split_cohort(cohort, 100)
    assert [len(s) for s in shards] == shard_sizes(523, 100)
    assert sorted(d for s in shards for d in s) == cohort


def test_split_cohort_places_devices_at_random() -> None:
    """Device 0 of a cohort of 40 in 4 shards lands in each shard with probability 1/4. In 400
    splits every shard gets it at least 50 times except with probability < 4 * P[Bin(400, 1/4)
    < 50] < 1e-9 (a fixed placement would put it in one shard every time)."""
    seen = Counter(next(j for j, s in enumerate(split_cohort(list(range(40)), 10)) if 0 in s)
                   for _ in range(400))
    assert sorted(seen) == [0, 1, 2, 3] and min(seen.values()) >= 50, seen


# ---- the release rule -----------------------------------------------------------------------
def _deadlines() -> StageDeadlines:
    return StageDeadlines(1, 2, 3, 4, 5)


def _shard(j: int) -> tuple[RoundConfig, dict[int, bytes], dict[int, object]]:
    """Shard j's config (ids 1..SHARD) with its members' identity keys (public, private)."""
    private = {i: ed25519_from_seed(bytes([j, i]) * 16) for i in range(1, SHARD + 1)}
    config = RoundConfig(round_id=f"r/1/1/s{j}".encode(), num_devices=SHARD, dimension=4,
                         modulus_bits=16, n_min=N_MIN, k=SHARD - 1, t=4,
                         graph_seed=bytes([j]) * 32, deadlines=_deadlines(), device_auth=True,
                         consistency_check=True, identity_root=bytes([j + 1]) * 32)
    return config, {i: ed25519_public_bytes(k) for i, k in private.items()}, private


def _evidence(config: RoundConfig, private: dict[int, object], survivors: list[int],
              signers: list[int] | None = None) -> ReleaseEvidence:
    """U3 = ``survivors``, signed by ``signers`` (default: every survivor), honestly."""
    digest = survivors_digest(tuple(survivors))
    session = session_id_of(config)
    signatures = tuple((i, private[i].sign(consistency_transcript(session, i, digest)))  # type: ignore[attr-defined]
                       for i in (survivors if signers is None else signers))
    return ReleaseEvidence(tuple(survivors), signatures, len(survivors))


class Round:
    """A round of ``shards`` shards of SHARD devices."""

    def __init__(self, shards: int) -> None:
        built = [_shard(j) for j in range(shards)]
        self.configs = [c for c, _, _ in built]
        self.keys = [k for _, k, _ in built]
        self.private = [p for _, _, p in built]

    def released(self, j: int, survivors: int = SHARD, signers: int | None = None
                 ) -> ShardRelease:
        ids = list(range(1, survivors + 1))
        evidence = _evidence(self.configs[j], self.private[j], ids,
                             None if signers is None else ids[:signers])
        return ShardRelease(self.configs[j].round_id, True, True, evidence)

    def aborted(self, j: int, reached_unmask: bool) -> ShardRelease:
        return ShardRelease(self.configs[j].round_id, False, reached_unmask, None, "aborted")

    def verify(self, shards: list[ShardRelease], round_n_min: int = N_MIN):  # type: ignore[no-untyped-def]
        return verify_sharded_release(self.configs, self.keys, shards, round_n_min)


def test_every_shard_released_is_charged_once_at_the_sum_of_their_proven_counts() -> None:
    r = Round(3)
    verdict = r.verify([r.released(0), r.released(1, survivors=6), r.released(2, survivors=7)])
    assert verdict.refusal is None and verdict.lost == ()
    assert (verdict.proven, verdict.contributors, verdict.charge) == (21, 21, 21)


def test_a_survivor_that_did_not_sign_is_in_the_total_but_not_in_the_charge_count() -> None:
    r = Round(2)
    verdict = r.verify([r.released(0), r.released(1, survivors=8, signers=7)])
    assert verdict.refusal is None
    # 16 reports in the total (the estimator's n); 15 proven (the charge errs larger).
    assert (verdict.contributors, verdict.proven, verdict.charge) == (16, 15, 15)


def test_a_shard_aborted_before_unmasking_drops_out_at_no_cost() -> None:
    r = Round(3)
    verdict = r.verify([r.released(0), r.aborted(1, reached_unmask=False), r.released(2)])
    assert verdict.refusal is None and verdict.lost == ()
    assert (verdict.proven, verdict.charge) == (16, 16)


def test_a_shard_lost_after_unmasking_charges_the_round_at_its_n_min() -> None:
    """Its sum may exist outside the total: every device of the round is charged as if its
    round had only n_min contributors (the largest charge any sum of the round can cost)."""
    r = Round(3)
    verdict = r.verify([r.released(0), r.aborted(1, reached_unmask=True), r.released(2)],
                       round_n_min=N_MIN)
    assert verdict.refusal is None
    assert verdict.lost == (r.configs[1].round_id,)
    assert (verdict.proven, verdict.charge) == (16, N_MIN)


def test_a_shard_that_proves_fewer_than_its_n_min_refuses_the_whole_total() -> None:
    """Its sum inside the total would expose its few members to whoever reads the total next to
    the others' sums; the total is not read, and charged at n_min: a device unmasks only for
    at least n_min signed survivors, so no sum holding an honest report is smaller (issue 28:
    charged at the 4 proven before, which a lying release could push down to 2)."""
    r = Round(2)
    verdict = r.verify([r.released(0), r.released(1, survivors=6, signers=4)])
    assert verdict.refusal is not None and "shard 1 proves 4 contributors < its n_min 5" in \
        verdict.refusal
    assert verdict.charge == N_MIN


def test_malformed_shard_evidence_refuses_the_total() -> None:
    r = Round(2)
    good = r.released(1)
    assert good.evidence is not None
    inflated = dataclasses.replace(good, evidence=dataclasses.replace(good.evidence,
                                                                       num_contributors=80))
    verdict = r.verify([r.released(0), inflated])
    assert verdict.refusal is not None and "shard 1" in verdict.refusal
    assert verdict.charge == N_MIN  # whatever the lie proves: n_min


def test_a_release_with_no_released_shard_is_not_a_release() -> None:
    r = Round(2)
    with pytest.raises(ReleaseEvidenceError, match="no released shard"):
        r.verify([r.aborted(0, reached_unmask=True), r.aborted(1, reached_unmask=False)])


@pytest.mark.parametrize("change", ["missing", "extra", "reordered", "no evidence"])
def test_a_release_that_does_not_follow_the_plan_is_refused(change: str) -> None:
    r = Round(2)
    shards = [r.released(0), r.released(1)]
    if change == "missing":
        shards = shards[:1]
    elif change == "extra":
        shards = [*shards, r.released(1)]
    elif change == "reordered":
        shards = shards[::-1]
    else:
        shards[1] = dataclasses.replace(shards[1], evidence=None)
    with pytest.raises(ReleaseEvidenceError):
        r.verify(shards)


def test_evidence_signed_for_another_shard_counts_nothing() -> None:
    """Shard 0's signatures replayed as shard 1's: each covers its own shard's session."""
    r = Round(2)
    replayed = dataclasses.replace(r.released(0), round_id=r.configs[1].round_id)
    verdict = r.verify([r.released(0), replayed])
    assert verdict.refusal is not None and "shard 1 proves 0 contributors" in verdict.refusal
