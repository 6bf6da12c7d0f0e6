"""`fedhh data import PATH --out DIR` reads PATH by its extension, as `--dataset PATH` does.

Before: --format was required, so `fedhh data import comments.txt --out mine` was refused "the
following arguments are required: --format" though every other command reads comments.txt as
text by its name."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import one_line_error, run_cli

from fedhh.data.dataset import load_dataset


@pytest.mark.parametrize("name, text, users", [
    ("comments.txt", "hello world hello\nfoo bar\n", 2),
    ("queries.jsonl", '["new york", "a b"]\n["new york"]\n["x"]\n', 3),
    # (JSON lines' other name, newline-delimited JSON: before, "unknown dataset file type")
    ("queries.ndjson", '["new york", "a b"]\n{"x": 2}\n', 2),
    ("QUERIES.NDJSON", '["x"]\n', 1),
])
def test_the_format_is_read_from_the_extension(
        name: str, text: str, users: int, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / name
    source.write_text(text)
    out = tmp_path / "out"
    code, printed, err = run_cli(["data", "import", str(source), "--out", str(out)], capsys)
    assert code == 0, err
    assert printed.startswith(f"imported {source} -> {out}")
    assert load_dataset(out).num_users == users
    # (and a dataset already converted is named as one)
    assert one_line_error(["data", "import", str(out), "--out", str(tmp_path / "again")],
                          capsys) == (f"fedhh data import: error: PATH {out} is a dataset "
                                      "already (it holds meta.json): give it as --dataset as "
                                      "it is")


def test_an_extension_no_format_reads_asks_for_format(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "users.dat"
    source.write_text("a b\n")
    line = one_line_error(["data", "import", str(source), "--out", str(tmp_path / "o")], capsys)
    assert line.startswith(f"fedhh data import: error: {source}: unknown dataset file type "
                           "'.dat'"), line
    assert "`fedhh data import --format text|jsonl|leaf`" in line


def test_an_ndjson_file_is_no_item_list_and_its_compressed_form_is_read_as_json_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "users.jsonl").write_text('["a"]\n')
    deny = tmp_path / "deny.ndjson"
    deny.write_text("a\n")
    line = one_line_error(["simulate", "--dataset", str(tmp_path / "users.jsonl"),
                           "--deny-list", str(deny), "--quiet"], capsys)
    assert line.endswith(f"{deny}: an item list is one item a line, or one JSON array of "
                         'strings in a file named .json (["new york", " new york"]), not JSON '
                         "lines"), line
    packed = tmp_path / "users.ndjson.gz"
    packed.write_bytes(b"\x1f\x8b\x08\x00")
    line = one_line_error(["data", "inspect", str(packed)], capsys)
    assert "--format jsonl <(zcat" in line, line
