"""`fedhh simulate --json` or `--plot` naming one of the run's input files (the dataset, the
deny list, the codebook) is refused before the run, and the input is left as it is. Before,
`simulate --dataset users.txt --json users.txt` ran and overwrote the dataset with its
results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.cli.main import main
from fedhh.errors import ConfigError
from fedhh.output_paths import check_output


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_an_output_that_is_the_dataset_is_refused(
        option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    name = "users.png" if option == "--plot" else "users.txt"
    Path(name).write_text("alpha beta\ngamma\n")
    with pytest.raises(SystemExit) as refused:
        main(["simulate", "--dataset", name, option, f"./{name}", "--quiet"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"fedhh simulate: error: {option} ./{name} is the input --dataset {name}: writing it "
        "would replace what the run reads; give another file")
    assert Path(name).read_text() == "alpha beta\ngamma\n"


def test_inputs_that_are_names_or_folders(tmp_path: Path) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "meta.json").write_text("{}")
    deny = tmp_path / "deny.txt"
    deny.write_text("x\n")
    inputs = {"--dataset": str(data), "--deny-list": str(deny), "--codec": "5bit"}
    with pytest.raises(ConfigError, match="is a file of the input --dataset"):
        check_output("--json", str(data / "meta.json"), inputs=inputs)
    with pytest.raises(ConfigError, match="is the input --deny-list"):
        check_output("--json", str(deny), inputs=inputs)
    check_output("--json", str(data / "new.json"), inputs=inputs)  # (replaces nothing)
    check_output("--json", str(tmp_path / "5bit"), inputs=inputs)  # (a codebook's name)


def test_a_codebook_file_with_json_output_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`--codec FILE` reaches the run as the codebook's JSON, which no file is named: before,
    looking for a file of that name ended `simulate --codec FILE --json OUT` in 'File name too
    long' before the run."""
    from fedhh.data.codebooks import book_path

    monkeypatch.chdir(tmp_path)
    Path("users.txt").write_text("alpha beta\ngamma\n")
    book = json.loads(book_path("english").read_text(encoding="utf-8"))
    Path("book.json").write_text(json.dumps({**book, "name": "mine"}))  # (not a built-in's)
    assert main(["simulate", "--dataset", "users.txt", "--codec", "book.json",
                 "--json", "out.json", "--quiet"]) == 0
    assert Path("out.json").is_file()


def test_an_output_that_is_the_codebook_file_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The output checks see the `--codec` path as typed, not the codebook's JSON it is parsed
    into: before, `--json book.json --codec book.json` ran and wrote the results over the
    user's codebook."""
    from fedhh.data.codebooks import book_path

    monkeypatch.chdir(tmp_path)
    Path("users.txt").write_text("alpha beta\ngamma\n")
    book = json.loads(book_path("english").read_text(encoding="utf-8"))
    text = json.dumps({**book, "name": "mine"})
    Path("book.json").write_text(text)
    with pytest.raises(SystemExit) as refused:
        main(["simulate", "--dataset", "users.txt", "--codec", "book.json", "--json",
              "book.json", "--quiet"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "fedhh simulate: error: --json book.json is the input --codec book.json: writing it "
        "would replace what the run reads; give another file")
    assert Path("book.json").read_text() == text
