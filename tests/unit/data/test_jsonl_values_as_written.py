"""A JSON-lines dataset's error shows a value that is not a string as the file writes it,
JSON's spelling, not Python's (``true``, ``null``, ``["b"]``, ``1e5``: before, ``True``,
``None``, ``['b']``, ``100000.0``), and tells how to write a number or truth value that is an
item (a ZIP code, a year): as a JSON string. An integer of thousands of digits, valid JSON, is
refused as the number it is (before, "not JSON: Exceeds the limit (4300 digits) for integer
string conversion ... use sys.set_int_max_str_digits()"). A LEAF file's error names a sample
or its top level by JSON's kinds too (before, "a sample holds NoneType None", "top level is
list"), and a LEAF file and a .json item list read numbers as the JSON-lines reader does (one
``jsonl.loads``: shown as written, NaN refused)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_helpers import import_refused

from fedhh.data.jsonl import import_jsonl
from fedhh.data.leaf import import_leaf
from fedhh.data.wordlists import load_item_list

LONG = "9" * 5000


@pytest.mark.parametrize(("line", "said"), [
    ('["a", 90210]', 'item 2 (90210) is a JSON number, not a string; an item is a JSON '
                     'string: "90210"'),
    ('["a", 1e5]', 'item 2 (1e5) is a JSON number, not a string; an item is a JSON string: '
                   '"1e5"'),
    ('["a", 1e400]', 'item 2 (1e400) is a JSON number, not a string; an item is a JSON '
                     'string: "1e400"'),
    ('["a", -0.50]', 'item 2 (-0.50) is a JSON number, not a string; an item is a JSON '
                     'string: "-0.50"'),
    # (before, "item 2 (0) ... an item is a JSON string: \"0\"", another item than -0)
    ('["a", -0]', 'item 2 (-0) is a JSON number, not a string; an item is a JSON string: "-0"'),
    ('["a", true]', 'item 2 (true) is a JSON boolean, not a string; an item is a JSON '
                    'string: "true"'),
    ('["a", null]', "item 2 (null) is a JSON null, not a string"),
    ('["a", {"b": [1.50, false]}]', 'item 2 ({"b": [1.50, false]}) is a JSON object, not a '
                                    "string; a line is one user's items; if the file is one"),
    (f'["a", {LONG}]', f"item 2 ({LONG[:57]}...) is a JSON number, not a string"),
    ('{"a": 1e0}', "item 1 ('a'): its count must be an integer from 1 to 4,294,967,295, got 1e0"),
    ('{"a": 2.0}', "item 1 ('a'): its count must be an integer from 1 to 4,294,967,295, got 2.0"),
    ('{"a": -0}', "item 1 ('a'): its count must be an integer from 1 to 4,294,967,295, got -0"),
    ('{"a": false}', "item 1 ('a'): its count must be an integer from 1 to 4,294,967,295, "
                     "got false"),
    ('{"items": {"b": 2}}', "item 1 ('items'): its count must be an integer from 1 to "
                            '4,294,967,295, got {"b": 2}; an object is one user\'s item counts, '
                            "not a record: to give the items under 'items', write that object "
                            "alone on the line"),  # (before, "that array")
    (f'{{"a": {LONG}}}', "item 1 ('a'): its count must be an integer from 1 to 4,294,967,295, "
                         f"got {LONG[:57]}..."),
])
def test_a_value_is_shown_as_the_file_writes_it(tmp_path: Path, line: str, said: str) -> None:
    source = tmp_path / "users.jsonl"
    message = import_refused(import_jsonl, source, f'["x"]\n{line}\n')
    assert message == f"{source}: line 2: {said}" or (
        said.endswith("if the file is one") and message.startswith(f"{source}: line 2: {said}"))


def test_an_array_of_every_user_is_shown_cut_however_deep(tmp_path: Path) -> None:
    source = tmp_path / "users.jsonl"
    deep = "[" * 900 + "]" * 900  # (within json's recursion; shown no deeper than its cut)
    message = import_refused(import_jsonl, source, f'["a", {deep}]\n')
    assert message.startswith(f"{source}: line 1: item 2 ({'[' * 57}...) is a JSON array"), message


@pytest.mark.parametrize(("sample", "said"), [
    ("5", "a sample holds a JSON number (5)"),
    ("null", "a sample holds a JSON null (null)"),
    ('{"a": [1, true]}', 'a sample holds a JSON object ({"a": [1, true]})'),
])
def test_a_leaf_sample_is_named_by_json_kinds(tmp_path: Path, sample: str, said: str) -> None:
    source = tmp_path / "leaf.json"
    text = f'{{"users": ["u"], "user_data": {{"u": {{"x": [["a", {sample}]], "y": [0]}}}}}}'
    message = import_refused(import_leaf, source, text)
    assert message == f"{source}: user 'u': {said}; expected strings or lists of strings"
    assert import_refused(import_leaf, source, "[1, 2]").startswith(
        f"{source}: top level is a JSON array, expected a LEAF object")


@pytest.mark.parametrize(("sample", "said"), [
    ("1e5", "a sample holds a JSON number (1e5); expected strings or lists of strings"),
    ("-0.50", "a sample holds a JSON number (-0.50); expected strings or lists of strings"),
    ("-0", "a sample holds a JSON number (-0); expected strings or lists of strings"),
    ("1e400", "a sample holds a JSON number (1e400); expected strings or lists of strings"),
    (LONG, f"a sample holds a JSON number ({'9' * 57}...); expected strings or lists of "
           "strings"),
])
def test_a_leaf_number_is_shown_as_the_file_writes_it(tmp_path: Path, sample: str,
                                                      said: str) -> None:
    """As the JSON-lines reader shows it (before, 100000.0, -0.5, Infinity, and a traceback:
    'Exceeds the limit (4300 digits)')."""
    source = tmp_path / "leaf.json"
    text = f'{{"users": ["u"], "user_data": {{"u": {{"x": [["a", {sample}]], "y": [0.5]}}}}}}'
    assert import_refused(import_leaf, source, text) == f"{source}: user 'u': {said}"


def test_nan_is_no_json_number_in_a_leaf_file(tmp_path: Path) -> None:
    source = tmp_path / "leaf.json"
    text = '{"users": ["u"], "user_data": {"u": {"x": [["a", NaN]], "y": [0]}}}'
    assert import_refused(import_leaf, source, text) == \
        f"{source}: invalid JSON (NaN is not a JSON number)"  # (before, read as a number)


@pytest.mark.parametrize(("text", "said"), [
    # (told how to be an item, as in JSON lines: before, the first clause alone)
    ('["a", 1e5]', 'line 1: element 2 (1e5) is a JSON number, not a string; an item is a '
                   'JSON string: "1e5"'),
    ('["a", -0]', 'line 1: element 2 (-0) is a JSON number, not a string; an item is a JSON '
                  'string: "-0"'),
    ('["a",\n 90210]', 'line 2: element 2 (90210) is a JSON number, not a string; an item is '
                       'a JSON string: "90210"'),
    ('["a", null]', "line 1: element 2 (null) is a JSON null, not a string"),
    ('["a", NaN]', "not JSON (NaN is not a JSON number)"),
])
def test_an_item_lists_number_is_shown_as_the_file_writes_it(tmp_path: Path, text: str,
                                                             said: str) -> None:
    source = tmp_path / "deny.json"
    message = import_refused(lambda path, _: load_item_list(path), source, text)
    assert message == f"{source}: {said}" or said.startswith("not JSON")
    assert message.startswith(f"{source}: {said}")
