"""A text dataset whose first line is a table's header naming a column of user ids (a CSV or
TSV file named .txt: ``user_id,item``) is refused, naming the header and how to write the
users: before, read silently, every row one user holding its user id as an item (``1,007``,
or ``1`` and ``007``). A line of items that is no such header reads as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_helpers import import_refused

from fedhh.data.dataset import load_dataset
from fedhh.data.text import import_text


@pytest.mark.parametrize(("text", "shown"), [
    ('user_id,item\n1,007\n2,"1,000"\n', "'user_id,item'"),
    ("\nuser_id\titem\n1\t007\n", "'user_id\\titem'"),  # (after a blank line: line 2)
    ('"user";"query"\n1;new york\n', "'\"user\";\"query\"'"),
    ("ID,Word,Count\n1,cat,2\n", "'ID,Word,Count'"),
])
def test_a_table_header_is_refused(tmp_path: Path, text: str, shown: str) -> None:
    source = tmp_path / "rows.txt"
    message = import_refused(import_text, source, text)
    number = 2 if text.startswith("\n") else 1
    assert message == (
        f"{source}: line {number} is a table's header ({shown}): the text format reads one "
        "user a line, items separated by whitespace, so its rows' user ids would be read as "
        "items; no format reads columns: write each user's items as one JSON array a line, a "
        ".jsonl file (docs/datasets.md, 'JSON lines')")


@pytest.mark.parametrize("first", [
    "user,item is what the header said",  # (spaces: a user's words)
    "user item",  # (two words)
    "user,item,1,000",  # (a field that is no name)
    "cat,dog",  # (no column of ids)
    "user,item;x",  # (two separators)
])
def test_items_that_are_no_header_read_as_before(tmp_path: Path, first: str) -> None:
    source = tmp_path / "users.txt"
    source.write_text(f"{first}\nb\n", encoding="utf-8")
    dataset = load_dataset(import_text(source, tmp_path / "ds"))
    assert sorted(dataset.vocabulary) == sorted({*first.split(), "b"})
