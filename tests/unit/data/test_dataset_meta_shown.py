"""A dataset's name and provenance, which a dataset folder's meta.json gives (a stranger's
folder) or an imported file's stem, reach the terminal escaped, as a message's words are
(``message_text``): ``\\x1b`` for ESC, ``\\u202e`` for the right-to-left override. Before,
`fedhh data inspect`, `fedhh simulate`'s summary and errors, and the progress meters wrote
them raw: an escape sequence in the name turned the terminal red or retitled its window, and
U+202E reversed the rest of the line. And inspect shows the generator's share of the rare tail
only where meta.json's stats give it as a number."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from fedhh.cli.main import main
from fedhh.data import progress as progress_module
from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.errors import DatasetError
from fedhh.simulation.runner import check_discoverable

NAME = "nice\x1b[31mred\u202eabc"
NAME_SHOWN = "nice\\x1b[31mred\\u202eabc"
PROVENANCE = "from \x1b]0;retitled\x07 there"
PROVENANCE_SHOWN = "from \\x1b]0;retitled\\x07 there"


def _folder(tmp_path: Path, users: list[dict[str, int]]) -> Path:
    """A dataset folder whose meta.json names it NAME, from PROVENANCE, as a stranger's may."""
    path = save_dataset(from_user_counts(users, name="plain"), tmp_path / "theirs")
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    meta.update(name=NAME, provenance=PROVENANCE)
    (path / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return path


def _no_controls(text: str) -> None:
    assert not any(char in text for char in "\x1b\x07\u202e"), text


def test_inspect_shows_the_name_and_provenance_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _folder(tmp_path, [{"a": 1}, {"a": 1, "b": 2}])
    assert main(["data", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    assert out.startswith(f"{NAME_SHOWN}: {path}\n  provenance: {PROVENANCE_SHOWN}\n")
    # (--json keeps them exact: JSON escapes the controls itself)
    assert main(["data", "inspect", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["name"], report["provenance"]) == (NAME, PROVENANCE)


def test_simulate_shows_the_name_escaped(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = _folder(tmp_path, [{"a": 1}, {"a": 1}, {"b": 1}, {"a": 1}])
    assert main(["simulate", "--dataset", str(path), "--eps-agg", "8", "--seed", "1",
                 "--top", "0"]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    assert f"dataset {NAME_SHOWN}: 4 users, 2 distinct items\n" in out


def test_a_dataset_without_items_is_named_escaped(tmp_path: Path) -> None:
    path = _folder(tmp_path, [{}, {}])
    with pytest.raises(DatasetError) as raised:
        check_discoverable(load_dataset(path))
    _no_controls(str(raised.value))
    assert str(raised.value).startswith(f"dataset {NAME_SHOWN}: none of its 2 users")


def test_a_meter_labels_the_dataset_escaped(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    path = _folder(tmp_path, [{"a": 1}, {"b": 3}])
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    load_dataset(path, progress=True)
    _no_controls(screen.getvalue())
    assert f"checking {NAME_SHOWN}" in screen.getvalue()


@pytest.mark.parametrize("share", ["x", None, [1], True])
def test_inspect_leaves_out_a_tail_share_that_is_no_number(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], share: object) -> None:
    # (the synthetic generator's stats.tail_token_share; a folder's meta.json may hold anything
    # there: before, a string or null in it was a traceback out of inspect)
    path = _folder(tmp_path, [{"a": 1}, {"b": 1}])
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    meta["stats"] = {"tail_token_share": share}
    (path / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    assert main(["data", "inspect", str(path)]) == 0
    assert "rare tail" not in capsys.readouterr().out
    meta["stats"] = {"tail_token_share": 0.25}
    (path / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    assert main(["data", "inspect", str(path)]) == 0
    assert "  share of tokens from the rare tail: 0.2500\n" in capsys.readouterr().out


def _strict(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


def test_inspect_json_gives_no_number_json_has_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (Python's json writes NaN and Infinity, so a stranger's meta.json may hold them; before,
    # `inspect --json` passed them on as NaN, which a strict JSON reader refuses)
    path = _folder(tmp_path, [{"a": 1}, {"b": 1}])
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    meta["stats"] = {"tail_token_share": float("nan"), "spread": [1.5, float("inf")],
                     "deep": {"low": float("-inf"), "kept": "NaN"}}
    (path / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    assert main(["data", "inspect", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out, parse_constant=_strict)
    assert report["stats"] == {"tail_token_share": None, "spread": [1.5, None],
                               "deep": {"low": None, "kept": "NaN"}}
    assert main(["data", "inspect", str(path)]) == 0
    assert "rare tail" not in capsys.readouterr().out
