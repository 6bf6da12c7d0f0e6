"""A combiner's journal whose running rounds do not fit the combiner it restarts (a shard
naming a worker past its --worker list, configs signed by another coordinator) is refused at
start, naming the file and the round, the file unchanged. Before, the running round was taken
over: its collector failed on the missing worker (an ERROR traceback, the round aborted "the
combiner failed collecting it"), and configs another coordinator signed were collected for this
one. A finished round keeps its record whatever the list (its shard on a worker no longer
listed answers GetOutcome as unknown): before, its missing worker was GetOutcome's IndexError,
and then (7f5ebde) the whole journal was refused, leaving an operator who shrank --worker
only the choice of dropping every round's record."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from aggregator_testkit import COORDINATOR_PUBLIC, combiner_journal, make_cohort
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh_aggregator.combiner import CombinerRegistry
from fedhh_aggregator.control import ShardedRoundControl
from fedhh_aggregator.journal import Journal
from fedhh_aggregator.outcomes import OutcomeState

ROUND = b"run/1/combined"


def _journal(directory: Path, worker: int, finished: bool, other_key: bool = False) -> Path:
    key = Ed25519PrivateKey.from_private_bytes(b"\x02" * 32) if other_key else None
    cohort = make_cohort(4, 16, 3, 2, n_min=3, consistency_check=True, round_id=b"run/1/s0",
                         **({"coordinator_key": key} if key else {}))
    shard = {"config": cohort.signed.payload.hex(), "signature": cohort.signed.signature.hex(),
             "worker": worker}
    return combiner_journal(directory, ROUND, shard, finished)


@pytest.mark.parametrize(("worker", "finished", "other_key", "why"), [
    (3, False, False, "shard 0 names worker 3; there are 2"),
    (1, False, True, "shard 0's config is not signed by the coordinator"),
])
def test_a_journal_that_does_not_fit_the_combiner_is_refused_unchanged(
        tmp_path: Path, worker: int, finished: bool, other_key: bool, why: str) -> None:
    path = _journal(tmp_path / "state", worker, finished, other_key)
    before = hashlib.md5(path.read_bytes()).hexdigest()

    async def restore() -> None:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, [object(), object()],  # type: ignore[arg-type]
                            journal=Journal(tmp_path / "state"))
        try:
            combiner.restore()
        finally:
            combiner.close()

    with pytest.raises(ConfigError) as refused:
        asyncio.run(restore())
    said = str(refused.value)
    assert said.startswith(f"{path}: round 'run/1/combined' does not fit this combiner ({why})")
    assert "move the file away" in said
    assert hashlib.md5(path.read_bytes()).hexdigest() == before


def test_a_finished_round_of_another_coordinator_key_is_kept_as_its_tombstone(
        tmp_path: Path) -> None:
    """Its signatures are not checked: the tombstone only answers for it."""
    _journal(tmp_path / "state", 1, finished=True, other_key=True)

    async def restore() -> None:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, [object(), object()],  # type: ignore[arg-type]
                            journal=Journal(tmp_path / "state"))
        combiner.restore()
        assert ROUND in combiner._tombstones
        combiner.close()

    asyncio.run(restore())


def test_a_finished_round_on_a_worker_no_longer_listed_keeps_its_record(tmp_path: Path) -> None:
    _journal(tmp_path / "state", 3, finished=True)

    async def restore_and_ask() -> tuple[OutcomeState, list[OutcomeState]]:
        combiner = CombinerRegistry(COORDINATOR_PUBLIC, [object(), object()],  # type: ignore[arg-type]
                            journal=Journal(tmp_path / "state"))
        try:
            combiner.restore()
            outcome = await ShardedRoundControl(combiner).outcome(ROUND)
        finally:
            combiner.close()
        return outcome.state, [shard.state for shard in outcome.shards]

    assert asyncio.run(restore_and_ask()) == (OutcomeState.RELEASED, [OutcomeState.UNKNOWN])
    again = Journal(tmp_path / "state")
    assert ROUND in again.load()  # (the record is still there for the next start)
    again.close()
