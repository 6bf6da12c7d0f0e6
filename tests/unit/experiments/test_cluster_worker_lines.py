"""What a LocalCluster's workers write on the terminal they share with the client. One whose
process dies (killed here; past its memory limit, crashed) is told in the suite's words: what
happened and that a run it held goes to a worker again (before, the one line it printed was its
nanny's "Restarting worker (status=Status.running)"). A run that fails is told by the client
alone, not also dumped by its worker. A worker started after the client's own files changed on
disk says to run the command again."""

from __future__ import annotations

import logging
import operator
import os
import signal
import threading
from pathlib import Path

import pytest

from fedhh.errors import FedhhError
from fedhh.experiments import ResultStore, Suite, SuiteSettings, get_study
from fedhh.experiments.cluster import RESTARTED, ClusterOptions, connect, execute

pytestmark = pytest.mark.slow


class _Said(logging.Handler):
    """The warnings of the nanny's logger, as the suite's handler gets them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.restart = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        if "restart" in line.lower() or "starts another" in line:
            self.restart.set()


def test_a_killed_worker_process_is_told_in_the_suites_words() -> None:
    nanny = logging.getLogger("distributed.nanny")
    said = _Said()
    nanny.addHandler(said)
    try:
        with connect(ClusterOptions(workers=1, worker_memory_gib=1)) as client:
            (pid,) = client.run(os.getpid).values()
            os.kill(pid, signal.SIGKILL)
            # (its nanny notices the death and starts another: the line is logged then)
            assert said.restart.wait(120), said.lines
            client.wait_for_workers(1, timeout=120)
    finally:
        nanny.removeHandler(said)
    assert RESTARTED in said.lines, said.lines
    assert not any(line.startswith("Restarting worker") for line in said.lines), said.lines


def test_a_failed_run_is_not_dumped_by_its_worker(capfd: pytest.CaptureFixture[str]) -> None:
    """A LocalCluster worker's "Compute Failed" dump (key, task, exception, traceback: 6 lines
    a run on the terminal the workers share with the client) is not written: the client tells
    a failed run, once per error. Before, a suite given an impossible privacy target printed
    it for each of its runs."""
    # (the worker logs the failure before it tells the scheduler, so before this raises)
    with connect(ClusterOptions(workers=1, worker_memory_gib=1)) as client, \
            pytest.raises(ZeroDivisionError):
        client.submit(operator.truediv, 1, 0, key="fedhh-test-fails").result()
    assert "Compute Failed" not in capfd.readouterr().err


def test_a_worker_started_after_the_clients_files_changed_says_to_run_again(
        tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's fedhh files changed on disk after it started (a `git pull` mid-suite), and
    a worker started since (its nanny restarted it after a death) loaded the new ones: its
    refusal names the client's changed files and says to run the same command again. Before,
    "install the same fedhh ... on every worker", to a suite on one machine and one install.
    (The client's code is made to differ from the worker's; the check before any run, which
    the worker started since passed, is left out.)"""
    from fedhh.experiments import cluster as cluster_module

    suite = Suite(SuiteSettings(str(tiny_path)), ResultStore(tmp_path / "store"))
    plan = suite.plan([get_study("segmentation")], [0])
    monkeypatch.setattr(cluster_module, "code_fingerprint", lambda: "0" * 64)
    monkeypatch.setattr(cluster_module, "changed_on_disk", lambda: ["experiments/runner.py"])
    monkeypatch.setattr(cluster_module, "check_workers", lambda client, datasets: None)
    with connect(ClusterOptions(workers=1, worker_memory_gib=1)) as client, \
            pytest.raises(FedhhError) as refused:
        execute(suite, plan, client)
    said = str(refused.value.__cause__)  # (told once, in the run's line: the error counts)
    assert said.startswith("Dask worker tcp://127.0.0.1:"), said
    assert said.endswith(" runs fedhh's files as they are on disk now, and this client the ones "
                         "it loaded when it started: they changed since "
                         "(experiments/runner.py); run the same command again (the runs that "
                         "finished are stored)"), said
