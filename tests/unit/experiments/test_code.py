"""The code a run is recorded as computed by (fedhh.experiments.code). Before: the digest
covered fedhh's own files only, not the versions of numpy, scipy and the other libraries its
numbers depend on (a worker with another numpy computed other random streams under the
client's digest), and it was read from disk on first use, possibly long after the modules
were loaded, and never again (a checkout changed under a running suite was recorded as
neither code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fedhh
from fedhh.errors import ConfigError
from fedhh.experiments import ResultStore, Suite
from fedhh.experiments import code as code_module
from fedhh.experiments.cluster import check_workers, compute_run
from fedhh.experiments.code import (
    RESULT_LIBRARIES,
    check_unchanged,
    code_fingerprint,
    code_identity,
    library_versions,
)
from fedhh.experiments.spec import SuiteSettings
from fedhh.experiments.studies import get_study

GIB = 1 << 30


def test_the_digest_covers_the_libraries_results_depend_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = library_versions()
    assert list(versions) == list(RESULT_LIBRARIES)
    assert versions["numpy"] == np.__version__
    # (over a package of its own: this checkout's files may be edited meanwhile)
    monkeypatch.setattr(code_module, "_ROOT", tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    files = code_module._files()
    digest = code_module._fingerprint(files, versions)
    assert code_module._fingerprint(files, {**versions, "numpy": "1.26.4"}) != digest
    assert code_module._fingerprint(files, dict(reversed(versions.items()))) == digest
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_module._fingerprint(files, versions) != digest
    assert code_identity() == {"fedhh": fedhh.__version__, "digest": code_fingerprint(),
                               "libraries": versions}


def test_the_digest_is_taken_when_fedhh_is_loaded_not_on_first_use(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing is read from disk on use: the digest stands for what was loaded.
    before = code_fingerprint()

    def unreadable(self: Path) -> bytes:
        raise AssertionError(f"read {self} on use")

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    assert code_fingerprint() == before


def _changed(monkeypatch: pytest.MonkeyPatch, name: str = "codec/books/english.json",
             seen: bool = False) -> str:
    """Pretend one of the package's files changed on disk since it was loaded (``seen``: a
    module this process had loaded before it changed)."""
    state = dict(code_module._STATE)
    size, *times = state[name]
    state[name] = (size + 1, *times)
    monkeypatch.setattr(code_module, "_STATE", state)
    loaded = set(code_module._SEEN)
    (loaded.add if seen else loaded.discard)(name)
    monkeypatch.setattr(code_module, "_SEEN", loaded)
    return name


def test_files_changed_since_fedhh_was_loaded_are_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    check_unchanged()  # (nothing changed)
    name = _changed(monkeypatch)  # a codebook: read when needed
    with pytest.raises(ConfigError, match=rf"^fedhh's files changed on disk since this process "
                       rf"loaded fedhh \({name}, under .*: an update or a checkout in place\): "
                       "a run computed now would mix the old code, already loaded, with the "
                       "new, and be recorded as the old; say so$"):
        check_unchanged(remedy="say so")


def test_a_changed_module_matters_only_if_loaded_after_it_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Loaded before it changed: the process runs the code the digest read.
    _changed(monkeypatch, "simulation/runner.py", seen=True)
    check_unchanged()
    # Loaded since the last look (maybe from the new file): refused.
    _changed(monkeypatch, "simulation/runner.py", seen=False)
    with pytest.raises(ConfigError, match=r"\(simulation/runner\.py, under"):
        check_unchanged()
    # Not loaded at all: nothing of it runs (yet).
    monkeypatch.setattr(code_module, "_loaded", lambda: set(code_module._SEEN))
    check_unchanged()


def test_a_suite_stores_no_run_computed_after_its_code_changed(
        tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = SuiteSettings(str(tiny_path))
    store = ResultStore(tmp_path / "store")
    suite = Suite(settings, store)
    plan = suite.plan([get_study("segmentation")], [0])
    _changed(monkeypatch)
    with pytest.raises(ConfigError, match=r"since this process loaded fedhh .* run the same "
                       "command again to go on with the new code$"):
        suite.execute(plan)
    assert not list(store.root.glob("*.json"))
    # A worker's suite (no store) names the worker and says to restart it.
    with pytest.raises(ConfigError, match=r"since this worker loaded fedhh .* restart the "
                       "worker, then run the same command again"):
        compute_run(settings, plan[0], suite.identity, code_fingerprint())


class _Workers:
    def __init__(self, codes: dict[str, Any]) -> None:
        self.codes = codes

    def run(self, function: Any, on_error: str = "raise") -> dict[str, Any]:
        return self.codes

    def scheduler_info(self, n_workers: int) -> dict[str, Any]:
        return {"workers": {a: {"memory_limit": 8 * GIB} for a in self.codes}}


def test_a_worker_with_another_numpy_is_refused_naming_the_version() -> None:
    versions = library_versions()
    mine = (fedhh.__version__, code_fingerprint(), versions)
    files = code_module._files()
    theirs_versions = {**versions, "numpy": "2.0.0"}
    theirs = (fedhh.__version__, code_module._fingerprint(files, theirs_versions),
              theirs_versions)
    with pytest.raises(ConfigError, match=rf"1 of 2 Dask workers do not run this client's "
                       rf"fedhh .*tcp://10\.0\.0\.2:1 \(fedhh {fedhh.__version__}, code \w{{12}}, "
                       rf"numpy 2\.0\.0 \(here {np.__version__}\)\)"):
        check_workers(_Workers({"tcp://10.0.0.1:1": mine,  # type: ignore[arg-type]
                                "tcp://10.0.0.2:1": theirs}))
