"""Seeded random streams for simulation and tests (never used by a deployed device).

Every consumer gets its own stream from ``SeedSequence(seed, spawn_key=...)`` so results do not
depend on scheduling, chunking or process layout: the device of id u in round t draws from
``device_stream(seed, t, u)`` whether it runs inside the simulator or in a device process.
"""

from __future__ import annotations

import numpy as np

# Distinct first spawn-key components keep the purposes' streams apart.
_SINGLE_ITEM, _PARTICIPATION, _SELECTION, _NOISE, _DEVICE = 1, 2, 3, 4, 5


def _generator(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def single_item_stream(seed: int) -> np.random.Generator:
    return _generator(seed, _SINGLE_ITEM)


def participation_stream(seed: int, round_index: int) -> np.random.Generator:
    return _generator(seed, _PARTICIPATION, round_index)


def selection_seeds(seed: int, round_index: int) -> np.random.SeedSequence:
    """Parent of the per-block selection streams of a round (spawned once per round)."""
    return np.random.SeedSequence(seed, spawn_key=(_SELECTION, round_index))


def noise_stream(seed: int, round_index: int) -> np.random.Generator:
    return _generator(seed, _NOISE, round_index)


def device_stream(seed: int, round_index: int, device_id: int) -> np.random.Generator:
    return _generator(seed, _DEVICE, round_index, device_id)
