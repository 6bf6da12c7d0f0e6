"""Enrolled devices that cheat, against a real aggregator (outside probe, thirty-sixth stop).

The attackers hold real credentials (identity keys, admissions, round keys) and speak the real
session stream; only what they compute is malicious: an offset added to the masked vector
(a report that is not 0/1, "+1000 on one coordinate"), a corrupt share at the unmask stage,
and colluders who withhold their consistency signatures to push the round below n_min. Each
either aborts the round without releasing a sum (and with what the coordinator needs to
charge it: ``reached_unmask``) or is harmless to the honest devices' privacy; the one that goes
through, an offset that keeps every coordinate within [0, |U3|], is the documented limit of
secure aggregation without range proofs (docs/threat-model.md, "Malicious devices"), pinned
here so that a defence added later shows up as a changed test.

The aggregator runs in this process on 127.0.0.1 (OS-chosen ports); each round is seeded.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from aggregator_testkit import (
    COORDINATOR_PUBLIC,
    TOKEN,
    Cohort,
    aggregator,
    close_once_the_rest_answered,
    make_cohort,
    run,
)

from fedhh.errors import RoundAborted
from fedhh.rpc.aggregator_client import AggregatorControl, RoundOutcome
from fedhh.rpc.device_client import participate
from fedhh.secagg import (
    AggregateResult,
    ConsistencyRequest,
    ConsistencyResponse,
    MaskedInput,
    MaskedInputRequest,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
)
from fedhh.secagg.device import SecAggDevice

N, K, T, N_MIN, D = 8, 7, 5, 5, 16  # t = 5 > (k + 1) / 2: lying-server parameters
R = 1 << 16
ATTACKER = 1


def _cohort(name: str, windows_ms: tuple[int, int, int, int, int] = (600_000,) * 5) -> Cohort:
    # (stages far apart, as make_cohort's: each closes once the devices that answer have,
    # and a busy machine's slow devices are not cut by a 20 s deadline)
    return make_cohort(N, D, K, T, N_MIN, windows_ms=windows_ms, consistency_check=True,
                       round_id=b"probe36/" + name.encode(), seed=36)


def _offset(by: int) -> type[SecAggDevice]:
    """A device that adds ``by`` (mod R) to coordinate 0 of its correctly masked vector: the
    masks cancel as usual, so the released coordinate is the honest count plus ``by``."""

    class Offset(SecAggDevice):
        def masked_input(self, request: MaskedInputRequest, ones: np.ndarray) -> MaskedInput:
            honest = super().masked_input(request, ones)
            vector = honest.vector.copy()
            vector[0] = (int(vector[0]) + by) % R
            return MaskedInput(honest.session_id, honest.device_id, vector)

    return Offset


class _CorruptShare(SecAggDevice):
    """Answers the unmask stage with its first b-share zeroed."""

    def unmask(self, request: UnmaskRequest) -> UnmaskResponse:
        honest = super().unmask(request)
        shares = tuple(honest.b_shares)
        forged = ((shares[0][0], bytes(len(shares[0][1]))), *shares[1:])
        return UnmaskResponse(honest.session_id, honest.device_id, forged, honest.s_shares)


class _Unsigning(SecAggDevice):
    """Contributes its masked vector, then never signs the survivor set (it waits, as a
    device that stalls until the deadline does)."""

    def consistency_check(self, request: ConsistencyRequest) -> ConsistencyResponse:
        raise asyncio.CancelledError  # the device's task ends here, silently


async def _round(cohort: Cohort, kind: Callable[[int], type[SecAggDevice]],
                 silent: Mapping[int, Stage] | None = None
                 ) -> tuple[AggregateResult | RoundAborted, RoundOutcome]:
    """The round of ``cohort`` with device u of ``kind(u)``; a stage some devices are
    ``silent`` at closes once the others answered."""
    async with aggregator() as (agg, channel):
        control = AggregatorControl(channel, TOKEN)
        await control.open_round(cohort.signed)
        if silent:
            close_once_the_rest_answered(agg.registry.by_session(cohort.session_id), silent)
        fetch = asyncio.create_task(control.result(cohort.round_id, 60))

        async def device(u: int) -> None:
            cls = kind(u)
            dev = cls(cohort.signed, COORDINATOR_PUBLIC, u, identity_key=cohort.identity_keys[u],
                      admission=cohort.admissions[u], round_keys=cohort.round_keys[u])
            try:
                await participate(channel, dev, cohort.reports[u],
                                  identity_key=cohort.identity_keys[u],
                                  admission=cohort.admissions[u])
            except asyncio.CancelledError:
                if cls is not _Unsigning:
                    raise

        await asyncio.gather(*(asyncio.create_task(device(u)) for u in range(1, N + 1)))
        try:
            outcome: AggregateResult | RoundAborted = await fetch
        except RoundAborted as aborted:
            outcome = aborted
        return outcome, await control.outcome(cohort.round_id)


def _aborted(outcome: AggregateResult | RoundAborted, state: RoundOutcome, reason: str,
             reached_unmask: bool) -> None:
    assert isinstance(outcome, RoundAborted), outcome
    assert outcome.reason == reason
    assert state.state == "aborted" and state.abort_reason == reason
    assert not state.sum_available and state.num_contributors == 0
    # (what the coordinator charges by: an abort after unmasking began is charged at n_min)
    assert state.reached_unmask is reached_unmask


@pytest.mark.parametrize("what", ["plus_1000", "wraps_below_zero"])
def test_an_offset_beyond_the_contributor_count_aborts_with_no_sum(what: str) -> None:
    """+1000 on one coordinate, or a negative offset larger than the honest count (it wraps
    to R - 2 or R - 1): the unmasked coordinate exceeds |U3|, which no 0/1 reports can make, so the
    round aborts after unmasking (charged, since the aggregator computed the sum) and the sum
    is wiped, never released."""
    cohort = _cohort(what)
    honest = int(cohort.plaintext_sum(range(1, N + 1))[0]) - int(0 in cohort.reports[ATTACKER])
    attacker = _offset(1000 if what == "plus_1000" else R - (honest + 2))
    outcome, state = run(_round(cohort, lambda u: attacker if u == ATTACKER else SecAggDevice))
    _aborted(outcome, state, "output_out_of_range", reached_unmask=True)


def test_an_offset_within_range_is_released_undetected() -> None:
    """The documented limit (no range proofs): an offset that keeps the coordinate within
    [0, |U3|] is released as part of the sum. It moves the sum by at most |U3| per coordinate
    and reveals nothing about an honest device."""
    cohort = _cohort("within_range")
    total = cohort.plaintext_sum(range(1, N + 1))
    assert 1 <= total[0] <= N - 2
    attacker = _offset(2)
    outcome, state = run(_round(cohort, lambda u: attacker if u == ATTACKER else SecAggDevice))
    assert isinstance(outcome, AggregateResult), outcome
    expected = total.copy()
    expected[0] += 2
    assert np.array_equal(outcome.total.astype(np.int64), expected)
    assert state.state == "released" and outcome.num_contributors == N


def test_a_corrupt_unmask_share_aborts_before_any_mask_is_removed() -> None:
    """A wrong share is caught by the owner's commitment (b_u) or public key (s_u^SK): the
    secret is rebuilt around it from spare shares when the stage closed with some, else the
    round aborts; either way no wrong sum is released (which of the two depends on how many
    answers arrived before the early close: tests/security/test_malicious_shares.py
    drives each case)."""
    cohort = _cohort("corrupt_share")
    outcome, state = run(_round(cohort,
                                lambda u: _CorruptShare if u == ATTACKER else SecAggDevice))
    if isinstance(outcome, RoundAborted):
        _aborted(outcome, state, "corrupt_share", reached_unmask=True)
        return
    assert np.array_equal(outcome.total.astype(np.int64), cohort.plaintext_sum(range(1, N + 1)))


@pytest.mark.parametrize(("colluders", "abort"), [
    (2, None), (3, "too_few_share_holders"), (4, "too_few_devices")])
def test_colluders_withholding_signatures_never_get_a_sum_below_n_min(colluders: int,
                                                                      abort: str | None) -> None:
    """Colluders contribute their masked vectors, then do not sign the survivor set (the
    stage closes once the others signed: before, at a deadline 3.5 s after the cohort was
    made, which all eight had to reach the stage by). With enough signers the round releases,
    its evidence proving only the signers; with fewer than n_min signers, or too few for an
    honest device's t partner signatures, it aborts before any unmask request (nothing to
    charge), whatever U3 was."""
    cohort = _cohort(f"unsigned_{colluders}")
    outcome, state = run(_round(cohort,
                                lambda u: _Unsigning if u <= colluders else SecAggDevice,
                                dict.fromkeys(range(1, colluders + 1),
                                              Stage.CONSISTENCY_CHECK)))
    if abort is not None:
        _aborted(outcome, state, abort, reached_unmask=False)
        return
    assert isinstance(outcome, AggregateResult), outcome
    assert outcome.survivors == tuple(range(1, N + 1))
    assert np.array_equal(outcome.total.astype(np.int64),
                          cohort.plaintext_sum(range(1, N + 1)))
    assert sorted(i for i, _ in outcome.signatures) == list(range(colluders + 1, N + 1))
    assert len(outcome.signatures) >= N_MIN
    assert Stage.UNMASK in dict(state.stage_devices)
