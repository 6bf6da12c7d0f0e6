"""Warm-start list, item-list files and the Shakespeare parser."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedhh.data.shakespeare import build_shakespeare, parse_play, tokenize
from fedhh.data.wordlists import (
    load_item_list,
    warm_start_list,
    wordfreq_frequencies,
    write_item_list,
)
from fedhh.errors import DatasetError


def test_warm_start_list_is_a_different_source() -> None:
    warm = warm_start_list(2000)
    assert len(warm) == len(set(warm)) == 2000
    assert warm[:3] == ["the", "you", "i"]  # subtitles: conversational English
    assert all(w and not any(c.isspace() for c in w) for w in warm)
    words, freqs = wordfreq_frequencies()
    assert np.all(np.diff(freqs) <= 0)
    top_wordfreq = words[:2000]
    overlap = len(set(warm) & set(top_wordfreq)) / 2000
    assert 0.5 < overlap < 0.95  # related but not the same distribution
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        warm_start_list(-1)


def test_item_list_round_trip(tmp_path: Path) -> None:
    path = write_item_list(["b", "a", "naïve", "don't"], tmp_path / "deny.txt")
    assert load_item_list(path) == ["b", "a", "naïve", "don't"]
    path.write_bytes(b"x\r\ny\nx")  # CRLF and no final newline; repeats kept once
    assert load_item_list(path) == ["x", "y"]
    path.write_bytes("\ufeff你好\n42\n".encode())  # an editor's byte-order mark
    assert load_item_list(path) == ["你好", "42"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"a\n\nb\n", "line 2 is empty"),
        (b"a\n b c\n", r"line 2: item ' b c' begins with whitespace \( \); an item list's "
                        "items may hold spaces inside but not at either end"),
        (b"a\nb c\t\n", r"line 2: item 'b c\\t' ends with whitespace \(\\t\)"),
        (b"a\nb\xc2\xa0\n", r"line 2: item 'b\\xa0' ends with whitespace \(\\xa0\)"),
        (b"a\nb\x0bc\n", r"line 2: item 'b\\x0bc' holds a line break \(\\x0b\)"),
        (b"a\nb\rc\n", r"line 2: item 'b\\rc' holds a line break \(\\r\)"),
        (b"ok\n\xff\n", "line 2: not UTF-8"),
    ],
)
def test_item_list_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "list.txt"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=message):
        load_item_list(path)
    with pytest.raises(DatasetError, match="cannot read"):
        load_item_list(tmp_path / "missing.txt")
    with pytest.raises(DatasetError, match=r"item 2 \('fine '\) ends with whitespace"):
        write_item_list(["fine", "fine "], tmp_path / "out.txt")
    with pytest.raises(DatasetError, match=r"item 1 \('a\\nb'\) holds a line break"):
        write_item_list(["a\nb"], tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()


def test_item_lists_hold_items_with_inner_spaces(tmp_path: Path) -> None:
    """Before, `new york` could not be listed: every whitespace was refused."""
    items = ["new york", "how  to", "1\u00a0000", "東京\u3000駅", "a\tb"]
    path = write_item_list(items, tmp_path / "deny.txt")
    assert load_item_list(path) == items
    path.write_bytes(b"new york\r\nnew york\n")
    assert load_item_list(path) == ["new york"]


PLAY = """# A Play

## ACT I

### SCENE I. A heath.

_Thunder. Enter FIRST WITCH and
SECOND WITCH_

**First Witch**
When shall we three meet again, 'tis said?
_Aside_ The hurly-burly's done.

**FIRST WITCH & Second Witch**
Fair is foul. [Within] Show'd

_Exeunt_
"""


def test_parse_play() -> None:
    users = parse_play(PLAY)
    assert set(users) == {"FIRST WITCH", "SECOND WITCH"}
    first = users["FIRST WITCH"]
    assert first["tis"] == 1 and first["burly's"] == 1 and first["hurly"] == 1
    assert "aside" not in first and "within" not in first and "thunder" not in first
    assert users["SECOND WITCH"] == {"fair": 1, "is": 1, "foul": 1, "show'd": 1}
    assert tokenize("O'er the moon--ne'er!") == ["o'er", "the", "moon", "ne'er"]


def test_shakespeare_corpus() -> None:
    ds = build_shakespeare()
    summary = ds.summary()
    assert summary["users"] > 1000 and summary["users_without_items"] == 0
    assert ds.stats["plays"] == 38
    assert "hamlet" in ds.vocabulary and "ne'er" in ds.vocabulary
