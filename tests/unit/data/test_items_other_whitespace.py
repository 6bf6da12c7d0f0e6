"""The text format (and LEAF's strings) separate items at every whitespace ``str.split()`` knows,
the no-break space U+00A0, the ideographic space U+3000 and U+2028 among them: ``100\\xa0%``,
one item to a reader of the file, becomes ``100`` and ``%``. That is the format, documented in
docs/datasets.md; an import that met such whitespace now says so once (one warning naming the
first place, the characters and what the piece became) and records it in the dataset's
``stats``. Before, nothing said it: the items were silently other than the file showed. Files
split only at spaces and tabs import without a word, as before."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from fedhh.data.dataset import load_dataset
from fedhh.data.leaf import import_leaf
from fedhh.data.text import OTHER_SPACES, Separators, import_text

KEY = Separators.STATS_KEY


def test_other_spaces_are_what_split_separates_at() -> None:
    every = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert set(OTHER_SPACES) == every - set(" \t\n\r")
    assert len(OTHER_SPACES) == len(set(OTHER_SPACES))


def test_text_split_at_a_no_break_space_is_reported_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = tmp_path / "users.txt"
    source.write_text("the cat\n100\u00a0% sure\nbar\u3000baz q\u2028r\nplain words\n"
                      "x\u00a0y\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="fedhh.data.text"):
        dataset = load_dataset(import_text(source, tmp_path / "ds"))
    assert {"100", "%", "bar", "baz", "q", "r", "x", "y"} <= set(dataset.vocabulary)  # the format
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    message = warnings[0]
    assert message.startswith("users.txt: 3 lines hold whitespace other than the space")
    for name in ("U+00A0 NO-BREAK SPACE", "U+2028 LINE SEPARATOR", "U+3000 IDEOGRAPHIC SPACE"):
        assert name in message
    assert "at line 2: '100\\xa0%' was read as the items '100', '%'" in message
    assert "JSON lines" in message
    assert dataset.stats[KEY] == {
        "count": 3, "first": "line 2", "example": "100\u00a0%",
        "characters": ["U+00A0 NO-BREAK SPACE", "U+2028 LINE SEPARATOR",
                       "U+3000 IDEOGRAPHIC SPACE"]}


@pytest.mark.parametrize("char", ["\x0b", "\x0c", "\x1f", "\x85", "\u202f"])
def test_each_kind_of_other_whitespace_is_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, char: str) -> None:
    source = tmp_path / "users.txt"
    source.write_text(f"a{char}b\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="fedhh.data.text"):
        dataset = load_dataset(import_text(source, tmp_path / "ds"))
    assert dataset.stats[KEY]["count"] == 1
    assert caplog.records[0].getMessage().startswith("users.txt: 1 line holds")


def test_a_piece_of_whitespace_alone_reads_as_no_item(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = tmp_path / "users.txt"
    source.write_text("a \u3000 b\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="fedhh.data.text"):
        import_text(source, tmp_path / "ds")
    assert "'\\u3000' was read as no item" in caplog.records[0].getMessage()


def test_plain_text_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = tmp_path / "users.txt"
    source.write_text("👨‍👩‍👧 https://例え.jp/?q=1\tcafe\u0301\r\n\nłódź 007\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        dataset = load_dataset(import_text(source, tmp_path / "ds"))
    assert not caplog.records
    assert KEY not in dataset.stats
    assert set(dataset.vocabulary) == {"👨‍👩‍👧", "https://例え.jp/?q=1", "cafe\u0301",
                                       "łódź", "007"}


def test_leaf_strings_split_at_other_whitespace_are_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = tmp_path / "reddit.json"
    source.write_text(json.dumps({
        "users": ["u1", "u2"], "num_samples": [2, 1],
        "user_data": {"u1": {"x": ["plain words", [["<BOS>", "a\u00a0b", "<PAD>"]]], "y": []},
                      "u2": {"x": ["10\u202f000 euros"], "y": []}}}), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="fedhh.data.text"):
        dataset = load_dataset(import_leaf(source, tmp_path / "ds"))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert messages[0].startswith("reddit.json: 2 strings hold whitespace")
    assert "at reddit.json: user 'u1': 'a\\xa0b' was read as the items 'a', 'b'" in messages[0]
    assert dataset.stats[KEY]["characters"] == ["U+00A0 NO-BREAK SPACE",
                                                "U+202F NARROW NO-BREAK SPACE"]
    # (LEAF's import is text's, with its own provenance, format and unit)
    assert dataset.provenance == f"imported from LEAF JSON {source.resolve()}"
    assert dataset.stats["source_format"] == "leaf" and dataset.stats["lowercase"] is False
