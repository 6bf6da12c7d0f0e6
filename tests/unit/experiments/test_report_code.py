"""The report names the fedhh code of its runs (report.json's ``code``, a sentence of the
README), and every stored run the code that computed it. Before, neither said which code made
the numbers: a store is reused whatever code stored its runs, so a report written after an
update could hold runs of the old simulator without a word."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import fedhh
from fedhh.cli.main import main
from fedhh.experiments import ResultStore
from fedhh.experiments.code import code_fingerprint, library_versions


def _study(tiny_path: Path, out: Path, store: Path) -> list[str]:
    return ["experiments", "segmentation", "--dataset", str(tiny_path), "--out", str(out),
            "--store", str(store), "--seeds", "1", "--quiet"]


def test_the_report_and_every_run_name_their_code(tiny_path: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert main(_study(tiny_path, tmp_path / "out", store)) == 0
    mine = code_fingerprint()
    keys = sorted(p.stem for p in store.glob("*.json"))
    assert len(keys) == 2
    for key in keys:
        record = ResultStore(store).load(key)
        assert record is not None
        assert record.data["code"] == {"fedhh": fedhh.__version__, "digest": mine,
                                       "libraries": library_versions()}
    meta = json.loads((tmp_path / "out" / "report.json").read_text())
    assert meta["code"] == {"fedhh": fedhh.__version__, "digest": mine,
                            "libraries": library_versions(), "runs": {mine: 2}}
    readme = (tmp_path / "out" / "README.md").read_text()
    libraries = ", ".join(f"{k} {v}" for k, v in library_versions().items())
    assert (f" Code: fedhh {fedhh.__version__} with {libraries}, digest `{mine[:12]}` "
            "(every run).\n") in readme

    # A run stored by other code, and one stored before runs named their code, are told.
    first, second = (store / f"{key}.json" for key in keys)
    for path, code in ((first, {"fedhh": "0.0.9", "digest": "f" * 64}), (second, None)):
        data = json.loads(path.read_text())
        if code is None:
            del data["code"]
        else:
            data["code"] = code
        path.write_text(json.dumps(data))
    shutil.rmtree(tmp_path / "out")
    assert main(_study(tiny_path, tmp_path / "out", store)) == 0
    meta = json.loads((tmp_path / "out" / "report.json").read_text())
    assert meta["code"]["runs"] == {"f" * 64: 1, "unrecorded": 1}
    readme = (tmp_path / "out" / "README.md").read_text()
    assert (f" Code: fedhh {fedhh.__version__} with {libraries}, digest `{mine[:12]}` "
            "(0 runs); runs reused "
            "from the store were computed by other code: 1 by digest `ffffffffffff`, 1 "
            "unrecorded (stored before runs named their code). Recompute them with another "
            "--store.\n") in readme
