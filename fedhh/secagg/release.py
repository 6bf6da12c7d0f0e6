"""Checking the proof of contributors that travels with a released sum.

The privacy ledger charges a round by its number of contributors, so the coordinator must not
take the aggregator's count on trust: an inflated count shrinks the charge. With the consistency
check (Bonawitz et al. 2017, section 4, round "ConsistencyCheck"), every member of U3 signs
``consistency_transcript(session_id, id, survivors_digest(U3))`` with its registered identity
key before any unmask share is revealed, and only after its masked input was sent (a device
signs a U3 only in that state, and only one that contains itself). The aggregator hands U3 and
those signatures to the coordinator with the sum (:class:`~fedhh.secagg.ReleaseEvidence`).

:func:`verify_release` counts the distinct cohort members whose signature verifies over the
released U3 under the identity key the coordinator registered for them. The count is at most
|U3|; a survivor that did not sign (it went silent after its masked input) is not counted, so
the count errs on the side of a larger charge. Malformed evidence raises
:class:`~fedhh.secagg.ReleaseEvidenceError`; a signature that merely fails to verify is not
counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from fedhh.secagg.config import RoundConfig, session_id_of
from fedhh.secagg.errors import ReleaseEvidenceError
from fedhh.secagg.messages import ReleaseEvidence, consistency_transcript, survivors_digest
from fedhh.secagg.primitives import ed25519_verify

__all__ = ["verify_release"]


def _is_id(value: object, n: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= n


def verify_release(config: RoundConfig, identity_keys: Mapping[int, bytes],
                   evidence: ReleaseEvidence) -> int:
    """The number of distinct cohort members whose consistency signature over the released U3
    verifies under ``identity_keys[id]`` (raw Ed25519 public keys by secure-aggregation id).

    Raises :class:`ReleaseEvidenceError` if the evidence is malformed: the round has no
    consistency check, U3 is not a strictly increasing list of ids in 1..n, is larger than the
    cohort or smaller than n_min, the claimed count is not |U3|, a signer is outside U3 or signs
    twice, or a signer has no registered key.
    """
    if not config.consistency_check:
        raise ReleaseEvidenceError(
            "the round ran without the consistency check: its survivors signed nothing, so its "
            "contributor count cannot be verified")
    if not isinstance(evidence, ReleaseEvidence):
        raise ReleaseEvidenceError(f"expected a ReleaseEvidence, got {type(evidence).__name__}")
    n = config.num_devices
    survivors, signatures = evidence.survivors, evidence.signatures
    if not isinstance(survivors, tuple) or not isinstance(signatures, tuple):
        raise ReleaseEvidenceError("survivors and signatures must be tuples")
    if len(survivors) > n:
        raise ReleaseEvidenceError(
            f"{len(survivors)} survivors listed, more than the cohort of {n}")
    outside = [i for i in survivors if not _is_id(i, n)]
    if outside:
        raise ReleaseEvidenceError(f"survivor id {outside[0]!r} is not in 1..{n}")
    if len(set(survivors)) != len(survivors):
        repeated = next(a for a, b in itertools.pairwise(sorted(survivors)) if a == b)
        raise ReleaseEvidenceError(f"survivor {repeated} is listed twice")
    if any(a > b for a, b in itertools.pairwise(survivors)):
        raise ReleaseEvidenceError("survivors must be listed in increasing order")
    claimed = evidence.num_contributors
    if (not isinstance(claimed, int) or isinstance(claimed, bool)
            or claimed != len(survivors)):
        raise ReleaseEvidenceError(
            f"the aggregator claims {claimed!r} contributors but lists {len(survivors)} "
            "survivors")
    if len(survivors) < config.n_min:
        raise ReleaseEvidenceError(
            f"{len(survivors)} survivors < n_min={config.n_min}: nothing should have been "
            "released")
    if len(signatures) > len(survivors):
        raise ReleaseEvidenceError(
            f"{len(signatures)} signatures for {len(survivors)} survivors")
    members = set(survivors)
    session_id = session_id_of(config)
    digest = survivors_digest(survivors)
    signers: set[int] = set()
    verified = 0
    for entry in signatures:
        if not isinstance(entry, tuple) or len(entry) != 2 or not isinstance(entry[1], bytes):
            raise ReleaseEvidenceError("signatures must be (device id, bytes) pairs")
        signer, signature = entry
        if not _is_id(signer, n) or signer not in members:
            raise ReleaseEvidenceError(f"signer {signer!r} is not in the released U3")
        if signer in signers:
            raise ReleaseEvidenceError(f"signer {signer} signs twice")
        signers.add(signer)
        key = identity_keys.get(signer)
        if key is None:
            raise ReleaseEvidenceError(f"no registered identity key for cohort member {signer}")
        if ed25519_verify(key, signature, consistency_transcript(session_id, signer, digest)):
            verified += 1
    return verified
