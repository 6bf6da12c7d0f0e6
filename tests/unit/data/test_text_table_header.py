"""A text dataset whose first line is a table's header naming a column of user ids (a CSV or
TSV file named .txt: ``user_id,item``) is refused, naming the header and how to write the
users: before, read silently, every row one user holding its user id as an item (``1,007``,
or ``1`` and ``007``). A line of items that is no such header reads as before."""

from __future__ import annotations

import logging
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from _data_helpers import import_refused

from fedhh.data.dataset import FederatedDataset, load_dataset
from fedhh.data.text import import_text


def _read_as_lines(dataset: FederatedDataset, text: str) -> None:
    """Each line of ``text`` is one user of ``dataset``, holding its words."""
    lines = text.split("\n")[:-1]
    assert dataset.num_users == len(lines)
    for user, line in enumerate(lines):
        items, counts = dataset.user_items(user)
        assert Counter({dataset.vocabulary[i]: c for i, c in zip(
            items.tolist(), counts.tolist(), strict=True)}) == Counter(line.split())


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


@pytest.mark.parametrize("text", [
    "user,item\nthe cat sat\n",  # (the next line no row of two columns)
    "user,item\n",  # (no line after it)
    "user,item\n\n\nnew york\n",  # (blank lines, users too, then no row)
    "id\tword\nthe cat\n",
    "user;item\n1,2\n",  # (no row at its separator)
    "user,item,count\n1,cat\n",  # (two columns of three)
])
def test_a_users_one_item_that_reads_as_a_header_is_read_as_items(tmp_path: Path,
                                                                 text: str) -> None:
    """``user,item`` is an item a text user may hold: a header only where the next line with
    anything on it is a row of its table. Before, refused whatever followed it."""
    source = tmp_path / "users.txt"
    source.write_text(text, encoding="utf-8")
    dataset = load_dataset(import_text(source, tmp_path / "ds"))
    _read_as_lines(dataset, text)


@pytest.mark.parametrize(("text", "shown", "row", "more"), [
    ("user item\n1 apple\n1 pear\n2 apple\n", "'user item'", "'1 apple'", "1 more column"),
    ("\nID word count\n1 cat 2\n\n2 dog 1\n", "'ID word count'", "'1 cat 2'", "2 more columns"),
    ("query user_id\n" + "new 7\n" * 25, "'query user_id'", "'new 7'", "1 more column"),
])
def test_a_table_header_of_spaced_names_is_refused_where_rows_follow(
        tmp_path: Path, text: str, shown: str, row: str, more: str) -> None:
    """A header of names separated by spaces, one a column of user ids, whose next lines are all
    its rows (as many fields, a decimal id): before, read silently, each row a user holding its
    id as an item."""
    source = tmp_path / "rows.txt"
    message = import_refused(import_text, source, text)
    number = 2 if text.startswith("\n") else 1
    assert message == (
        f"{source}: line {number} is a table's header ({shown}), the lines after it its rows "
        f"({row}: a user id, then {more}): the text format reads one user a line, items "
        "separated by whitespace, so its rows' user ids would be read as items; no format reads "
        "columns: write each user's items as one JSON array a line, a .jsonl file "
        "(docs/datasets.md, 'JSON lines')")


@pytest.mark.parametrize("text", [
    "user item\nb\n",  # (the next line no row)
    "user item\n1 apple\n",  # (one row: a user's two words as often)
    "user item\nalice apple\nbob pear\n",  # (no decimal ids)
    "user item\n1 apple\nthe cat sat\n2 pear\n",  # (a line of no row)
    "user item\n" + "\n" * 20 + "1 a\n2 b\n",  # (no row within the lines looked at)
])
def test_spaced_names_read_as_items_are_said_with_how_to_skip_them(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str) -> None:
    """Where the lines after such a header are not all its rows, its words are a user's items,
    as before, and a warning says so, with how to delete the line; the dataset keeps it."""
    source = tmp_path / "users.txt"
    source.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="fedhh.data"):
        dataset = load_dataset(import_text(source, tmp_path / "ds"))
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [
        "users.txt: line 1 ('user item') reads as a table's header, names separated by spaces, "
        "one of them a column of user ids; the text format reads it as one user holding those "
        "words as items. If it is a header, delete that line (sed '1d' users.txt > "
        "without-header-users.txt: "
        "every line is one user); if the file is a table of user ids and items, write each "
        "user's items as one JSON array a line, a .jsonl file (docs/datasets.md, 'JSON lines')"]
    assert dataset.stats["import_warnings"] == said
    _read_as_lines(dataset, text)


@pytest.mark.parametrize("first", ["the cat", "cat dog", "user", "user,item", "user item 1,000",
                                   '"user" item'])
def test_words_that_are_no_spaced_header_warn_of_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, first: str) -> None:
    source = tmp_path / "users.txt"
    source.write_text(f"{first}\n1 a\n2 b\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="fedhh.data"):
        import_text(source, tmp_path / "ds")
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("name", ["items.txt", "my items.txt"])
def test_the_warnings_command_deletes_the_line_and_keeps_the_file(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str) -> None:
    """The command the warning gives, run by a shell in the file's folder, writes the file
    without its first line beside it, the file kept. Before, it wrote `> items.txt`, which
    emptied a file of that name before sed read it, and left a name with a space unquoted."""
    text = "user item\n1 apple\nthe cat sat\n"
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="fedhh.data"):
        load_dataset(import_text(source, tmp_path / "ds"))
    [said] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    command = said.split("(sed ", 1)[1].split(": every line", 1)[0]
    subprocess.run(f"sed {command}", shell=True, cwd=tmp_path, check=True)
    assert source.read_text(encoding="utf-8") == text
    assert (tmp_path / f"without-header-{name}").read_text(encoding="utf-8") == (
        "1 apple\nthe cat sat\n")
