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

Weighted thresholds (issue 15, ``weights``). With non-negative weights w_i fixed before the
estimates are seen (scaled here to average 1 over D), element i is kept when its estimate
exceeds the (1 - E w_i) quantile of the null law, i.e. its null tail probability is at most
E w_i: the weighted multiple-testing rule of Genovese, Roeder and Wasserman (2006, Biometrika
93, "False discovery control with p-value weighting"). The expected number of false positives
is then at most sum_i E w_i = E |D|, the same bound as without weights, so the loop and its
stopping rule are unchanged and a zero-count element keeps the same null law; only where the
false-positive budget is spent moves (an element of weight 0 is never kept). Each weight's
threshold never falls from one step to the next.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from fedhh.errors import ConfigError
from fedhh.server.estimate import NullTail

# The loop's bounds. With eta at most ETA_MAX and gamma at least the smallest normal float, E
# falls below gamma / |D| for any domain within MAX_ITERATIONS steps: from 1 to ~5e-322 (where
# a step of 0.99 no longer lowers a subnormal E) takes ~73,500. Before, any eta below 1 and
# gamma above 0 were taken, and eta 0.9999999999999999 stopped a round with "PruneHH did not
# converge" after 10,000 steps, once its report was in.
MAX_ITERATIONS = 100_000
ETA_MAX = 0.99


@dataclass(frozen=True)
class PruneResult:
    kept: np.ndarray          # domain indices kept, int64, ascending
    threshold: float          # the final threshold x = tau * sigma (estimates > x are kept)
    tau: float                # threshold multiplier x / sigma
    false_positive_probability: float  # E at the final threshold
    expected_false_positives: float    # E * |D|
    iterations: int


def validate_prune_parameters(fp_ratio: float, tau0: float, eta: float) -> None:
    if not fp_ratio >= sys.float_info.min:
        raise ConfigError(f"fp_ratio (gamma) must be at least {sys.float_info.min:.4g} (the "
                          f"smallest normal float), got {fp_ratio}")
    if not tau0 >= 0:
        raise ConfigError(f"tau0 must be >= 0, got {tau0}")
    if not 0 < eta <= ETA_MAX:
        raise ConfigError(f"eta must be in (0, {ETA_MAX:g}] (PruneHH multiplies E by it until "
                          f"few enough false positives are expected), got {eta}")


def prune_hh(
    estimates: np.ndarray,
    tail: NullTail,
    fp_ratio: float,
    tau0: float = 1.0,
    eta: float = 0.5,
    domain_size: int | None = None,
    weights: np.ndarray | None = None,
) -> PruneResult:
    """The paper's PruneHH with target false-positive ratio ``fp_ratio`` (gamma); with
    ``weights`` (one per estimate), the weighted rule of the module docstring."""
    validate_prune_parameters(fp_ratio, tau0, eta)
    if weights is not None:
        if domain_size is not None:
            raise ConfigError("weighted thresholds need every element of the domain")
        return _weighted(estimates, tail, fp_ratio, tau0, eta, weights)
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


def _weighted(estimates: np.ndarray, tail: NullTail, fp_ratio: float, tau0: float, eta: float,
              weights: np.ndarray) -> PruneResult:
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != estimates.shape:
        raise ConfigError(f"{weights.size} weights for {estimates.size} estimates")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ConfigError("threshold weights must be finite and non-negative")
    size = estimates.size
    sigma = tail.sigma
    if size == 0 or not np.any(weights > 0):
        nothing = np.zeros(0, dtype=np.int64)
        return PruneResult(nothing, float("inf"), float("inf"), 0.0, 0.0, 0)
    levels, group = np.unique(weights * (size / weights.sum()), return_inverse=True)
    lowest = np.full(levels.size, -np.inf)  # each weight's threshold so far (never falls)

    def cut(e: float) -> np.ndarray:
        for g, w in enumerate(levels.tolist()):
            if w == 0:
                lowest[g] = np.inf
            elif e * w < 1:
                lowest[g] = max(lowest[g], tail.isf(e * w))
        return lowest[group]

    e = tail.sf(tau0 * sigma)
    kept_count = int(np.count_nonzero(estimates > cut(e)))
    iterations = 0
    while kept_count > 0 and fp_ratio * kept_count < e * size:
        iterations += 1
        if iterations > MAX_ITERATIONS:
            raise RuntimeError("PruneHH did not converge")  # unreachable: E falls geometrically
        e *= eta
        kept_count = int(np.count_nonzero(estimates > cut(e)))
    thresholds = lowest[group]
    kept = np.flatnonzero(estimates > thresholds) if kept_count else np.zeros(0, dtype=np.int64)
    counts = np.bincount(group, minlength=levels.size)
    expected = float(sum(c * (1.0 if t == -np.inf else tail.sf(t))
                         for c, t in zip(counts.tolist(), lowest.tolist(), strict=True)
                         if t < np.inf))
    unit = tail.isf(e) if e < 1 else -np.inf  # the threshold of an element of weight 1
    return PruneResult(
        kept=kept.astype(np.int64),
        threshold=float(unit),
        tau=float(unit / sigma) if sigma > 0 else float("inf"),
        false_positive_probability=expected / size,
        expected_false_positives=expected,
        iterations=iterations,
    )
