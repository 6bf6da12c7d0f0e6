"""A JSON-lines dataset line holding arrays nested thousands deep (a damaged or doctored file),
which Python's json reads by recursion, is refused naming its line, as a LEAF file or a
dataset's meta.json is. Before, a RecursionError traceback out of `fedhh data inspect`,
`fedhh simulate` and every command that imported the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_helpers import import_refused

from fedhh.data.jsonl import import_jsonl

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("text", "line"), [
    (DEEP + "\n", 1),  # the line itself
    ('["a"]\n["b", ' + DEEP + "]\n", 2),  # one item of a later line
    ('{"a": ' + DEEP + "}\n", 1),  # a count
])
def test_a_line_nested_too_deeply_is_refused_naming_it(tmp_path: Path, text: str,
                                                       line: int) -> None:
    source = tmp_path / "users.jsonl"
    message = import_refused(import_jsonl, source, text)
    assert message.startswith(f"{source}: line {line}: JSON nested too deeply; each line is "
                              "one user"), message
