"""A token codebook's vocabulary codes, and the per-code truth, are kept next to the dataset
with the SHA-256 of its contents and reused for the same contents only; a file that does not
fit the dataset or the codec is ignored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from fedhh.codec import Codec
from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.truth import ground_truth as item_truth
from fedhh.simulation.population import Population
from fedhh.simulation.runner import ground_truth


def test_codes_are_cached_and_a_stale_file_is_ignored(tmp_path: Path) -> None:
    users = [{"https://example.org/": 1, "😂": 2}, {"naïve": 1, "東京": 1, "the": 3}]
    dataset = load_dataset(save_dataset(from_user_counts(users, name="kinds"), tmp_path / "d"))
    codec = Codec("general", 120)
    (Path(dataset.root) / f"item_codes_v1_{codec.key}.npy").write_bytes(b"former")
    first = Population.build(dataset, codec)
    [cached] = list(Path(dataset.root).glob("item_codes_*"))  # (the v1 file: removed)
    assert cached.name == f"item_codes_v2_{codec.key}.npz"
    with np.load(cached) as data:
        assert np.array_equal(data["codes"], first.item_codes)
        contents = data["contents"]
    np.savez(cached, codes=first.item_codes[:1], contents=contents)  # another vocabulary
    again = Population.build(dataset, codec)
    assert np.array_equal(again.item_codes, codec.encode_many(list(dataset.vocabulary)).codes)
    with np.load(cached) as data:
        assert np.array_equal(data["codes"], again.item_codes)  # rewritten
    Population.build(dataset, Codec("english", 60))
    assert not list(Path(dataset.root).glob("item_codes_*english*"))  # byte codes: no file


def pets(tmp_path: Path) -> tuple[Path, Callable[[], tuple[np.ndarray, np.ndarray]]]:
    """A small dataset's folder, and a run over it: the item codes and the per-code truth's
    codes of a population built from the folder as it is then (through the caches)."""
    root = save_dataset(from_user_counts([{"cat": 2, "dog": 1}, {"cat": 1}], name="pets"),
                        tmp_path / "d")
    codec = Codec("general", 120)

    def run() -> tuple[np.ndarray, np.ndarray]:
        dataset = load_dataset(root)
        population = Population.build(dataset, codec)
        truth = ground_truth(population, item_truth(dataset))
        assert truth is not None
        return population.item_codes, truth.codes

    return root, run


def test_items_edited_in_place_to_the_same_sizes_are_encoded_and_counted_again(
        tmp_path: Path) -> None:
    """Before, the codes were kept by the vocabulary's size and the per-code truth by the
    dataset's sizes: vocab.txt edited to other items of the same lengths ("cat" to "cow")
    was given the former items' codes and truth on the next run."""
    root, run = pets(tmp_path)
    codec = Codec("general", 120)
    codes, truth_codes = run()
    vocab = (root / "vocab.txt").read_text(encoding="utf-8")
    (root / "vocab.txt").write_text(vocab.replace("cat", "cow"), encoding="utf-8")
    edited = load_dataset(root)
    assert edited.vocabulary == ("cow", "dog")
    new_codes, new_truth_codes = run()
    assert np.array_equal(new_codes, codec.encode_many(["cow", "dog"]).codes)
    assert not np.array_equal(new_codes, codes)
    assert np.array_equal(np.sort(new_truth_codes), np.sort(new_codes))
    assert not np.array_equal(np.sort(new_truth_codes), np.sort(truth_codes))
