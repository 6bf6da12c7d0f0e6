"""The workers line and the memory warning of a suite on Dask, read from a stand-in client:
a worker without a memory limit (`dask worker --memory-limit 0`) read "0.0 GiB", one of
150 MB "0.1 GiB", and the warning said "1 Dask workers have"."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from fedhh.experiments import cluster as cluster_module
from fedhh.experiments.cluster import GIB, check_workers, code_fingerprint, describe


class _Client:
    """Stands for a distributed Client: workers by address, each with its memory limit in
    bytes (None: none)."""

    def __init__(self, limits: dict[str, float | None]) -> None:
        self.limits = limits

    def scheduler_info(self, n_workers: int) -> dict[str, Any]:
        return {"workers": {address: {"nthreads": 1, "memory_limit": limit}
                            for address, limit in self.limits.items()}}

    def run(self, function: Any, on_error: str) -> dict[str, Any]:
        return {address: ("0.1.0", code_fingerprint(), {}) for address in self.limits}


@pytest.mark.parametrize(("limits", "line"), [
    ([4 * GIB], "1 Dask worker, 1 thread(s), 4.0 GiB"),
    ([None], "1 Dask worker, 1 thread(s), no memory limit"),
    ([0, 4 * GIB], "2 Dask workers, 1 thread(s), 4.0 GiB or no memory limit"),
    ([150e6, 2 * GIB], "2 Dask workers, 1 thread(s), 0.14/2.0 GiB"),
])
def test_the_workers_line_names_a_worker_without_a_memory_limit(
        limits: list[float | None], line: str) -> None:
    client = _Client({f"tcp://10.0.0.{i}:1": limit for i, limit in enumerate(limits)})
    assert describe(client) == line  # type: ignore[arg-type]


def test_the_memory_warning_counts_its_workers(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=cluster_module.__name__):
        check_workers(_Client({"tcp://10.0.0.1:1": GIB, "tcp://10.0.0.2:1": None}
                              ))  # type: ignore[arg-type]
        check_workers(_Client({"tcp://10.0.0.1:1": GIB, "tcp://10.0.0.2:1": GIB}
                              ))  # type: ignore[arg-type]
    assert [r.getMessage().split(" a memory limit")[0] for r in caplog.records] == [
        "1 Dask worker has", "2 Dask workers have"]
