"""PruneHH: the adaptive threshold of the paper's Algorithm "Pruning algorithm for confident
heavy hitter detection".

Given estimates over a domain D and the law of a zero-count item's estimate (a ``NullTail`` with
scale sigma), start at threshold tau_0 * sigma with E = P[null estimate > tau_0 sigma]; keep the
elements whose estimate exceeds the threshold; while the expected number of false positives
``E * |D|`` exceeds ``gamma`` times the number kept, multiply E by eta (< 1) and move the threshold
to the (1 - E) quantile of the null law, so tau never falls. With the Gaussian tail this is
exactly the paper's ``E = 1 - Phi(tau sigma)``, ``tau = z_(1-E)``.

The paper's loop does not terminate when nothing exceeds the threshold (the ratio is infinite);
we stop as soon as the kept set is empty and keep nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedhh.errors import ConfigError
from fedhh.server.estimate import NullTail

MAX_ITERATIONS = 10_000


@dataclass(frozen=True)
class PruneResult:
    kept: np.ndarray          # domain indices kept, int64, ascending
    threshold: float          # the final threshold x = tau * sigma (estimates > x are kept)
    tau: float                # threshold multiplier x / sigma
    false_positive_probability: float  # E at the final threshold
    expected_false_positives: float    # E * |D|
    iterations: int


def validate_prune_parameters(fp_ratio: float, tau0: float, eta: float) -> None:
    if not fp_ratio > 0:
        raise ConfigError(f"fp_ratio (gamma) must be > 0, got {fp_ratio}")
    if not tau0 >= 0:
        raise ConfigError(f"tau0 must be >= 0, got {tau0}")
    if not 0 < eta < 1:
        raise ConfigError(f"eta must be in (0, 1), got {eta}")


def prune_hh(
    estimates: np.ndarray,
    tail: NullTail,
    fp_ratio: float,
    tau0: float = 1.0,
    eta: float = 0.5,
    domain_size: int | None = None,
) -> PruneResult:
    """The paper's PruneHH with target false-positive ratio ``fp_ratio`` (gamma)."""
    validate_prune_parameters(fp_ratio, tau0, eta)
    size = estimates.size if domain_size is None else domain_size
    sigma = tail.sigma
    threshold = tau0 * sigma
    e = tail.sf(threshold)
    kept_count = int(np.count_nonzero(estimates > threshold))
    iterations = 0
    while kept_count > 0 and fp_ratio * kept_count < e * size:
        iterations += 1
        if iterations > MAX_ITERATIONS:
            raise RuntimeError("PruneHH did not converge")  # unreachable: E falls geometrically
        e *= eta
        threshold = max(threshold, tail.isf(e))
        kept_count = int(np.count_nonzero(estimates > threshold))
    kept = np.flatnonzero(estimates > threshold) if kept_count else np.zeros(0, dtype=np.int64)
    return PruneResult(
        kept=kept.astype(np.int64),
        threshold=float(threshold),
        tau=float(threshold / sigma) if sigma > 0 else float("inf"),
        false_positive_probability=tail.sf(threshold),
        expected_false_positives=tail.sf(threshold) * size,
        iterations=iterations,
    )
