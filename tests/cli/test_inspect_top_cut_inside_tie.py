"""`fedhh data inspect --top K` says when its cut falls inside a tie, as `fedhh simulate` says
of its list (test_top_cut_inside_tie.py): with --top 2 over five items held alike, ``a`` and
``b`` were listed as the top two and nothing said that ``c``, ``d`` and ``e`` held as much."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import run_cli


@pytest.mark.parametrize(("top", "said"), [
    (2, "(3 more items hold exactly the weighted share of the last row listed, 0.18333: the cut "
        "falls inside that tie, its rows listed in the vocabulary's order; --top 5 lists them)"),
    (4, "(1 more item holds exactly the weighted share of the last row listed, 0.18333: the cut "
        "falls inside that tie, its rows listed in the vocabulary's order; --top 5 lists them)"),
    (5, None),  # (every tied row listed; the one below the tie, 007, is less held)
    (6, None),  # (every item listed)
])
def test_a_cut_inside_a_tie_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch, top: int,
                                    said: str | None) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "tie.txt"
    data.write_text("a b c d e\na b c d e 007\n", encoding="utf-8")
    code, out, _ = run_cli(["data", "inspect", str(data), "--top", str(top)], capsys)
    assert code == 0
    notes = [line.strip() for line in out.splitlines() if "falls inside" in line]
    assert notes == ([] if said is None else [said])


def _inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str], users: list[dict[str, int]],
             top: int) -> tuple[list[str], list[str]]:
    """The items inspect lists and its lines on a cut inside a tie, of JSON-lines ``users``."""
    data = tmp_path / "users.jsonl"
    data.write_text("".join(json.dumps(user) + "\n" for user in users), encoding="utf-8")
    code, out, _ = run_cli(["data", "inspect", str(data), "--top", str(top), "--json"], capsys)
    assert code == 0
    listed = [row["item"] for row in json.loads(out)["top_weighted"]]
    code, out, _ = run_cli(["data", "inspect", str(data), "--top", str(top)], capsys)
    assert code == 0
    return listed, [line.strip() for line in out.splitlines() if "falls inside" in line]


def test_shares_equal_to_five_digits_are_no_tie(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``b`` holds 0.400002, ``a`` 0.4: both show 0.40000. Before, the shares were compared
    as shown, and ``a`` was said to tie with the last row listed."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = [{"a": 400_000, "b": 400_004, "c": 199_996},
             {"a": 400_000, "b": 400_000, "c": 200_000}]
    listed, notes = _inspect(tmp_path, capsys, users, 1)
    assert (listed, notes) == (["b"], [])


def test_shares_equal_exactly_are_a_tie_in_the_vocabularys_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One item's share is (1/2 + 2/3) / 4, the other's (1/3 + 5/6) / 4: equal, while their
    float sums differ in the last bit (1.1666666666666665 against ...67). Listed in the
    vocabulary's order, as the note says, and said to tie, whichever the float put first."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    for first, second in (("p", "q"), ("q", "p")):
        folder = tmp_path / first
        folder.mkdir()
        users = [{first: 1, "x": 1}, {first: 2, "y": 1}, {second: 1, "z": 2},
                 {second: 5, "w": 1}]
        listed, notes = _inspect(folder, capsys, users, 1)
        assert listed == ["p"]  # (the vocabulary is sorted)
        assert notes == ["(1 more item holds exactly the weighted share of the last row "
                         "listed, 0.29167: the cut falls inside that tie, its rows listed in "
                         "the vocabulary's order; --top 2 lists them)"]
