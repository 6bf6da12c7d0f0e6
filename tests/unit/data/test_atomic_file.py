"""Cache entries are written whole or not at all, and writers of one entry at once (two
simulations, two test workers, two Dask workers sharing FEDHH_CACHE) never share a temporary
file: with one fixed temporary name, the second writer's rename found it gone."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from fedhh.data.dataset import atomic_file


def _write(target: str, value: int) -> None:
    for _ in range(50):
        with atomic_file(Path(target)) as out:
            np.save(out, np.full(100_000, value))


def test_concurrent_writers_of_one_entry_leave_one_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "entry.npy"
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_write, [str(target)] * 4, range(4)))
    values = np.load(target)
    assert values.shape == (100_000,) and len(set(values.tolist())) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["entry.npy"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "entry.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_file(target, "w") as out:
        out.write("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["entry.txt"]
    with atomic_file(target, "w") as out:
        out.write("new é\n")
    assert target.read_text(encoding="utf-8") == "new é\n"
