"""`fedhh simulate` says of each truncated row how much of its items it is, and, knowing the
data, which items of the data begin with it: three URLs that differ at their end, past the
codes' 60 bits, are one row ``https://example⟨+8 bits⟩…``; its note says it holds their
first 15 bytes and that they are 18 to 19 bytes longer, ends never found, and ``--json``'s
``starting_so`` names them whole. Before, only the row's ``…`` said it was cut."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

URLS = [f"https://example.com/search?q={word}" for word in ("alpha", "beta", "gamma")]
SHORT = ["👍🏽", "007"]


def test_a_truncated_row_says_its_bytes_and_the_items_it_stands_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(1)
    users = [json.dumps([item for item in URLS + SHORT if rng.random() < 0.5] or ["007"])
             for _ in range(1000)]
    data = tmp_path / "users.jsonl"
    data.write_text("\n".join(users) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    code, stdout, stderr = run_cli(["simulate", "--dataset", str(data), "--eps-agg", "16",
                                    "--seed", "1", "--completion-rounds", "0", "--json",
                                    str(out)], capsys)
    assert code == 0, stderr
    payload = json.loads(out.read_text(encoding="utf-8"))
    cut = [h for h in payload["heavy_hitters"] if h["truncated"]]
    assert [h["item"].startswith("https://example") for h in cut] == [True]
    (row,) = cut
    known = row["prefix_bytes"]
    assert all(url.encode().startswith(row["item"].split("⟨")[0].encode()) for url in URLS)
    assert row["starting_so"]["items"] == len(URLS)
    assert sorted(row["starting_so"]["most_held"]) == URLS
    lengths = [len(url.encode()) - known for url in URLS]
    assert row["starting_so"]["bytes_more"] == [min(lengths), max(lengths)]
    said = (f"the first {known} bytes of 3 items of the data, each {min(lengths)} to "
            f"{max(lengths)} bytes longer: their ends were never found")
    assert any(line.endswith(said) and "https://example" in line
               for line in stdout.splitlines())
    assert all("starting_so" not in h and "prefix_bytes" not in h
               for h in payload["heavy_hitters"] if not h["truncated"])
