"""`fedhh simulate --json` carries ``completion_note``, the note the console prints when the
completion rounds lost many prefixes (before, the JSON alone said nothing of
--completion-weight): 40 URLs held by 4,000 users, whose prefixes the first completion round
loses at --completion-weight 0.02 ("" when few are lost: ``completion_weight_note``'s own
tests)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

from fedhh.cli.simulate import completion_weight_note

URLS = [f"https://site{i:02d}.example.org/a/long/path/to/page{i:02d}.html" for i in range(40)]


def _simulated(tmp_path: Path, capsys: pytest.CaptureFixture[str],
               monkeypatch: pytest.MonkeyPatch, items: list[str]) -> dict:
    rng = np.random.default_rng(0)
    users = tmp_path / "users.txt"
    users.write_text("".join(" ".join(rng.choice(items, size=int(rng.integers(1, 3)),
                                                 replace=False)) + "\n" for _ in range(4000)))
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    code, stdout, _ = run_cli(["simulate", "--dataset", str(users), "--json", "-", "--seed",
                               "3", "--completion-weight", "0.02", "--quiet"], capsys)
    assert code == 0
    return json.loads(stdout)


def test_prefixes_lost_in_completion_rounds_are_noted_in_the_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    payload = _simulated(tmp_path, capsys, monkeypatch, URLS)
    assert len(payload["cut_prefixes"]) >= 20
    # (made knowing the items: URLs of 50 characters, about 150 users each, which no round a
    # count of 150 clears at weight 1 completes, so a larger weight is not suggested)
    assert payload["completion_note"] and payload["completion_note"] == completion_weight_note(
        payload, lambda: False)

