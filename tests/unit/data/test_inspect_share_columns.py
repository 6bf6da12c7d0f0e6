"""`fedhh data inspect`'s top-items figures are shares, and its table says so. Before, the
columns were headed "weighted" and "users holding" over 0.44444 and 0.6667, which read as counts
(users holding 0.67?)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.cli.main import main


def test_the_top_items_columns_are_named_as_shares(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "users.txt"
    # a: 2 of 3 users; each user's share of a: 1/3, 1, 0: weighted (1/3 + 1 + 0) / 3 = 0.44444
    source.write_text("a b c\na a\nb\n", encoding="utf-8")
    assert main(["data", "inspect", str(source)]) == 0
    rows = capsys.readouterr().out.splitlines()
    at = next(i for i, row in enumerate(rows) if row.lstrip().startswith("rank"))
    assert rows[at].endswith("weighted share  share of users"), rows[at]
    assert rows[at + 1].split() == ["1", "a", "0.44444", "0.6667"], rows[at + 1]
    legend = "\n".join(rows[at - 2:at])
    assert "weighted share: the item's share of a user's words, averaged over the users" in legend
    assert "share of users: the share of all users holding it" in legend
