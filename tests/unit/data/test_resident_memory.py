"""A full pass over a memory-mapped dataset leaves it out of the process's resident memory.

The arrays of the default dataset are 3.6 GB; a pass that keeps the pages it read resident
ends near that much resident memory (the first `fedhh simulate` peaked at 3.19 GB when the
code truth kept them). Measured from /proc/self/smaps: the resident size of the mapping of
``items.npy`` itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedhh.data.dataset import FederatedDataset, load_dataset, save_dataset
from fedhh.data.truth import compute_truth
from fedhh.metrics import Truth

USERS = 40_000
PER_USER = 200  # 8M entries: items.npy is 32 MB


def resident_kib(array: np.ndarray) -> int:
    """Resident KiB of the mapping that holds ``array``'s data in this process."""
    address = array.ctypes.data
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("Rss:"):
            return int(head[1])
    raise AssertionError("no mapping holds the array")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab = tuple(f"w{i:05d}" for i in range(2 * PER_USER))
    rng = np.random.default_rng(0)
    items = np.sort(np.stack([rng.choice(len(vocab), PER_USER, replace=False)
                              for _ in range(64)]), axis=1).astype(np.int32)
    data = FederatedDataset(vocab, np.arange(USERS + 1, dtype=np.int64) * PER_USER,
                            np.tile(items, (USERS // 64, 1)).reshape(-1),
                            np.ones(USERS * PER_USER, dtype=np.uint16), name="mapped")
    return save_dataset(data, tmp_path_factory.mktemp("mapped") / "d")


def test_the_recount_of_shared_codes_releases_the_pages_it_read(root: Path) -> None:
    mapped = load_dataset(root, validate=False)
    codes = np.arange(len(mapped.vocabulary), dtype=np.uint64) // 2  # pairs share a code
    flat = np.full(len(mapped.vocabulary), 1 / len(mapped.vocabulary))
    truth = Truth.from_items(codes, flat, flat, mapped)
    assert truth.codes.size == len(mapped.vocabulary) // 2
    assert resident_kib(mapped.items) < mapped.items.nbytes // 1024 // 8


@pytest.mark.parametrize("full_pass", ["validation", "truth", "summary"])
def test_other_full_passes_release_their_pages(full_pass: str, root: Path) -> None:
    mapped = load_dataset(root, validate=full_pass == "validation")
    if full_pass == "truth":
        compute_truth(mapped)
    elif full_pass == "summary":
        mapped.summary()
    assert resident_kib(mapped.items) < mapped.items.nbytes // 1024 // 8
