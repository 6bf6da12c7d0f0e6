"""The evidence of a release and ``verify_release`` (issue 10: the coordinator verifies the
contributor count instead of trusting the aggregator's)."""

from __future__ import annotations

import dataclasses

import pytest
from secagg_testkit import assert_correct, reports_for

from fedhh.secagg import (
    ReleaseEvidence,
    ReleaseEvidenceError,
    Stage,
    verify_release,
)
from fedhh.secagg.messages import consistency_transcript, survivors_digest
from fedhh.secagg.primitives import ed25519_public_bytes
from fedhh.secagg.simulate import Cohort, DropoutPlan, make_cohort, run_round

N = 12


def _released(consistency_check: bool = True,
              dropouts: DropoutPlan | None = None) -> tuple[Cohort, ReleaseEvidence]:
    cohort = make_cohort(N, 16, N - 1, 7, n_min=6, device_auth=True,
                         consistency_check=consistency_check, seed=5)
    outcome = run_round(cohort, reports_for(N, 16), dropouts)
    assert_correct(outcome)
    assert outcome.result is not None
    return cohort, outcome.result.evidence


def _keys(cohort: Cohort) -> dict[int, bytes]:
    return {u: ed25519_public_bytes(k) for u, k in cohort.identity_keys.items()}


def test_an_honest_release_verifies_every_survivor() -> None:
    cohort, evidence = _released()
    assert evidence.survivors == tuple(range(1, N + 1))
    assert [i for i, _ in evidence.signatures] == list(range(1, N + 1))
    assert verify_release(cohort.config, _keys(cohort), evidence) == N


def test_a_survivor_that_did_not_sign_is_not_counted() -> None:
    # 3 drops after its masked input (in U3), before signing: the sum includes it, the count
    # does not (the charge errs on the larger side).
    cohort, evidence = _released(dropouts=DropoutPlan.at(Stage.CONSISTENCY_CHECK, {3}))
    assert 3 in evidence.survivors and 3 not in dict(evidence.signatures)
    assert verify_release(cohort.config, _keys(cohort), evidence) == N - 1


def test_an_inflated_count_is_refused() -> None:
    cohort, evidence = _released()
    inflated = dataclasses.replace(evidence, num_contributors=10 * N)
    with pytest.raises(ReleaseEvidenceError, match="claims 120 contributors but lists 12"):
        verify_release(cohort.config, _keys(cohort), inflated)


def test_invented_survivors_add_nothing() -> None:
    """An aggregator that pads U3 with devices that never signed it (and claims the padded
    count) gains nothing: each signature covers the U3 it was made for."""
    cohort = make_cohort(N, 16, N - 1, 7, n_min=6, device_auth=True, consistency_check=True,
                         seed=5)
    outcome = run_round(cohort, reports_for(N, 16),
                        DropoutPlan.at(Stage.MASKED_INPUT, {11, 12}))
    assert outcome.result is not None
    evidence = outcome.result.evidence
    assert verify_release(cohort.config, _keys(cohort), evidence) == N - 2
    padded = ReleaseEvidence(tuple(range(1, N + 1)), evidence.signatures, N)
    assert verify_release(cohort.config, _keys(cohort), padded) == 0


def test_signatures_by_other_keys_or_over_another_set_are_not_counted() -> None:
    cohort, evidence = _released()
    keys = _keys(cohort)
    keys[1], keys[2] = keys[2], keys[1]  # swapped registrations
    assert verify_release(cohort.config, keys, evidence) == N - 2
    # A signature over another survivor set does not count for this one.
    other = consistency_transcript(b"\x00" * 32, 4, survivors_digest((1, 2, 3)))
    forged = tuple((i, cohort.identity_keys[i].sign(other) if i == 4 else s)
                   for i, s in evidence.signatures)
    assert verify_release(cohort.config, _keys(cohort),
                          dataclasses.replace(evidence, signatures=forged)) == N - 1


@pytest.mark.parametrize(("change", "match"), [
    (dict(survivors=tuple(range(0, N))), "survivor id 0 is not in 1..12"),
    (dict(survivors=(*range(1, N), N + 1)), "survivor id 13 is not in 1..12"),
    (dict(survivors=(1, 1, *range(3, N + 1))), "survivor 1 is listed twice"),
    (dict(survivors=tuple(range(N, 0, -1))), "increasing order"),
    (dict(survivors=tuple(range(1, N + 1)) * 2, num_contributors=2 * N),
     "24 survivors listed, more than the cohort of 12"),
    (dict(survivors=tuple(range(1, 6)), num_contributors=5, signatures=()),
     "5 survivors < n_min=6"),
    (dict(survivors=[*range(1, N + 1)]), "must be tuples"),
    (dict(num_contributors=True), "claims True contributors"),
])
def test_malformed_evidence_is_refused(change: dict[str, object], match: str) -> None:
    cohort, evidence = _released()
    with pytest.raises(ReleaseEvidenceError, match=match):
        verify_release(cohort.config, _keys(cohort), dataclasses.replace(evidence, **change))


def test_signers_outside_u3_or_signing_twice_or_unregistered_are_refused() -> None:
    cohort = make_cohort(N, 16, N - 1, 7, n_min=6, device_auth=True, consistency_check=True,
                         seed=5)
    outcome = run_round(cohort, reports_for(N, 16), DropoutPlan.at(Stage.MASKED_INPUT, {12}))
    assert outcome.result is not None
    evidence = outcome.result.evidence
    keys = _keys(cohort)
    outsider = ((12, b"\x00" * 64), *evidence.signatures[1:])
    with pytest.raises(ReleaseEvidenceError, match="signer 12 is not in the released U3"):
        verify_release(cohort.config, keys, dataclasses.replace(evidence, signatures=outsider))
    twice = (evidence.signatures[0], evidence.signatures[0], *evidence.signatures[2:])
    with pytest.raises(ReleaseEvidenceError, match="signer 1 signs twice"):
        verify_release(cohort.config, keys, dataclasses.replace(evidence, signatures=twice))
    malformed = ((1, "not bytes"), *evidence.signatures[1:])
    with pytest.raises(ReleaseEvidenceError, match="pairs"):
        verify_release(cohort.config, keys, dataclasses.replace(evidence, signatures=malformed))
    del keys[5]
    with pytest.raises(ReleaseEvidenceError, match="no registered identity key for cohort "
                                                   "member 5"):
        verify_release(cohort.config, keys, evidence)


def test_a_round_without_the_consistency_check_cannot_be_verified() -> None:
    cohort, evidence = _released(consistency_check=False)
    assert evidence.signatures == ()
    with pytest.raises(ReleaseEvidenceError, match="without the consistency check"):
        verify_release(cohort.config, _keys(cohort), evidence)
