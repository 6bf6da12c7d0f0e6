"""A result store or report folder that cannot be written (a full disk, a quota): one line
naming the folder and the OS's reason, and how many runs are kept. Before, a full disk ended the
suite with the OS's "No space left on device" alone (ENOSPC names no file): neither the store
nor the report folder was named, nor that the runs that finished were stored."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedhh.cli.main import main
from fedhh.experiments import Suite
from fedhh.experiments import report as report_module
from fedhh.experiments import store as store_module
from fedhh.experiments.store import ResultStore, RunRecord, StoreUnwritable


def _full(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _study(tiny_path: Path, tmp_path: Path) -> list[str]:
    return ["experiments", "segmentation", "--dataset", str(tiny_path), "--out",
            str(tmp_path / "out"), "--store", str(tmp_path / "store"), "--seeds", "1",
            "--quiet"]


def test_a_store_on_a_full_disk_is_named_and_keeps_its_entries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ResultStore(tmp_path / "store")
    arrays = {name: np.zeros(1) for name in ResultStore.ARRAYS}
    monkeypatch.setattr(store_module.np, "savez_compressed", _full)
    with pytest.raises(StoreUnwritable, match=rf"^cannot store run k1 in the result store "
                       rf"{tmp_path / 'store'}: No space left on device$"):
        store.save(RunRecord("k1", 0, [], "", {}, arrays))
    assert not store.has("k1")
    assert not list((tmp_path / "store").glob(".*.tmp"))  # (no temporary file left)


def test_a_suite_whose_report_folder_or_store_fills_up_says_where_and_what_is_kept(
        tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The report folder's disk is full.
    with monkeypatch.context() as full:
        full.setattr(report_module, "_write_all", _full)
        with pytest.raises(SystemExit) as ended:
            main(_study(tiny_path, tmp_path))
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err == ("fedhh experiments segmentation: error: cannot write the report in "
                   f"{tmp_path / 'out'}: "
                   f"No space left on device; its 2 runs are stored in {tmp_path / 'store'}, "
                   f"so once {tmp_path / 'out'} can be written (or with another --out) the "
                   "same command only writes the report\n")
    store = ResultStore(tmp_path / "store")
    keys = sorted(p.stem for p in store.root.glob("*.json"))
    assert len(keys) == 2

    # One run to compute again (its record as computed before: no simulation), and the
    # store's disk is full.
    lost = store.load(keys[1])
    assert lost is not None
    for path in store.root.glob(f"{keys[1]}.*"):
        path.unlink()
    monkeypatch.setattr(Suite, "compute", lambda self, run, progress=None: lost)
    monkeypatch.setattr(store_module.np, "savez_compressed", _full)
    with pytest.raises(SystemExit) as ended:
        main(_study(tiny_path, tmp_path))
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err == (f"fedhh experiments segmentation: error: cannot store run {keys[1]} in the "
                   "result "
                   f"store {tmp_path / 'store'}: No space left on device; 1 of the 2 runs are "
                   "stored there: once it can be written (space freed on its disk), the same "
                   "command computes the other 1 and writes the report\n")
    assert store.has(keys[0]) and not store.has(keys[1])
