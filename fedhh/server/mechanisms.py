"""How a round's aggregate is formed and read: one value per algorithm family.

- ``LocalRandomizer``: OptPrefixTree. Every participant randomizes its one-hot report locally
  (``fedhh.device.randomizer``); the server sees the sum, estimates counts and thresholds them with
  PruneHH against the zero-count law (Gaussian approximation, or exact binomial).
- ``VoteThreshold``: TrieHH (Zhu et al. 2020) and TrieHH++ (Cormode & Bharadwaj 2022). Sampled
  devices send their prefix in the clear; a prefix is kept when at least ``theta`` devices voted.
- ``CentralNoise``: a trusted curator adds Laplace or Gaussian noise to every coordinate of the
  exact histogram; thresholded with PruneHH against the noise law.
- ``fedhh.pirappor.mechanism.PiRappor``: OptPrefixTree with PI-RAPPOR reports, decoded one by one
  into counts with the law of the randomized-response sum; its rates depend on the segment.

Every mechanism implements ``Mechanism``: ``at_segment`` gives what reads a round with that
segment length (a ``RoundMechanism``: the mechanism itself here, a ``PiRapporRound`` for
PI-RAPPOR), so this module never names the mechanisms built on it.

Mechanisms are frozen values: the simulator and the coordinator read them, nothing mutates them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

import numpy as np

from fedhh.device.randomizer import RandomizedResponse
from fedhh.errors import ConfigError
from fedhh.server.estimate import (
    BinomialTail,
    GaussianTail,
    LaplaceTail,
    NullTail,
    rr_estimate,
    rr_null_std,
    rr_variance,
)
from fedhh.server.prune import prune_hh


class TailKind(StrEnum):
    GAUSSIAN = "gaussian"
    BINOMIAL = "binomial"


@dataclass(frozen=True)
class Thresholded:
    """What a round's thresholding kept, with its diagnostics."""

    kept: np.ndarray
    estimates: np.ndarray
    threshold: float
    tau: float
    sigma: float
    expected_false_positives: float


class RoundMechanism(Protocol):
    """What reads one round's sum: count estimates, and the elements kept by the threshold."""

    def estimate(self, sums: np.ndarray, n: int) -> np.ndarray: ...

    def threshold(self, sums: np.ndarray, n: int, fp_ratio: float, tau0: float, eta: float,
                  weights: np.ndarray | None = None) -> Thresholded: ...


class Mechanism(Protocol):
    """A run's mechanism, and what reads its rounds of ``segment_bits``-bit segments."""

    def at_segment(self, segment_bits: int) -> RoundMechanism: ...


@runtime_checkable
class NullLaw(Protocol):
    """A local randomizer's law of a zero-count estimate among ``n`` reports."""

    def null_tail(self, n: int) -> NullTail: ...


@dataclass(frozen=True)
class LocalRandomizer:
    eps_local: float
    tail: TailKind = TailKind.GAUSSIAN

    @property
    def randomizer(self) -> RandomizedResponse:
        return RandomizedResponse(self.eps_local)

    def null_tail(self, n: int) -> NullTail:
        rr = self.randomizer
        if self.tail is TailKind.BINOMIAL:
            return BinomialTail(n, rr)
        return GaussianTail(rr_null_std(n, rr))

    def at_segment(self, segment_bits: int) -> LocalRandomizer:
        return self

    def estimate(self, sums: np.ndarray, n: int) -> np.ndarray:
        return rr_estimate(sums, n, self.randomizer)

    def threshold(self, sums: np.ndarray, n: int, fp_ratio: float, tau0: float, eta: float,
                  weights: np.ndarray | None = None) -> Thresholded:
        return pruned(self.estimate(sums, n), n, self.null_tail, fp_ratio, tau0, eta, weights)


