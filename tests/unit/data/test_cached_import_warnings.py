"""What an import says of a file (its rows read as a table's records, its items split at a
no-break space, a later line's byte-order mark) is said at every run that reads its cached
conversion, not at the first alone: the warnings are kept in the dataset's stats
(``import_warnings``) and said again by ``import_path``. Before, the second run on the same
file was silent, its users holding ``user_id`` as an item as before."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fedhh.data.dataset import load_dataset
from fedhh.data.registry import import_path, resolve_dataset

FILES = {
    "rows.jsonl": "".join(f'{{"user_id": {u + 1}, "item_id": {40 + u % 3}}}\n'
                          for u in range(5)),
    "users.txt": "100\u00a0% sure\nb\n\ufeffc d\n",
}


def _warnings(caplog: pytest.LogCaptureFixture, source: Path, cache: Path) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fedhh.data"):
        resolve_dataset(source, cache)
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_cached_conversion_says_what_its_import_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str) -> None:
    source = tmp_path / name
    source.write_text(FILES[name], encoding="utf-8")
    cache = tmp_path / "cache"
    first = _warnings(caplog, source, cache)
    assert first  # (the file's defects, said at its conversion)
    stats = load_dataset(import_path(source, cache)).stats
    assert stats["import_warnings"] == first
    assert _warnings(caplog, source, cache) == first
    assert _warnings(caplog, source, cache) == first


def test_a_file_the_import_said_nothing_of_says_nothing_cached(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = tmp_path / "users.jsonl"
    source.write_text('["a", "b"]\n["c"]\n', encoding="utf-8")
    cache = tmp_path / "cache"
    assert _warnings(caplog, source, cache) == []
    assert "import_warnings" not in load_dataset(import_path(source, cache)).stats
    assert _warnings(caplog, source, cache) == []
