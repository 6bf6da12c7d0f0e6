"""`fedhh experiments --scheduler`: a suite whose workers all left says so, and when one is back.

Before: with every worker of the scheduler gone mid-suite (killed, out of memory, stopped),
the suite sat still with its progress bar, for ever, without a word; nothing said that a worker
was needed, or that Ctrl-C keeps the finished runs.
"""

from __future__ import annotations

from fedhh.experiments.cluster import WorkerWatch

ADDRESS = "tcp://10.0.0.5:8786"


def _watch(counts: list[int]) -> tuple[WorkerWatch, list[str]]:
    said: list[str] = []
    left = iter(counts)
    return WorkerWatch(lambda: next(left), said.append, ADDRESS, grace_s=10.0), said


def test_every_worker_gone_past_the_grace_is_said_once_then_their_return() -> None:
    watch, said = _watch([2, 0, 0, 0, 0, 1])
    for now in (0.0, 1.0, 6.0):  # gone since t = 1, not yet 10 s
        watch.check(now)
    assert said == []
    watch.check(11.0)
    assert said == [
        f"every Dask worker has left the scheduler {ADDRESS} (10 s ago): the runs not done "
        f"wait until one joins (`dask worker {ADDRESS} --nthreads 1 --memory-limit 4GiB`); "
        "Ctrl-C stops here, and every finished run stays stored"]
    watch.check(30.0)  # still gone: said once
    assert len(said) == 1
    watch.check(31.0)
    assert said[1] == f"1 Dask worker joined {ADDRESS}: the runs go on"


def test_a_worker_that_restarts_within_the_grace_says_nothing() -> None:
    # (a LocalCluster's nanny restarts a worker past its memory limit within seconds)
    watch, said = _watch([0, 0, 1, 0, 0])
    for now in (0.0, 9.0, 9.5, 10.0, 19.0):
        watch.check(now)
    assert said == []


def test_a_failing_look_says_nothing() -> None:
    said: list[str] = []

    def gone() -> int:
        raise OSError("scheduler unreachable")

    watch = WorkerWatch(gone, said.append, ADDRESS, grace_s=0.0)
    watch.check(0.0)
    watch.check(100.0)
    assert said == []


def test_start_and_stop_end_the_thread() -> None:
    watch = WorkerWatch(lambda: 1, [].append, ADDRESS, interval_s=0.01).start()
    watch.stop()
    assert watch._thread is not None and not watch._thread.is_alive()
