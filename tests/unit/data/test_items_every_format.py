"""Items that are not words come back byte for byte through every format docs/datasets.md
lists: text, JSON lines (arrays, escaped; objects of counts, raw UTF-8), LEAF JSON, the dataset
folder (saved and loaded), and the exports (`write_text`, `write_jsonl`) read back. Items
with whitespace in them travel through the formats that keep it (JSON lines, the folder)."""

from __future__ import annotations

import json
from pathlib import Path

from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.jsonl import import_jsonl, write_jsonl
from fedhh.data.leaf import import_leaf
from fedhh.data.text import import_text, write_text

WORDLESS = [
    "a\x00b", "\x1b[31m", "\u202eevil", "\x7f", "a\u200bb", "<script>", "a\\x41", '"q"',
    "007", "-0", "+1", "1e-5", "0x1F", "NaN", "null",
    "caf\u00e9", "cafe\u0301", "\u05e9\u05b8\u05c1", "\u0645\u0631\u062d\u0628\u0627",
    "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0010fffd",
    "a\ufeffb", "first.last+tag@example.org", "https://xn--bcher-kva.example/" + "p%20q/" * 60,
]
SPACED = ["a\tb", " lead", "trail ", "   ", "\u00a0", "x\u3000y", "a\x1fb", "new  york"]


def _users(items: list[str]) -> list[dict[str, int]]:
    # (each item held by its own user and, twice, by the next: counts to check as well)
    return [{item: 1, items[(i + 1) % len(items)]: 2} for i, item in enumerate(items)]


def _held(root: Path) -> dict[str, int]:
    dataset = load_dataset(root)
    totals: dict[str, int] = {}
    for user in range(dataset.num_users):
        ids, counts = dataset.user_items(user)
        for i, c in zip(ids.tolist(), counts.tolist(), strict=True):
            totals[dataset.vocabulary[i]] = totals.get(dataset.vocabulary[i], 0) + int(c)
    return totals


def test_wordless_items_round_trip_through_every_format(tmp_path: Path) -> None:
    users = _users(WORDLESS)
    expected = dict.fromkeys(WORDLESS, 3)
    text = tmp_path / "users.txt"
    text.write_text("".join(" ".join([a, b, b]) + "\n" for a, b in (
        list(u) for u in users)), encoding="utf-8")
    assert _held(import_text(text, tmp_path / "text")) == expected
    arrays = tmp_path / "arrays.jsonl"
    arrays.write_text("".join(json.dumps([i for i, c in u.items() for _ in range(c)]) + "\n"
                              for u in users), encoding="utf-8")
    assert _held(import_jsonl(arrays, tmp_path / "arrays")) == expected
    leaf = tmp_path / "leaf.json"
    names = [f"u{k}" for k in range(len(users))]
    leaf.write_text(json.dumps({"users": names, "num_samples": [1] * len(users), "user_data": {
        name: {"x": [" ".join(i for i, c in u.items() for _ in range(c))], "y": [0]}
        for name, u in zip(names, users, strict=True)}}), encoding="utf-8")
    assert _held(import_leaf(leaf, tmp_path / "leaf")) == expected
    folder = save_dataset(from_user_counts(users), tmp_path / "folder")
    assert _held(folder) == expected
    write_text(load_dataset(folder), tmp_path / "back.txt")
    assert _held(import_text(tmp_path / "back.txt", tmp_path / "back-text")) == expected


def test_spaced_items_round_trip_where_spaces_are_kept(tmp_path: Path) -> None:
    users = _users(WORDLESS + SPACED)
    expected = dict.fromkeys(WORDLESS + SPACED, 3)
    counts = tmp_path / "counts.jsonl"
    counts.write_text("".join(json.dumps(u, ensure_ascii=False) + "\n" for u in users),
                      encoding="utf-8")
    assert _held(import_jsonl(counts, tmp_path / "counts")) == expected
    folder = save_dataset(from_user_counts(users), tmp_path / "folder")
    assert _held(folder) == expected
    write_jsonl(load_dataset(folder), tmp_path / "back.jsonl")
    assert _held(import_jsonl(tmp_path / "back.jsonl", tmp_path / "back")) == expected
