"""The verdicts of the studies' claims, and the result a claim's check gives.

A claim compares two configurations by the seed-paired ratio of a metric (heavy hitters found
unless stated). Verdicts:

- ``holds``: the effect has the paper's direction in every seed and at least half the
  paper's size (when the paper gives a size);
- ``holds, weaker`` / ``holds, stronger``: the direction holds in every seed but the effect is
  less than half / more than twice the paper's;
- ``partly holds``: part of the claim holds (the note says which);
- ``does not hold``: the opposite direction, or a difference below 2%, in every seed;
- ``inconclusive``: the direction changes from seed to seed, or no run output anything to
  judge a false-positive ratio by;
- ``differs``: a reported value (not a comparison) is not the paper's.

The paper's claims (``fedhh.experiments.claims``) and the utility levers' claims
(``fedhh.experiments.lever_claims``) both give their verdicts in these words.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fedhh.experiments.analysis import Ratio

HOLDS = "holds"
WEAKER = "holds, weaker"
STRONGER = "holds, stronger"
PARTLY = "partly holds"
FAILS = "does not hold"
MIXED = "inconclusive"
DIFFERS = "differs"
VERDICTS = (HOLDS, WEAKER, STRONGER, PARTLY, FAILS, MIXED, DIFFERS)
NEGLIGIBLE = 0.02  # a ratio within 2% of 1 in every seed is no effect

@dataclass(frozen=True)
class ClaimResult:
    study: str
    claim: str    # the paper's claim, in words
    paper: str    # the paper's number
    ours: str     # our number, with its spread over seeds
    verdict: str
    note: str     # by how much, and the likely reason for a disagreement

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ratio_verdict(ratio: Ratio, paper: float | None = None, greater: bool = True) -> str:
    """Verdict for 'a exceeds b' (``greater``) or 'a falls below b', paper factor ``paper``."""
    per = ratio.per_seed if greater else 1.0 / ratio.per_seed
    factor = ratio.of_means if greater else 1.0 / ratio.of_means
    if per.size == 0 or not math.isfinite(factor):
        return MIXED
    if np.all(per > 1 + NEGLIGIBLE):
        if paper is None:
            return HOLDS
        want = paper if greater else 1.0 / paper
        size = (factor - 1) / (want - 1) if want != 1 else 1.0
        return WEAKER if size < 0.5 else STRONGER if size > 2 else HOLDS
    if np.all(per <= 1 + NEGLIGIBLE):
        return FAILS
    return MIXED
