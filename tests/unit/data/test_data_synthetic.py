"""synthetic-reddit: determinism, independence from the worker count, calibrated statistics."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import string
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _data_helpers import SigtermAsCtrlC, fingerprint, named, signal_after

from fedhh.data import synthetic
from fedhh.data.dataset import load_dataset
from fedhh.data.synthetic import SyntheticShape, cached_tables, generate_shard, generate_synthetic

# A reduced lexicon and fewer topics keep the tables cheap; the per-user model is the default.
SMALL = dataclasses.replace(SyntheticShape(), tail_strings=20_000, num_topics=50,
                            topic_size=500)
# The tests of SMALL share one seed: the process keeps the last tables built (one entry), so
# they are built once for all three (~2.3 s CPU a build; before, seeds 7 and 3 and the
# calibration test's tables between them made three builds). The calibration test, with
# tables of its own, comes last.
SEED = 3


def test_same_seed_same_dataset_any_workers(tmp_path: Path) -> None:
    one = generate_synthetic(tmp_path / "a", num_users=900, seed=SEED, shape=SMALL,
                             workers=1, shard_users=400)
    two = generate_synthetic(tmp_path / "b", num_users=900, seed=SEED, shape=SMALL,
                             workers=2, shard_users=400)
    fa, fb = fingerprint(one), fingerprint(two)
    assert fa.keys() == fb.keys()
    assert {k: v for k, v in fa.items() if k != "meta.json"} == {
        k: v for k, v in fb.items() if k != "meta.json"}
    ds = load_dataset(one)
    assert ds.num_users == 900 and ds.counts.dtype == np.uint16
    assert ds.stats["seed"] == SEED


def test_shards_are_seeded_by_index(tmp_path: Path) -> None:
    _, _, tables = cached_tables(SEED, SMALL)
    a = generate_shard(tables, SEED, 5, 200, tmp_path / "a")
    b = generate_shard(tables, SEED, 5, 200, tmp_path / "b")
    c = generate_shard(tables, SEED + 1, 5, 200, tmp_path / "c")
    assert fingerprint(tmp_path / "a") == fingerprint(tmp_path / "b")
    assert fingerprint(tmp_path / "a") != fingerprint(tmp_path / "c")
    assert a["tokens"] == b["tokens"] != c["tokens"]


def test_invalid_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="num_users must be >= 1, got 0"):
        generate_synthetic(tmp_path / "x", num_users=0)
    with pytest.raises(ValueError, match="seed must be >= 0, got -1"):
        generate_synthetic(tmp_path / "x", num_users=5, seed=-1)


def test_serial_build_keeps_the_callers_sigterm_handler(tmp_path: Path) -> None:
    """One shard is drawn in the caller's process: its SIGTERM handler (the CLI's SIGTERM as
    Ctrl-C) must stay (before, the serial path reset it to the default, so a `fedhh
    experiments` that had built a one-shard dataset was killed by SIGTERM, exit 143, no line)."""
    import signal

    def handler(signum: int, frame: object) -> None:  # pragma: no cover - never signalled
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        generate_synthetic(tmp_path / "one", num_users=50, seed=SEED, shape=SMALL,
                           workers=1)
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_as_the_scratch_folder_is_made_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM as the ``.gen-`` folder's mkdir returns: nothing stays (before, mkdtemp made it
    before the try that removes it; the signal in mkdtemp's return, or while the jobs were
    listed, left it in the cache: `fedhh experiments` stopped by SIGTERM as it began a build)."""
    monkeypatch.setattr(os, "mkdir", signal_after(os.mkdir, named(".gen-")))
    with SigtermAsCtrlC(), pytest.raises(KeyboardInterrupt):
        generate_synthetic(tmp_path / "d", num_users=50, seed=SEED, shape=SMALL, workers=1)
    assert list(tmp_path.iterdir()) == []


# Armed by the test below: the next fork of this process is signalled, once, from its at-fork
# callback (a callback can be registered but never removed; disarmed, it does nothing).
_SIGNAL_AT_FORK: list[bool] = []
_REGISTERED: list[bool] = []


def _signal_at_fork() -> None:
    if _SIGNAL_AT_FORK:
        _SIGNAL_AT_FORK.clear()
        SigtermAsCtrlC.send()


