"""What a device computes in a round: pick one item, one-hot it, randomize it.

* ``select_block`` with ``Selection``/``SelectionRule``/``Eligibility``: data selection
  conditioned on the round's prefix list and deny list (``selection``).
* ``select_domain_index``: one device's draw as the round's domain element, the networked
  device's and the per-device simulator's alike (``selection``).
* ``RandomizedResponse``: one-hot encoding + asymmetric binary randomized response
  (``randomizer``), with exact integer thresholds.
* ``RandomSource``: where a device's randomness comes from: ``SecureSource`` (AES-256-CTR from the
  OS CSPRNG) on a deployed device, ``NumpySource`` (seeded, ``streams``) in simulation and tests
  (``randomness``).
* ``exceeds``: whether a sum of epsilons is above a cap, compared exactly (``budget_sums``; the
  device's own budget and the coordinator's lifetime budgets).

The server side (what follows from a round's sum) is ``fedhh.server``.
"""

from __future__ import annotations

from fedhh.device.randomizer import RandomizedResponse
from fedhh.device.randomness import NumpySource, RandomSource, SecureSource, as_source
from fedhh.device.selection import (
    NOTHING,
    Eligibility,
    RoundFilter,
    RoundQuery,
    Selection,
    SelectionRule,
    select_block,
    select_domain_index,
    select_many,
)

__all__ = [
    "NOTHING",
    "Eligibility",
    "NumpySource",
    "RandomSource",
    "RandomizedResponse",
    "RoundFilter",
    "RoundQuery",
    "SecureSource",
    "Selection",
    "SelectionRule",
    "as_source",
    "select_block",
    "select_domain_index",
    "select_many",
]
