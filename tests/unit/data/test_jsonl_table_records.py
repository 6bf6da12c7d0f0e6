"""A JSON-lines file written from a table, one (user, item) row a line as pandas'
``to_json(orient="records", lines=True)`` writes it, is told as records: a row whose item is a
string is refused with how to write the file (before, only "its count must be an integer ...,
got '007'"), and rows of numbers, each a valid object of item counts, import with a warning
that every user then holds the items ``user_id`` and ``item_id`` (before, silently: the
users' items were lost)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from _data_helpers import import_refused

from fedhh.data.dataset import load_dataset
from fedhh.data.jsonl import import_jsonl

RECORD = ("an object is one user's item counts ({\"new york\": 3}), not a record of fields: for "
          "a table of (user, item) rows, write each user's items as one JSON array a line")


@pytest.mark.parametrize(("line", "said"), [
    ('{"user": 7, "item": "007"}', "item 2 ('item'): its count must be an integer from 1 to "
                                   f"4,294,967,295, got '007'; {RECORD}"),
    ('{"user": "u7", "query": "new york"}', f"item 1 ('user'): its count must be an integer "
                                            f"from 1 to 4,294,967,295, got 'u7'; {RECORD}"),
    ('{"a": "2"}', "item 1 ('a'): its count must be an integer from 1 to 4,294,967,295, "
                   "got '2'"),  # (a count in quotes, no record)
])
def test_a_record_of_strings_is_refused_as_one(tmp_path: Path, line: str, said: str) -> None:
    source = tmp_path / "rows.jsonl"
    message = import_refused(import_jsonl, source, f"{line}\n")
    assert message.startswith(f"{source}: line 1: {said}")
    assert message.endswith("'JSON lines')") == (RECORD in said)


def _warnings(tmp_path: Path, lines: list[str], caplog: pytest.LogCaptureFixture) -> list[str]:
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="fedhh.data.jsonl"):
        load_dataset(import_jsonl(source, tmp_path / "ds"))
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_records_of_numbers_are_said_to_be_read_as_counts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rows = [f'{{"user_id": {u + 1}, "item_id": {40 + u % 3}}}' for u in range(5)]
    warnings = _warnings(tmp_path, [*rows[:2], "", *rows[2:]], caplog)
    assert warnings == [
        "rows.jsonl: every line is an object holding the key 'user_id', a different count on "
        "each line, as a table's records are ({\"user_id\": 7, \"item\": 42}); it was read as "
        "item counts, every user holding the item 'user_id': if the file is a table of (user, "
        "item) rows, write each user's items as one JSON array a line, items as JSON strings "
        "(docs/datasets.md, 'JSON lines')"]


@pytest.mark.parametrize("lines", [
    ['{"user": 1, "cat": 2}', '{"user": 1, "dog": 1}'],  # (a count held twice)
    ['{"user_id": 1, "item_id": 4}'],  # (one line)
    ['{"user_id": 1, "item_id": 4}', '["user_id"]'],  # (an array)
    ['{"user_id": 1, "item_id": 4}', '{"item_id": 5}'],  # (a line without it)
    ['{"cat": 1, "dog": 4}', '{"cat": 2, "dog": 5}'],  # (no key named as an id)
])
def test_item_counts_are_not_taken_for_records(tmp_path: Path, lines: list[str],
                                               caplog: pytest.LogCaptureFixture) -> None:
    assert _warnings(tmp_path, lines, caplog) == []
