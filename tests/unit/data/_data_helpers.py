"""Shared helpers for the dataset tests: tiny datasets and file fingerprints."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fedhh.data.dataset import FederatedDataset

TINY_USERS: list[dict[str, int]] = [
    {"the": 3, "cat": 1, "sat": 1},
    {},
    {"the": 1, "dog": 2},
    {"zebra": 70000},
    {"cat": 4},
]


def fingerprint(root: Path) -> dict[str, str]:
    """Hash of every file under ``root`` (to assert that nothing changed)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def as_dicts(ds: FederatedDataset) -> list[dict[str, int]]:
    """Every user's {item: count}."""
    out = []
    for u in range(ds.num_users):
        items, counts = ds.user_items(u)
        out.append({ds.vocabulary[i]: int(c) for i, c in zip(items, counts, strict=True)})
    return out
