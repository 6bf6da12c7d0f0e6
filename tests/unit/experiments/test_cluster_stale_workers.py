"""A Dask worker whose fedhh files changed on disk since it started (a `git pull` or an edit in
the checkout the workers and the client share) runs the code it loaded: the refusal says so
and says to restart it. Before, "install the same fedhh ... on every worker" alone, to a
researcher whose workers run from the client's own checkout. Stand-in clients; no worker."""

from __future__ import annotations

from typing import Any

import pytest

from fedhh.errors import ConfigError
from fedhh.experiments import code as code_module
from fedhh.experiments.cluster import check_workers, code_fingerprint, compute_run

OLD = "a" * 64


class _Client:
    """Stands for a distributed Client whose workers answer ``_worker_code`` with ``codes``."""

    def __init__(self, codes: dict[str, tuple[Any, ...]]) -> None:
        self.codes = codes

    def run(self, function: Any, on_error: str) -> dict[str, tuple[Any, ...]]:
        return self.codes

    def scheduler_info(self, n_workers: int) -> dict[str, Any]:
        return {"workers": {a: {"nthreads": 1, "memory_limit": 8 << 30} for a in self.codes}}


def test_workers_whose_files_changed_since_they_started_are_told_to_restart() -> None:
    stale: tuple[Any, ...] = ("0.1.0", OLD, {}, ["experiments/plots.py"])
    with pytest.raises(ConfigError) as refused:
        check_workers(_Client({"tcp://10.0.0.1:1": stale,
                               "tcp://10.0.0.2:1": stale}))  # type: ignore[arg-type]
    assert "tcp://10.0.0.1:1 (fedhh 0.1.0, code aaaaaaaaaaaa, its fedhh files changed on disk " \
           "since it started (experiments/plots.py))" in str(refused.value)
    assert str(refused.value).endswith("; restart them: a Dask worker keeps running the fedhh "
                                       "it loaded when it started")


def test_a_worker_of_other_code_besides_a_stale_one_is_told_to_install() -> None:
    stale: tuple[Any, ...] = ("0.1.0", OLD, {}, ["a.py", "b.py", "c.py"])
    other: tuple[Any, ...] = ("0.1.0", "b" * 64, {}, [])
    with pytest.raises(ConfigError) as refused:
        check_workers(_Client({"tcp://10.0.0.1:1": stale,
                               "tcp://10.0.0.2:1": other}))  # type: ignore[arg-type]
    assert "changed on disk since it started (a.py, b.py and 1 more)" in str(refused.value)
    assert str(refused.value).endswith(
        "wordfreq, pyspellchecker, on every worker; restart those whose files changed on disk "
        "since they started")


def test_a_task_on_a_stale_worker_says_to_restart_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fedhh.experiments.cluster.changed_on_disk", lambda: ["rounds.py"])
    with pytest.raises(ConfigError, match=r"its fedhh files changed on disk since it started "
                                          r"\(rounds\.py\): restart it; install the same"):
        compute_run(None, None, {}, OLD)  # type: ignore[arg-type]
    assert code_fingerprint() != OLD


def test_changed_on_disk_lists_every_file_changed_since_the_fingerprint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = code_module._state(code_module._files())
    one = sorted(now)[0]
    monkeypatch.setattr(code_module, "_STATE", now)
    assert code_module.changed_on_disk() == []
    assert code_module.changed_on_disk() == []  # (it changes nothing it looks at later)
    monkeypatch.setattr(code_module, "_STATE", {k: v for k, v in now.items() if k != one})
    assert code_module.changed_on_disk() == [one]  # (a source file, loaded or not)


def test_a_client_whose_own_files_changed_is_told_to_run_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers started (a LocalCluster's, after a dataset was built) with files changed
    since the client loaded its own: the client is the one to start again."""
    monkeypatch.setattr("fedhh.experiments.cluster.changed_on_disk", lambda: ["rounds.py"])
    newer: tuple[Any, ...] = ("0.1.0", "c" * 64, {}, [])
    with pytest.raises(ConfigError, match=r"; this client's own fedhh files changed on disk "
                                          r"since it started \(rounds\.py\): run the same "
                                          r"command again; or install the same fedhh"):
        check_workers(_Client({"tcp://10.0.0.1:1": newer}))  # type: ignore[arg-type]
