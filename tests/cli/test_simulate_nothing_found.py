"""`fedhh simulate` that finds nothing says why: round 1's threshold against its devices."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import run_cli

from fedhh.cli.simulate import nothing_found


def test_a_four_user_file_is_told_its_threshold_is_beyond_its_devices(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """datasets.md's `fedhh simulate --dataset queries.jsonl` on a 4-user file printed
    "0 heavy hitters discovered" and nothing more (deterministic: no item of 4 devices can
    reach a threshold above 4, whatever the noise)."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "queries.jsonl"
    path.write_text('["new york", "new york", "how to"]\n{"new york": 2, "how to": 1}\n\n[]\n')
    code, stdout, _ = run_cli(["simulate", "--dataset", str(path), "--seed", "1"], capsys)
    assert code == 0
    assert "0 heavy hitters discovered\nNothing cleared round 1's threshold, an estimated " \
        "count of " in stdout
    assert "(more than its 4 devices: no item's count can reach it) at eps_local 0.339" in stdout
    assert "more devices, or a larger --eps-agg, lower it." in stdout


def _payload(kept: list[int], threshold: float = 30.0, n: int = 1000) -> dict:
    return {"heavy_hitters": [], "cut_prefixes": [], "privacy": {"eps_local": 2.5},
            "rounds": [{"round": i + 1, "kept": k, "participants": n, "threshold": threshold}
                       for i, k in enumerate(kept)]}


def test_the_note_is_only_for_runs_whose_rounds_kept_nothing() -> None:
    assert nothing_found(_payload([0])) == (
        "Nothing cleared round 1's threshold, an estimated count of 30.0 (3.0% of its 1,000 "
        "devices) at eps_local 2.5: more devices, or a larger --eps-agg, lower it.")
    assert nothing_found(_payload([3, 0])) is None  # kept prefixes that later died out
    found = _payload([0]) | {"heavy_hitters": [{"item": "a"}]}
    assert nothing_found(found) is None
    assert nothing_found(_payload([])) is None
