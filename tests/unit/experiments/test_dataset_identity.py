"""A dataset's identity (part of every store key) holds a digest of its contents: a dataset rebuilt
in place with the same name, folder and sizes is computed again, not served the old one's stored
runs (before, its identity was the same and so were the keys); runs stored under the keys made
before the digest are computed again with a warning, not reused and not a crash."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from fedhh.config import RunConfig
from fedhh.data.dataset import FederatedDataset, from_user_counts, save_dataset
from fedhh.errors import DatasetError
from fedhh.experiments import ResultStore, Study, StudyVariant, Suite, SuiteSettings
from fedhh.experiments.cluster import compute_run
from fedhh.experiments.code import code_fingerprint
from fedhh.experiments.runner import CONTENTS, legacy_identity

WORDS = ("the", "and", "you", "that", "was", "for", "with", "have", "this", "not", "apple",
         "banana", "cherry", "zebra", "quartz")
STUDY = Study("tiny", 0, "tiny", "test study", "-", (
    StudyVariant("5bit", RunConfig(dim_limit=1 << 16, codec="5bit", rounds=6, segment_bits=10,
                                  single_item=True)),))


def users(num_users: int = 1000) -> list[dict[str, int]]:
    rng = np.random.default_rng(0)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    return [{WORDS[i]: int(rng.integers(1, 5))
             for i in rng.choice(len(WORDS), size=int(rng.integers(1, 5)), replace=False,
                                 p=weights / weights.sum())} for _ in range(num_users)]


def test_a_dataset_rebuilt_in_place_with_the_same_sizes_is_computed_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path, store = tmp_path / "data", ResultStore(tmp_path / "store")
    settings = SuiteSettings(str(path), eps_agg=4.0)
    held = users()
    save_dataset(from_user_counts(held, name="tiny"), path)
    first = Suite(settings, store)
    [old] = first.plan([STUDY], [0])
    first.execute([old])
    # Another build at the same path: the same users in another order (another seed of a
    # generator would do the same), so the same name, folder, users, entries and vocabulary.
    save_dataset(from_user_counts(held[::-1], name="tiny"), path)
    again = Suite(settings, store)
    assert legacy_identity(again.identity) == legacy_identity(first.identity)
    assert again.identity[CONTENTS] != first.identity[CONTENTS]
    [new] = again.plan([STUDY], [0])
    assert new.key != old.key
    with caplog.at_level(logging.WARNING):
        assert again.load_stored([new]) == ({}, [new])
    assert not caplog.records
    # A store of fedhh before the digest: the run under the key of the identity without it.
    legacy = again.legacy_key(new)
    assert legacy is not None and legacy not in (old.key, new.key)
    for suffix in (".npz", ".json"):
        shutil.copy(store.root / f"{old.key}{suffix}", store.root / f"{legacy}{suffix}")
    meta = json.loads((store.root / f"{legacy}.json").read_text())
    (store.root / f"{legacy}.json").write_text(json.dumps({**meta, "key": legacy}))
    assert store.load(legacy) is not None  # a readable entry: it is its key that is refused
    with caplog.at_level(logging.WARNING):
        records = again.execute([new])
    assert (again.computed, again.reused) == (1, 0) and list(records) == [new.key]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"1 of the runs to compute are stored in {store.root} under keys "
                              "made before a store key held a digest of the dataset's contents "
                              f"(e.g. {legacy}.json): they are not reused")


def test_a_worker_whose_dataset_has_other_contents_is_refused_saying_so(
        tiny_path: Path, tiny: FederatedDataset) -> None:
    suite = Suite(SuiteSettings(str(tiny_path)), None, tiny)
    [run] = suite.plan([STUDY], [0])
    theirs = {**suite.identity, CONTENTS: "0" * 64}
    with pytest.raises(DatasetError, match=r"has the client's name, folder and sizes but other "
                       r"contents \(SHA-256 \w{12}, the client's 000000000000: another build"):
        compute_run(suite.settings, run, theirs, code_fingerprint())


def test_the_identity_and_the_runs_caches_hash_the_dataset_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The identity's digest is the one the simulator's caches beside the dataset key on (before,
    the identity hashed the dataset for itself: twice per suite where digest.json cannot keep the
    digest, a read-only folder or files written under 2 s before)."""
    import fedhh.data.digest
    import fedhh.data.truth

    hashed: list[Path | None] = []
    real = fedhh.data.digest.content_digest

    def counted(dataset: FederatedDataset) -> str:
        hashed.append(dataset.root)
        return real(dataset)

    monkeypatch.setattr(fedhh.data.digest, "content_digest", counted)
    monkeypatch.setattr(fedhh.data.truth, "content_digest", counted)
    path = save_dataset(from_user_counts(users(200), name="tiny"), tmp_path / "data")
    suite = Suite(SuiteSettings(str(path), eps_agg=4.0), ResultStore(tmp_path / "store"))
    # (not single-item: the run's ground truth and code truth are cached beside the dataset)
    study = Study("tiny", 0, "tiny", "test study", "-", (StudyVariant("5bit", RunConfig(
        dim_limit=1 << 16, codec="5bit", rounds=6, segment_bits=10)),))
    [run] = suite.plan([study], [0])
    suite.execute([run])
    assert suite.computed == 1
    cached = {p.name for p in path.iterdir()}
    assert "truth.json" in cached and any(n.startswith("truth_codes_v2_") for n in cached)
    assert hashed == [path]