def estimate_std(mechanism: object, estimate: float, n: int, parts: int = 1) -> float:
    """Plug-in standard deviation of an unbiased randomized-response count estimate over n
    reports: sqrt(Var f(w)) with Var f(w) = (c a1 (1 - a1) + (n - c) a0 (1 - a0)) / (a1 - a0)^2
    (Feldman and Talwar 2021, Lemma 4.2; ``fedhh.server.estimate.rr_variance``), at c = the
    estimate clipped to [0, n]; nan for another mechanism, or no reports.

    ``parts``: the estimate is the sum of that many elements' estimates (a row standing for
    several cut prefixes, ``HeavyHitter.parts``), whose noises add: Var f is affine in c, so
    their variances sum to Var f(sum c) + (parts - 1) Var f(0) (as one element's, the sum's
    standard deviation was understated by up to sqrt(parts))."""
    if not isinstance(mechanism, LocalRandomizer) or n <= 0:
        return math.nan
    count = min(max(estimate, 0.0), float(parts * n))
    rates = mechanism.randomizer
    return math.sqrt(float(rr_variance(count, n, rates))
                     + (parts - 1) * float(rr_variance(0.0, n, rates)))


def pruned(estimates: np.ndarray, n: int, null_tail: Callable[[int], NullTail], fp_ratio: float,
           tau0: float, eta: float, weights: np.ndarray | None = None) -> Thresholded:
    """PruneHH over a round's estimates against the null law of its ``n`` reports (nothing is
    kept from a round without reports); shared by every randomizer with a null tail."""
    if n == 0:
        return _nothing(estimates)
    tail = null_tail(n)
    result = prune_hh(estimates, tail, fp_ratio, tau0, eta, weights=weights)
    return Thresholded(result.kept, estimates, result.threshold, result.tau, tail.sigma,
                       result.expected_false_positives)


@dataclass(frozen=True)
class VoteThreshold:
    theta: int
    sampling_rate: float

    def __post_init__(self) -> None:
        if self.theta < 1:
            raise ConfigError(f"theta must be >= 1, got {self.theta}")
        if not 0 < self.sampling_rate <= 1:
            raise ConfigError(f"sampling_rate must be in (0, 1], got {self.sampling_rate}")

    def at_segment(self, segment_bits: int) -> VoteThreshold:
        return self

    def estimate(self, sums: np.ndarray, n: int) -> np.ndarray:
        """Votes scaled by 1/rate: an unbiased estimate of the population count."""
        return np.asarray(sums, dtype=np.float64) / self.sampling_rate

    def threshold(self, sums: np.ndarray, n: int, fp_ratio: float, tau0: float, eta: float,
                  weights: np.ndarray | None = None) -> Thresholded:
        if weights is not None:
            raise ConfigError("vote thresholds take no weights")
        kept = np.flatnonzero(np.asarray(sums) >= self.theta)
        return Thresholded(kept, self.estimate(sums, n), float(self.theta), float("nan"),
                           0.0, 0.0)


class NoiseKind(StrEnum):
    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"


@dataclass(frozen=True)
class CentralNoise:
    kind: NoiseKind
    scale: float  # Laplace b, or Gaussian sigma, per coordinate

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ConfigError(f"noise scale must be > 0, got {self.scale}")

    def null_tail(self) -> NullTail:
        if self.kind is NoiseKind.LAPLACE:
            return LaplaceTail(self.scale)
        return GaussianTail(self.scale)

    def at_segment(self, segment_bits: int) -> CentralNoise:
        return self

    def estimate(self, sums: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(sums, dtype=np.float64)

    def threshold(self, sums: np.ndarray, n: int, fp_ratio: float, tau0: float, eta: float,
                  weights: np.ndarray | None = None) -> Thresholded:
        estimates = self.estimate(sums, n)
        tail = self.null_tail()
        result = prune_hh(estimates, tail, fp_ratio, tau0, eta, weights=weights)
        return Thresholded(result.kept, estimates, result.threshold, result.tau, tail.sigma,
                           result.expected_false_positives)


def for_round(mechanism: Mechanism, segment_bits: int) -> RoundMechanism:
    """What reads a round with ``segment_bits``-bit segments: the mechanism itself, except
    PI-RAPPOR, whose field and rates depend on the segment length (``fedhh.pirappor``)."""
    return mechanism.at_segment(segment_bits)


def _nothing(estimates: np.ndarray) -> Thresholded:
    return Thresholded(np.zeros(0, dtype=np.int64), estimates, float("inf"), float("inf"),
                       0.0, 0.0)
