"""`fedhh data inspect --top K` says when its cut falls inside a tie, as `fedhh simulate` says
of its list (test_top_cut_inside_tie.py): with --top 2 over five items held alike, ``a`` and
``b`` were listed as the top two and nothing said that ``c``, ``d`` and ``e`` held as much."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import run_cli


@pytest.mark.parametrize(("top", "said"), [
    (2, "(3 more items show the weighted share 0.18333, as the last row listed: the cut falls "
        "inside that tie, its rows listed in the vocabulary's order; --top 5 lists them)"),
    (4, "(1 more item shows the weighted share 0.18333, as the last row listed: the cut falls "
        "inside that tie, its rows listed in the vocabulary's order; --top 5 lists them)"),
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
