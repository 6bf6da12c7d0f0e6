"""A newcomer's JSON file of every user at once (``json.dump(users, f)``: one line, or many with
``indent=``, or an object keyed by user) is told what it is and how to write JSON lines, as a
``.jsonl`` and as a ``.json`` (before: ``item 0 (['a', 'b']) is a list, not a string``,
``not JSON: Expecting value``, and for a ``.json`` the advice to rename it ``.jsonl``, where it
fails again). Files that are JSON lines, or a record a line, keep their own errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _data_helpers import import_refused

from fedhh.data.jsonl import import_jsonl
from fedhh.data.leaf import import_leaf

USERS = [["new york", "café"], ["東京"], {"a": 2}]
BY_NAME = {"alice": ["new york", "café"], "bob": ["東京"]}
ONE_A_LINE = "one json.dumps(user) a line"


@pytest.mark.parametrize("text", [
    json.dumps(USERS),  # one line
    json.dumps(USERS, indent=2),  # many: the first line is "["
    json.dumps(USERS[:2], indent=None, separators=(",\n", ":")),  # '[["new york",'
    json.dumps(BY_NAME),  # an object keyed by user
    json.dumps(BY_NAME, indent=2),
    json.dumps([{"a": 1}, {"b": 2}]),  # users' item-count objects
])
def test_every_user_in_one_value_as_jsonl(tmp_path: Path, text: str) -> None:
    source = tmp_path / "users.jsonl"
    message = import_refused(import_jsonl, source, text)
    assert message.startswith(f"{source}: line 1: ") and ONE_A_LINE in message, message
    assert "(column 1)" not in message  # (the line's "\n", where a value was wanting)


@pytest.mark.parametrize(("line", "said"), [
    ("[", "(the line ends before its JSON value does)"),
    ('["a", "b",   ', "(the line ends before its JSON value does)"),
    ("new york", "(column 1)"),
    ('["a" "b"]', "(column 6)"),
    # (cut inside a string: before, "a raw control character (\x0a) inside a string", the
    # line's own end taken for a character in it)
    ('["a", "bc', "Unterminated string starting at (column 7; the line ends inside it)"),
])
@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_a_line_cut_short_says_so(tmp_path: Path, line: str, said: str, end: str) -> None:
    source = tmp_path / "users.jsonl"
    message = import_refused(import_jsonl, source, f'["x"]{end}{line}{end}')
    assert message.startswith(f"{source}: line 2: not JSON: "), message
    assert said in message and "control character" not in message, message


@pytest.mark.parametrize(("value", "shape"), [
    (USERS, "one JSON array holding 3 users' items"),
    (BY_NAME, "one JSON object holding 2 users' items"),
])
@pytest.mark.parametrize("indent", [None, 2])
def test_every_user_in_one_value_as_json(tmp_path: Path, value: object, shape: str,
                                         indent: int | None) -> None:
    message = import_refused(import_leaf, tmp_path / "users.json",
                             json.dumps(value, indent=indent))
    assert shape in message and ONE_A_LINE in message, message
    assert "name it .jsonl" not in message  # (renamed, it would fail as above)


def test_the_advice_reads_the_file(tmp_path: Path) -> None:
    """The conversion the error and docs/datasets.md give makes a dataset of the same users."""
    source = tmp_path / "users.jsonl"
    source.write_text("".join(json.dumps(user, ensure_ascii=False) + "\n" for user in USERS),
                      encoding="utf-8")
    built = import_jsonl(source, tmp_path / "ds")
    assert json.loads((built / "meta.json").read_text())["num_users"] == 3


@pytest.mark.parametrize(("text", "error"), [
    ('["a", "b"]\n', None),  # one user: a good JSON-lines file
    ('["a", 3]\n', "item 2 (3) is a JSON number, not a string"),
    ('{"a": 1, "b": [1]}\n', "write that array alone on the line"),
    ('{"user": "7", "items": ["a"]}\n', "write that array alone on the line"),
    ('["a"]\n[\n', "line 2: not JSON"),  # a broken later line is no file-shape question
])
def test_other_lines_keep_their_errors(tmp_path: Path, text: str, error: str | None) -> None:
    source = tmp_path / "users.jsonl"
    if error is None:
        source.write_text(text, encoding="utf-8")
        import_jsonl(source, tmp_path / "ds")
        return
    message = import_refused(import_jsonl, source, text)
    assert error in message and ONE_A_LINE not in message, message
