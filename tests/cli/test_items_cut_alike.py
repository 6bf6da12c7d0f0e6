"""Items that share a long beginning (URLs or queries differing only at the end) cut to one
text where a line names them: `fedhh data inspect`'s note on items past the codes' limit and
`fedhh simulate`'s and `fedhh up`'s warning on items past the run's codes say how many of those
named are different items cut alike (before, the same cut URL three times, nothing said
so). The lists' own note says the same of their rows (test_simulate_long_items.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import run_cli

from fedhh.cli.simulate import warn_past_codes
from fedhh.config import Mode, RunConfig

STEM = "https://example.com/search?q=" + "x" * 1100 + "&page="


def test_inspect_says_which_items_past_the_codes_are_cut_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "urls.jsonl"
    users = [[STEM + str(u % 3)] for u in range(9)] + [["word"]]
    data.write_text("".join(json.dumps(user) + "\n" for user in users), encoding="utf-8")
    code, out, _ = run_cli(["data", "inspect", str(data)], capsys)
    assert code == 0
    note = next(line for line in out.splitlines() if "longer than the codes" in line)
    assert note.count(STEM[:30]) == 3
    assert note.endswith("(30.00% of the users) (3 of them cut alike to 40 columns here, "
                         "different items)")


@pytest.mark.parametrize(("items", "said"), [
    ([STEM + "1", STEM + "2", "https://other.example/" + "y" * 1100], "(2 of them cut alike"),
    ([STEM + "1", "https://other.example/" + "y" * 1100], None),
])
def test_the_warning_says_which_items_past_the_run_codes_are_cut_alike(
        capsys: pytest.CaptureFixture[str], items: list[str], said: str | None) -> None:
    past = {"codec": "unicode", "bits": 828, "items": len(items), "users": 0.5,
            "heaviest": [{"item": item, "unweighted": 0.1, "needs_bits": None}
                         for item in items]}
    warn_past_codes(past, RunConfig(), Mode.SIMULATION, "fedhh simulate")
    warning = capsys.readouterr().err
    assert warning.startswith("fedhh simulate: warning: ")
    if said is None:
        assert "cut alike" not in warning
    else:
        assert f"{said} to 40 columns here, different items)" in warning
