"""The algorithms an experiment can swap, each assembled from a mechanism and a participation
rule, with its privacy calibration.

| name              | participation              | mechanism                          |
| ----------------- | -------------------------- | ---------------------------------- |
| optprefixtree     | all, or Poisson at rate q  | local randomized response, PruneHH |
| triehh            | fixed-size uniform sample  | vote threshold theta               |
| triehh++          | Poisson sampling           | vote threshold theta               |
| central-laplace   | all                        | Laplace noise on the histogram     |
| central-gaussian  | all                        | Gaussian noise on the histogram    |

Given an aggregate target (eps_agg, delta) the free parameter of each is solved by
``fedhh.privacy``: the local epsilon, the sampling rate, or the noise scale. Explicit values
override the solver (``eps_local``, ``sampling_rate``, ``noise_scale``).

Central baselines: one device contributes one one-hot vector per round, so replacing a device
changes the histogram by at most 2 in L1 and sqrt(2) in L2 (the replacement notion of
neighbouring datasets used by the shuffle-model bounds of OptPrefixTree, for a like-for-like
comparison).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fedhh.errors import ConfigError
from fedhh.server.mechanisms import (
    CentralNoise,
    LocalRandomizer,
    Mechanism,
    NoiseKind,
    TailKind,
    VoteThreshold,
)
from fedhh.simulation.participation import Participation, SamplingKind

ALGORITHMS = ("optprefixtree", "triehh", "triehh++", "central-laplace", "central-gaussian")
# A device holding v instead of w changes two coordinates of a round's sums by 1 each.
CHANGED_COORDINATES = 2
L1_SENSITIVITY = 2.0
L2_SENSITIVITY = math.sqrt(2.0)


@dataclass(frozen=True)
class PrivacyTarget:
    eps_agg: float = 1.0
    delta: float = 1e-6
    method: str | None = None  # accountant method for OptPrefixTree; None: the default


@dataclass(frozen=True)
class AlgorithmChoice:
    name: str
    mechanism: Mechanism
    participation: Participation
    privacy: dict[str, Any] = field(default_factory=dict)


def build_algorithm(
    name: str,
    rounds: int,
    num_devices: int,
    target: PrivacyTarget | None,
    *,
    eps_local: float | None = None,
    sampling_rate: float | None = None,
    theta: int = 10,
    noise_scale: float | None = None,
    tail: TailKind = TailKind.BINOMIAL,
) -> AlgorithmChoice:
    """Assemble ``name`` for ``rounds`` rounds over ``num_devices`` devices.

    ``rounds`` counts every round charged to the budget (runs x rounds in the two-run mode).
    """
    if name not in ALGORITHMS:
        raise ConfigError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {name!r}")
    if name == "optprefixtree":
        q = 1.0 if sampling_rate is None else sampling_rate
        participation = Participation(
            SamplingKind.POISSON if q < 1 else SamplingKind.ALL, q
        )
        info: dict[str, Any] = {"sampling_rate": q}
        if eps_local is None:
            target = _require(target, name)
            if num_devices < 2:
                raise ConfigError(
                    f"the dataset has {num_devices} user(s): the aggregate guarantee needs at "
                    "least 2 (one report is protected only by its own eps_local; give "
                    "--eps-local to run with that alone)")
            from fedhh.privacy import DEFAULT_METHOD, solve_local_epsilon

            solution = solve_local_epsilon(
                target.eps_agg, target.delta, rounds, num_devices, sampling_rate=q,
                method=target.method or DEFAULT_METHOD,
            )
            eps_local = solution.eps_local
            info.update(solution.to_dict())
        info["eps_local"] = eps_local
        return AlgorithmChoice(name, LocalRandomizer(eps_local, tail), participation, info)
    if name in ("triehh", "triehh++"):
        if sampling_rate is None:
            target = _require(target, name)
            from fedhh.privacy import triehh_sampling_rate, triehhpp_sampling_rate

            if name == "triehh":
                sampling_rate = triehh_sampling_rate(
                    theta, num_devices, rounds, target.eps_agg, target.delta)
            else:
                sampling_rate = triehhpp_sampling_rate(theta, rounds, target.eps_agg, target.delta)
        kind = SamplingKind.FIXED if name == "triehh" else SamplingKind.POISSON
        return AlgorithmChoice(
            name, VoteThreshold(theta, sampling_rate), Participation(kind, sampling_rate),
            {"sampling_rate": sampling_rate, "theta": theta},
        )
    noise = NoiseKind.LAPLACE if name == "central-laplace" else NoiseKind.GAUSSIAN
    if noise_scale is None:
        target = _require(target, name)
        from fedhh.privacy import central_gaussian_sigma, central_laplace_scale

        if noise is NoiseKind.LAPLACE:
            noise_scale = central_laplace_scale(target.eps_agg, target.delta, rounds,
                                                L1_SENSITIVITY, CHANGED_COORDINATES)
        else:
            noise_scale = central_gaussian_sigma(target.eps_agg, target.delta, rounds,
                                                 L2_SENSITIVITY)
    return AlgorithmChoice(name, CentralNoise(noise, noise_scale), Participation(),
                           {"noise_scale": noise_scale, "noise": noise.value})


def _require(target: PrivacyTarget | None, name: str) -> PrivacyTarget:
    if target is None:
        raise ConfigError(f"{name} needs a privacy target (eps_agg, delta) or an explicit value")
    return target
