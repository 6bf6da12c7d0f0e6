"""Every line the command line writes of its own (a warning, a note) leads with the command
that says it, as its errors do: "fedhh admin start: warning: ...", "fedhh admin cancel: note:
...". Before, `fedhh admin` (and `fedhh up`, `fedhh certs`, with the admin client's texts) began
them with a bare "note:", where every other command said "fedhh X: warning:"."""

from __future__ import annotations

import ast
from pathlib import Path

import fedhh.cli

CLI = Path(fedhh.cli.__file__).parent


def bare_prefixes(root: Path) -> list[str]:
    """The string literals of ``root``'s modules (an f-string's parts too) that begin with
    "note:" or "warning:", naming no command."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and node.value.startswith(("note:", "warning:"))):
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_message_of_the_cli_begins_with_a_bare_note_or_warning() -> None:
    assert bare_prefixes(CLI) == []


def test_the_check_finds_a_bare_note(tmp_path: Path) -> None:
    (tmp_path / "one.py").write_text('print(f"note: {1} run", "warning: x")\n'
                                     'print(f"fedhh x: note: {1}", "  note: listed")\n')
    assert bare_prefixes(tmp_path) == ["one.py:1", "one.py:1"]
