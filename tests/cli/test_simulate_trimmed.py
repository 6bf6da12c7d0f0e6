"""`fedhh simulate` says when a round leaves kept prefixes out (the dimension limit and the
deadline of --rounds over --max-bits): a warning before the rounds, a column and a note after
the rounds table, and ``trimmed_prefixes``/``trimmed_note`` in --json. Before, 3 rounds over
48 bits at --dim-limit 65536 queried 1 of the 20 prefixes round 1 kept, and said nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import run_cli

WORDS = ["apple", "banana", "cherry", "dragon", "eagle", "falcon", "garden", "harbor", "island",
         "jungle", "kettle", "lemon", "mango", "nectar", "orange", "pepper", "quartz", "river",
         "silver", "tiger"]


def test_a_forced_long_segment_is_warned_of_and_its_left_out_prefixes_are_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """400 users each holding the same 20 words (round 1 keeps their 16-bit prefixes; seeded,
    and at eps_local 12.4 each word's ~20 reports clear the threshold far above the noise), 3
    rounds over 48 bits at P = 2^16: round 2 can query one prefix."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "words.jsonl"
    path.write_text("".join(json.dumps(dict.fromkeys(WORDS, 1)) + "\n" for _ in range(400)))
    out = tmp_path / "run.json"
    code, stdout, stderr = run_cli(
        ["simulate", "--dataset", str(path), "--rounds", "3", "--max-bits", "48",
         "--dim-limit", "65536", "--completion-rounds", "0", "--eps-agg", "20", "--seed", "1",
         "--json", str(out)], capsys)
    assert code == 0, stderr
    assert ("fedhh simulate: warning: 3 rounds for --max-bits 48 force a round after the "
            "first to a segment of at least 16 bits") in stderr
    payload = json.loads(out.read_text())
    first = payload["rounds"][0]
    assert first["trimmed"] >= 10 and first["continuing"] == 1
    assert payload["trimmed_prefixes"] == sum(r["trimmed"] for r in payload["rounds"])
    note = payload["trimmed_note"]
    assert note.startswith(f"{payload['trimmed_prefixes']} kept prefixes could not be queried: "
                           f"round 1 kept {first['trimmed'] + 1} prefixes to extend and the "
                           "next round queried 1 (16-bit segments")
    assert "not queried" in stdout.splitlines()[3]  # the rounds table's column
    assert f"\n{note}.\n" in stdout


def test_a_run_that_leaves_nothing_out_has_no_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "words.jsonl"
    path.write_text("".join(json.dumps(dict.fromkeys(WORDS, 1)) + "\n" for _ in range(400)))
    out = tmp_path / "run.json"
    code, stdout, stderr = run_cli(
        ["simulate", "--dataset", str(path), "--rounds", "5", "--max-bits", "48",
         "--dim-limit", "65536", "--completion-rounds", "0", "--eps-agg", "20", "--seed", "1",
         "--json", str(out)], capsys)
    assert code == 0, stderr
    assert "warning: 5 rounds" not in stderr
    payload = json.loads(out.read_text())
    assert payload["trimmed_prefixes"] == 0 and payload["trimmed_note"] is None
    assert "not queried" not in stdout and "could not be queried" not in stdout
