"""`fedhh data inspect`'s words-per-user percentiles are counts some user has (nearest rank),
whole numbers on the console and in --json. Before, numpy's interpolation between neighbours:
ten users of 1 to 9 and 11 words read "1.9 / 5.5 / 9.2 / 10.82"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.cli.main import main


def test_percentiles_of_word_counts_are_whole_numbers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "users.txt"
    # (user k: k distinct words, once each; user 10 also says w1 again, 11 words)
    src.write_text("".join(" ".join(f"w{i}" for i in range(1, k + 1)) + "\n"
                           for k in range(1, 11)).replace("w10\n", "w10 w1\n"),
                   encoding="utf-8")
    out = tmp_path / "ds"
    assert main(["data", "import", str(src), "--format", "text", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["data", "inspect", str(out), "--json", "--top", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    # (nearest rank: the ceil(q * 10)-th smallest of 1..9, 11 words and 1..10 distinct)
    assert report["words_per_user_quantiles"] == {"0.1": 1, "0.5": 5, "0.9": 9, "0.99": 11}
    assert report["distinct_words_per_user_quantiles"] == {
        "0.1": 1, "0.5": 5, "0.9": 9, "0.99": 10}
    assert main(["data", "inspect", str(out), "--top", "1"]) == 0
    shown = capsys.readouterr().out
    assert "  words per user (10/50/90/99%): 1 / 5 / 9 / 11\n" in shown, shown
    assert "  distinct words per user (10/50/90/99%): 1 / 5 / 9 / 10\n" in shown, shown


def test_large_counts_are_grouped_as_the_totals_are(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "views.jsonl"  # (weighted lists: a user's page views)
    src.write_text('{"a": 1000000, "b": 1}\n{"a": 4294967295}\n', encoding="utf-8")
    assert main(["data", "inspect", str(src), "--top", "1"]) == 0
    shown = capsys.readouterr().out
    assert "tokens: 4,295,967,296\n" in shown, shown
    assert "  mean words per user: 2,147,983,648.0   mean distinct words per user: 1.5" in shown
    assert "  words per user (10/50/90/99%): 1,000,001 / 1,000,001 / 4,294,967,295 / " in shown
