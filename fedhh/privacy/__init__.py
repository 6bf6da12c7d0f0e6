"""Privacy accounting: local epsilon of the released sums or of shuffling, baselines, a ledger.

Public API (theorems, choices and tables in ``docs/privacy.md``):

* ``solve_local_epsilon`` -> ``LocalEpsilonSolution``: the largest per-round local epsilon that
  keeps T rounds among n devices (optionally Poisson-sampled at rate q) within an aggregate
  (eps, delta) target. Methods (``METHODS``): ``"sum"`` (default: the released sums),
  ``"clones"``, ``"paper"``, ``"closed-form"`` (shuffle bounds).
* ``aggregate_epsilon`` -> ``AggregateEpsilon``: the forward map, with its breakdown.
* ``triehh_sampling_rate``, ``triehhpp_sampling_rate``: the baselines' sampling rates.
* ``central_laplace_scale``, ``central_gaussian_sigma``: central-DP noise calibration.
* ``PrivacyLedger``: the per-run budget ledger (frozen, JSON round-trip, dry-run ``check``).
* ``basic_composition``: a device's guarantee over several runs.

Names are imported on first use (PEP 562), so ``import fedhh.privacy`` loads neither scipy
nor dp_accounting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedhh.lazy import lazy_names

if TYPE_CHECKING:
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
    from fedhh.privacy.composition import basic_composition
    from fedhh.privacy.ledger import PrivacyLedger, RoundSpend, SpendCheck
    from fedhh.privacy.methods import DEFAULT_METHOD, METHODS
    from fedhh.privacy.solver import LocalEpsilonSolution, solve_local_epsilon

_WHERE = {
    "AggregateEpsilon": "accountant",
    "aggregate_epsilon": "accountant",
    "BaselineRate": "baselines",
    "triehh_rate": "baselines",
    "triehh_sampling_rate": "baselines",
    "triehhpp_rate": "baselines",
    "triehhpp_sampling_rate": "baselines",
    "CentralCalibration": "central",
    "central_gaussian_sigma": "central",
    "central_laplace_scale": "central",
    "gaussian_calibration": "central",
    "laplace_calibration": "central",
    "basic_composition": "composition",
    "PrivacyLedger": "ledger",
    "RoundSpend": "ledger",
    "SpendCheck": "ledger",
    "DEFAULT_METHOD": "methods",
    "METHODS": "methods",
    "LocalEpsilonSolution": "solver",
    "solve_local_epsilon": "solver",
}

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
    "basic_composition",
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


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals())
