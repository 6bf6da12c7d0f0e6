"""A LocalCluster closed after a suite that succeeded says nothing of the workers its nannies
kill. Before, a worker slow to exit on a loaded machine (load 16 on this host's 2 cores) was
killed after 4 s with distributed's warning "Worker process still alive after 4.0 seconds,
killing", printed twice below a report whose runs were all stored; the warning was silenced
only when the suite ended in an error."""

from __future__ import annotations

import logging
from typing import Any

import distributed
import pytest

from fedhh.experiments.cluster import ClusterOptions, connect


class _Cluster:
    """Stands for LocalCluster: its close logs what a nanny logs of a worker slow to exit."""

    def __init__(self, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _Cluster:
        return self

    def __exit__(self, *args: object) -> None:
        logging.getLogger("distributed.nanny").warning(
            "Worker process still alive after 4.0 seconds, killing")


class _Client:
    def __init__(self, cluster: object) -> None:
        pass

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *args: object) -> None:
        pass


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.parametrize("ends", ["succeeds", "fails"])
def test_closing_the_local_cluster_kills_slow_workers_without_a_word(
        monkeypatch: pytest.MonkeyPatch, ends: str) -> None:
    monkeypatch.setattr(distributed, "LocalCluster", _Cluster)
    monkeypatch.setattr(distributed, "Client", _Client)
    nanny = logging.getLogger("distributed.nanny")
    lines = _Lines()
    nanny.addHandler(lines)
    level = nanny.level
    try:
        with connect(ClusterOptions(workers=1, worker_memory_gib=0.5)):
            if ends == "fails":
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        assert ends == "fails"
    finally:
        nanny.removeHandler(lines)
    assert lines.lines == []
    assert nanny.level == level  # (and the nanny's warnings are back after the close)
