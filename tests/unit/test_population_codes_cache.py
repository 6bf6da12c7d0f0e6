"""A token codebook's vocabulary codes are kept next to the dataset and reused; a file that
does not fit the dataset or the codec is ignored."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedhh.codec import Codec
from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.simulation.population import Population


def test_codes_are_cached_and_a_stale_file_is_ignored(tmp_path: Path) -> None:
    users = [{"https://example.org/": 1, "😂": 2}, {"naïve": 1, "東京": 1, "the": 3}]
    dataset = load_dataset(save_dataset(from_user_counts(users, name="kinds"), tmp_path / "d"))
    codec = Codec("general", 120)
    first = Population.build(dataset, codec)
    [cached] = list(Path(dataset.root).glob("item_codes_v1_*.npy"))
    assert np.array_equal(np.load(cached), first.item_codes)
    np.save(cached, first.item_codes[:1])  # stale: another vocabulary
    again = Population.build(dataset, codec)
    assert np.array_equal(again.item_codes, codec.encode_many(list(dataset.vocabulary)).codes)
    assert np.array_equal(np.load(cached), again.item_codes)  # rewritten
    assert not list(Path(dataset.root).glob("item_codes_v1_english*"))  # byte codes: no file
    Population.build(dataset, Codec("english", 60))
    assert not list(Path(dataset.root).glob("item_codes_v1_english*"))
