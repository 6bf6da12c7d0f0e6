"""Which devices take part in a round: everyone, Poisson sampling at rate q (each device
independently), or a fixed-size uniform sample without replacement (TrieHH's cohort)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from fedhh.errors import ConfigError


class SamplingKind(StrEnum):
    ALL = "all"
    POISSON = "poisson"
    FIXED = "fixed"


@dataclass(frozen=True)
class Participation:
    kind: SamplingKind = SamplingKind.ALL
    rate: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1:
            raise ConfigError(f"sampling rate must be in (0, 1], got {self.rate}")

    def sample(self, num_users: int, rng: np.random.Generator) -> np.ndarray | None:
        """Sorted ids of this round's participants (None: every device)."""
        if self.kind is SamplingKind.ALL or self.rate >= 1:
            return None
        if self.kind is SamplingKind.POISSON:
            return np.flatnonzero(rng.random(num_users) < self.rate)
        size = round(self.rate * num_users)
        return np.sort(rng.choice(num_users, size=size, replace=False))
