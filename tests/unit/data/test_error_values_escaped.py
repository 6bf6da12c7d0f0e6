"""A value an error shows from a user's file, a string inside an array or an object among them,
holds no character a terminal acts on or that hides: each is written as JSON escapes it
(``["\\u202eevil"]``), as a string shown alone is written as Python's repr escapes it. Before,
a string inside an array or object was written raw: its U+202E reversed the rest of the
error's line, its CSI (U+009B) or tag characters reached the terminal as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _data_helpers import import_refused

from fedhh.data.jsonl import import_jsonl, shown_value
from fedhh.data.wordlists import load_item_list

HIDDEN = "\u202e\u009b\u200b\U000e0067\x7f"


def _no_hidden(message: str) -> None:
    assert not any(char in message for char in HIDDEN), ascii(message)


@pytest.mark.parametrize(("line", "said"), [
    ('["a", ["\\u202eevil"]]', 'item 2 (["\\u202eevil"]) is a JSON array, not a string'),
    ('["a", {"\\u202ek": "\\u009b\\u200b"}]',
     'item 2 ({"\\u202ek": "\\u009b\\u200b"}) is a JSON object, not a string'),
    ('{"a": [1, "\\udb40\\udc67\\u007f"]}',
     "item 1 ('a'): its count must be an integer from 1 to 4,294,967,295, got "
     '[1, "\\udb40\\udc67\\u007f"]'),
])
def test_a_string_inside_a_value_is_shown_escaped(tmp_path: Path, line: str,
                                                   said: str) -> None:
    source = tmp_path / "users.jsonl"
    message = import_refused(import_jsonl, source, f"{line}\n")
    _no_hidden(message)
    assert message.startswith(f"{source}: line 1: {said}")


def test_an_item_lists_element_is_shown_escaped(tmp_path: Path) -> None:
    source = tmp_path / "deny.json"
    message = import_refused(lambda path, _: load_item_list(path), source,
                             '["ok", ["\\u202ex", 1]]')
    _no_hidden(message)
    assert message == (f'{source}: line 1: element 2 (["\\u202ex", 1]) is a JSON array, '
                       "not a string")


def test_the_shown_value_reads_back_as_the_value() -> None:
    # (the escapes are JSON's: the text shown parses to what the file held)
    value = ["caf\u00e9 \u0645", {"k\u009b": "v\U000e0067\x7f"}, '"q"\\', "\ud800"]
    shown = shown_value(value, limit=200)
    _no_hidden(shown)
    assert "caf\u00e9 \u0645" in shown  # (printable characters as they are)
    assert json.loads(shown) == value