def test_sigterm_while_the_pool_forks_stops_the_build(tmp_path: Path) -> None:
    """SIGTERM while the pool forks its workers: handled there (os.fork's at-fork callbacks) it
    raised where Python prints "Exception ignored" and drops it, and the build went on to the
    end, the command exiting 0 (a `fedhh experiments` that forked its pool as the signal came).
    Now held while the pool starts: the build stops, its workers ended, nothing left."""
    if not hasattr(os, "register_at_fork") or not hasattr(signal, "pthread_sigmask"):
        pytest.skip("no fork here")
    if not _REGISTERED:
        os.register_at_fork(before=_signal_at_fork)
        _REGISTERED.append(True)
    children = set(multiprocessing.active_children())  # (another test's, if any)
    with SigtermAsCtrlC(), pytest.raises(KeyboardInterrupt):
        _SIGNAL_AT_FORK.append(True)
        try:
            generate_synthetic(tmp_path / "d", num_users=900, seed=SEED, shape=SMALL,
                               workers=2, shard_users=400)
        finally:
            _SIGNAL_AT_FORK.clear()
    assert list(tmp_path.iterdir()) == []
    assert set(multiprocessing.active_children()) <= children  # (the pool ended its workers)
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, ())


def test_pool_workers_leave_ctrl_c_and_sigterm_to_the_caller(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker ignores Ctrl-C and SIGTERM (they reach the whole process group; the caller
    stops the pool, which kills its workers) and blocks neither (the caller held both while it
    forked them). Before, a worker died of SIGTERM, possibly holding the pool's task-queue lock,
    and the caller's terminate waited for it for ever; and took Ctrl-C as KeyboardInterrupt,
    printing its traceback under "fedhh data: interrupted"."""
    if not hasattr(signal, "pthread_sigmask"):
        pytest.skip("no signal masks here")
    reports = tmp_path / "reports"
    reports.mkdir()

    def report_then_generate(tables: Any, seed: int, shard: int, users: int, out: Path
                             ) -> dict[str, Any]:
        """(in a worker: the pool's workers are forked, and call this module global)"""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ()) & {signal.SIGINT, signal.SIGTERM}
        (reports / f"{os.getpid()}-{shard}").write_text(
            f"{signal.getsignal(signal.SIGINT)!r} {signal.getsignal(signal.SIGTERM)!r} "
            f"{sorted(int(s) for s in blocked)}")
        return generate_shard(tables, seed, shard, users, out)

    monkeypatch.setattr(synthetic, "generate_shard", report_then_generate)
    children = set(multiprocessing.active_children())  # (another test's, if any)
    with SigtermAsCtrlC():
        generate_synthetic(tmp_path / "d", num_users=900, seed=SEED, shape=SMALL,
                           workers=2, shard_users=400)
    said = [p.read_text() for p in reports.iterdir()]
    assert len(said) == 3  # (one a shard)
    assert set(said) == {f"{signal.SIG_IGN!r} {signal.SIG_IGN!r} []"}
    assert set(multiprocessing.active_children()) <= children  # (ended all the same)


def test_small_scale_statistics_are_calibrated(tmp_path: Path) -> None:
    shape = dataclasses.replace(SyntheticShape(), tail_strings=100_000)
    path = generate_synthetic(tmp_path / "d", num_users=10_000, seed=0, shape=shape, workers=1)
    ds = load_dataset(path)
    summary = ds.summary()
    # Paper (LEAF Reddit): 1092 words and 379 distinct words per user on average.
    assert 1092 * 0.9 < summary["mean_words_per_user"] < 1092 * 1.1
    assert 379 * 0.9 < summary["mean_distinct_words_per_user"] < 379 * 1.1
    assert 0.015 < ds.stats["tail_token_share"] < 0.04
    tokens = ds.tokens_per_user()
    assert tokens.min() >= shape.min_tokens // 2 and np.median(tokens) < tokens.mean()  # skewed
    top = [ds.vocabulary[i] for i in np.argsort(-np.bincount(
        ds.items, weights=ds.counts.astype(np.float64)))[:10]]
    assert {"the", "to", "and", "of", "a"} <= set(top)
    letters = set(string.ascii_lowercase + string.digits + "'#@._-%:,")
    assert all(set(w) <= letters for w in ds.vocabulary)
