"""Federated datasets: users with item counts, stored as CSR arrays on disk.

Entry points: `resolve_dataset` (a built-in name or a path), `ground_truth`, `warm_start_list`
and `load_item_list`. See docs/datasets.md.
"""

from fedhh.data.dataset import FederatedDataset, load_dataset, save_dataset
from fedhh.data.registry import BUILTINS, DEFAULT_DATASET, cache_root, resolve_dataset
from fedhh.data.truth import GroundTruth, ground_truth
from fedhh.data.wordlists import load_item_list, warm_start_list, write_item_list

__all__ = [
    "BUILTINS",
    "DEFAULT_DATASET",
    "FederatedDataset",
    "GroundTruth",
    "cache_root",
    "ground_truth",
    "load_dataset",
    "load_item_list",
    "resolve_dataset",
    "save_dataset",
    "warm_start_list",
    "write_item_list",
]
