"""Items that hold spaces, end to end: a JSON-lines dataset of phrases (``new york``, ``how to``,
`` new york`` with a leading space, a no-break space) through `fedhh simulate --dataset x.jsonl`
and through the networked system (`fedhh up --dataset x.jsonl`): the phrases are found whole,
each its own item, and shown so that none looks like another.

Before, no input could carry such an item: the text format split ``new york`` into ``new`` and
``york``, and the dataset format refused an item with whitespace."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedhh.cli.main import main

HEAVY = ["new york", "how to", " new york", "san\u00a0francisco"]
# (short ones for the small fleet of `fedhh up`: found within the main rounds' 60 bits)
SHORT = ["how to", " how to", "1\u00a0000"]


def _phrases(path: Path, users: int, heavy: list[str], own: bool) -> Path:
    """``users`` users: each holds two of the ``heavy`` phrases (by user number) and, with
    ``own``, a phrase of its own, as an array or as an object of counts on alternate lines."""
    lines = []
    for u in range(users):
        first, second = heavy[u % len(heavy)], heavy[(u + 1) % len(heavy)]
        extra = [f"user {u} only"] if own else []
        if u % 2:
            lines.append(json.dumps([first, first, second, *extra]))
        else:
            lines.append(json.dumps({first: 2, second: 1, **dict.fromkeys(extra, 1)}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_simulate_finds_phrases_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    source = _phrases(tmp_path / "queries.jsonl", 4000, HEAVY, own=True)
    out = tmp_path / "out.json"
    assert main(["simulate", "--dataset", str(source), "--eps-agg", "4", "--seed", "3",
                 "--json", str(out)]) == 0
    found = {hit["item"] for hit in json.loads(out.read_text())["heavy_hitters"]}
    assert found == set(HEAVY)  # (each held by half of the 4,000 users; no "user N only")
    printed = capsys.readouterr().out
    for shown in ("new york", "how to", "\\x20new york", "san\\xa0francisco"):
        assert f" {shown} " in printed


@pytest.mark.slow
def test_fedhh_up_finds_phrases_whole(tmp_path: Path) -> None:
    _phrases(tmp_path / "queries.jsonl", 150, SHORT, own=False)
    # (check-in closes 0.2 s after the pool holds all 150, the run's target: none is left)
    done = subprocess.run(
        [sys.executable, "-m", "fedhh.cli.main", "up", "--dataset", "queries.jsonl",
         "--processes", "2", "--insecure", "--workdir", "up", "--rounds", "4",
         "--checkin-ms", "20000", "--checkin-quiet-ms", "200", "--stage-ms", "20000",
         "--seed", "1", "--eps-agg", "8"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "FEDHH_CACHE": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "fedhh up: 150 devices from queries.jsonl in 2 processes" in done.stdout
    assert "shut down cleanly" in done.stdout
    listed = re.findall(r"^ +\d+\. (.*?) +estimated count ", done.stdout, re.MULTILINE)
    # Each phrase is held by 100 of the 150 devices, which each report one of their items: found
    # whole, never as its words. (Noise may add a false positive: the table's exp-fp column.)
    assert {"how to", "\\x20how to", "1\\xa0000"} <= set(listed), done.stdout[-3000:]
    assert not {"how", "to", "1", "000"} & set(listed), done.stdout[-3000:]
