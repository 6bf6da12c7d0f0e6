"""A Ctrl-C (or SIGTERM) while the LocalCluster closes waits for the close. Before, a second
Ctrl-C interrupted it, and distributed closed the cluster again at exit: a suite stopped by
two Ctrl-C 1.5 s apart exited after 12.5 s instead of the 4.6 s one took. The close is a stand-in
here (no worker process): it raises the signal itself, so the test needs no timing."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import distributed
import pytest

from fedhh.experiments import cluster as cluster_module
from fedhh.experiments.cluster import ClusterOptions, SignalsHeld, connect


class _Cluster:
    """Stands for LocalCluster: Ctrl-C in the middle of its close."""

    closed = False

    def __init__(self, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _Cluster:
        return self

    def __exit__(self, *args: object) -> None:
        signal.raise_signal(signal.SIGINT)  # (its handler runs before this returns)
        _Cluster.closed = True


class _Client:
    def __init__(self, cluster: object) -> None:
        pass

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *args: object) -> None:
        pass


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(distributed, "LocalCluster", _Cluster)
    monkeypatch.setattr(distributed, "Client", _Client)
    monkeypatch.setattr(cluster_module, "SAME_SIGNAL_S", 0.0)  # (told however soon it comes)
    _Cluster.closed = False
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_during_the_close_of_a_stopped_suite_lets_the_close_finish(
        stand_in: None) -> None:
    said: list[str] = []
    # (the first Ctrl-C's KeyboardInterrupt, raised once)
    with pytest.raises(KeyboardInterrupt), connect(ClusterOptions(workers=1,
                                                                  worker_memory_gib=0.5),
                                                   said.append):
        raise KeyboardInterrupt
    assert _Cluster.closed
    assert said == ["stopping the LocalCluster's Dask workers first (a few seconds; a run in "
                    "progress is abandoned)"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_during_the_close_of_a_finished_suite_stops_it_once_closed(
        stand_in: None) -> None:
    with pytest.raises(KeyboardInterrupt), connect(ClusterOptions(workers=1,
                                                                  worker_memory_gib=0.5)):
        pass
    assert _Cluster.closed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_past_the_hold_interrupts_at_once() -> None:
    """A close that never ends can still be stopped (after ``CLOSE_HOLD_S``)."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        hold = SignalsHeld(hold_s=0.0)
        with pytest.raises(KeyboardInterrupt), hold:
            hold.start()
            signal.raise_signal(signal.SIGTERM)
            pytest.fail("the signal was held")
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


class _StartingCluster(_Cluster):
    """Stands for LocalCluster: Ctrl-C while its workers start."""

    started = False

    def __init__(self, **kwargs: Any) -> None:
        signal.raise_signal(signal.SIGINT)
        _StartingCluster.started = True

    def __exit__(self, *args: object) -> None:
        _Cluster.closed = True


def test_a_ctrl_c_while_the_workers_start_stops_the_suite_once_they_have(
        stand_in: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, it interrupted the start: the cluster was never closed here, and distributed's
    # close at exit failed on the workers still starting (AssertionError: Status.init).
    monkeypatch.setattr(distributed, "LocalCluster", _StartingCluster)
    _StartingCluster.started = False
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt), connect(ClusterOptions(workers=1,
                                                                  worker_memory_gib=0.5),
                                                   said.append):
        pytest.fail("the suite went on after the Ctrl-C")
    assert _StartingCluster.started and _Cluster.closed
    assert said == ["stopping once the LocalCluster's Dask workers have started (a few seconds)"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
