"""A tiny dataset for the experiment tests: 3000 users over a few dozen common words."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedhh.data.dataset import FederatedDataset, from_user_counts, save_dataset
from fedhh.data.registry import resolve_dataset

WORDS = (
    "the", "and", "you", "that", "was", "for", "with", "have", "this", "not", "but", "are",
    "they", "what", "all", "there", "your", "out", "about", "just", "like", "people", "think",
    "would", "know", "time", "good", "more", "make", "really", "apple", "banana", "cherry",
    "zebra", "quartz",
)


def tiny_users(num_users: int = 3000, seed: int = 0) -> list[dict[str, int]]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    weights /= weights.sum()
    users = []
    for _ in range(num_users):
        k = int(rng.integers(1, 7))
        held = rng.choice(len(WORDS), size=k, replace=False, p=weights)
        users.append({WORDS[i]: int(rng.integers(1, 5)) for i in held})
    return users


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("experiments") / "tiny"
    return save_dataset(from_user_counts(tiny_users(), name="tiny", provenance="test"), path)


@pytest.fixture(scope="session")
def tiny(tiny_path: Path) -> FederatedDataset:
    return resolve_dataset(tiny_path)
