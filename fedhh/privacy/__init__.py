"""Privacy accounting: local epsilon from amplification by shuffling, baselines, and a ledger.

Public API (theorems, choices and tables in ``docs/privacy.md``):

* ``solve_local_epsilon`` -> ``LocalEpsilonSolution``: the largest per-round local epsilon that
  keeps T rounds among n devices (optionally Poisson-sampled at rate q) within an aggregate
  (eps, delta) target. Methods: ``"exact"`` (default), ``"paper"``, ``"closed-form"``.
* ``aggregate_epsilon`` -> ``AggregateEpsilon``: the forward map, with its breakdown.
* ``triehh_sampling_rate``, ``triehhpp_sampling_rate``: the baselines' sampling rates.
* ``central_laplace_scale``, ``central_gaussian_sigma``: central-DP noise calibration.
* ``PrivacyLedger``: the per-run budget ledger (frozen, JSON round-trip, dry-run ``check``).
"""

from fedhh.privacy.accountant import AggregateEpsilon, aggregate_epsilon
from fedhh.privacy.baselines import (
    BaselineRate,
    triehh_rate,
    triehh_sampling_rate,
    triehhpp_rate,
    triehhpp_sampling_rate,
)
from fedhh.privacy.central import (
    CentralCalibration,
    central_gaussian_sigma,
    central_laplace_scale,
    gaussian_calibration,
    laplace_calibration,
)
from fedhh.privacy.ledger import PrivacyLedger, RoundSpend, SpendCheck
from fedhh.privacy.shuffle import DEFAULT_METHOD, METHODS
from fedhh.privacy.solver import LocalEpsilonSolution, solve_local_epsilon

__all__ = [
    "DEFAULT_METHOD",
    "METHODS",
    "AggregateEpsilon",
    "BaselineRate",
    "CentralCalibration",
    "LocalEpsilonSolution",
    "PrivacyLedger",
    "RoundSpend",
    "SpendCheck",
    "aggregate_epsilon",
    "central_gaussian_sigma",
    "central_laplace_scale",
    "gaussian_calibration",
    "laplace_calibration",
    "solve_local_epsilon",
    "triehh_rate",
    "triehh_sampling_rate",
    "triehhpp_rate",
    "triehhpp_sampling_rate",
]
