"""A deny-list item longer than the codes denies every item whose code starts with the same
bits (a device compares codes): `fedhh simulate` says so on stderr, naming the dataset's items
it also denies and their share of the users, and lists them in --json's ``deny_list_cut``.
Before, denying one long URL dropped another held by 35% of the users, unsaid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

STEM = "https://example.com/" + "%E6%97%A5" * 60  # past 4,096 bits with the unicode codebook
DENIED, SIBLING = STEM + "?a=1", STEM + "?a=2"
SHORT_LONG = "https://example.com/x" + "y" * 180  # past the run's 684 bits, within 4,096


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(7)
    users = []
    for _ in range(3000):
        user = {"plain": 1}
        for item, share in ((DENIED, 0.3), (SIBLING, 0.4), (SHORT_LONG, 0.3)):
            if rng.random() < share:
                user[item] = 1
        users.append(json.dumps(user))
    path = tmp_path_factory.mktemp("deny") / "users.jsonl"
    path.write_text("\n".join(users) + "\n", encoding="utf-8")
    return path


def _run(population: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
         denied: list[str]) -> tuple[dict, str]:
    deny = tmp_path / "deny.txt"
    deny.write_text("".join(item + "\n" for item in denied), encoding="utf-8")
    out = tmp_path / "r.json"
    code, _, stderr = run_cli(["simulate", "--dataset", str(population), "--eps-agg", "8",
                               "--dim-limit", "1e6", "--seed", "1", "--quiet",
                               "--deny-list", str(deny), "--json", str(out)], capsys)
    assert code == 0, stderr
    return json.loads(out.read_text(encoding="utf-8")), stderr


def test_a_cut_deny_item_names_what_it_also_denies(
        population: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    payload, stderr = _run(population, tmp_path, capsys, [DENIED, SHORT_LONG, "plain"])
    holders = sum(SIBLING in json.loads(line)
                  for line in population.read_text(encoding="utf-8").splitlines()) / 3000
    [cut, alone] = payload["deny_list_cut"]
    assert cut["item"] == DENIED and cut["bits"] == 684 and cut["needs_bits"] is None
    assert cut["also_denies"] == [{"item": SIBLING, "users_holding": holders}]
    assert alone == {"item": SHORT_LONG, "bits": 684, "needs_bits": alone["needs_bits"],
                     "also_denies": []}
    assert 684 < alone["needs_bits"] <= 4096
    warnings = stderr.splitlines()
    assert len(warnings) == 2, stderr
    assert warnings[0].startswith(f"fedhh simulate: warning: deny-list item {DENIED} is longer "
                                  "than the codes (684 bits)")
    assert f"here also {SIBLING} ({holders:.1%} of the users)" in warnings[0]
    assert "longer than 4,096 bits, the codes' limit" in warnings[0]
    assert "(no other item of the dataset)" in warnings[1]
    assert f"its code is {alone['needs_bits']} bits, which wider codes reach" in warnings[1]
    # (what it warns of: the sibling, held by 40%, is not output)
    assert SIBLING not in {h["item"] for h in payload["heavy_hitters"]}


def test_a_deny_list_within_the_codes_says_nothing(
        population: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    payload, stderr = _run(population, tmp_path, capsys, ["plain"])
    # (its long URLs are named as past the run's codes: test_run_items_past_the_codes.py)
    assert payload["deny_list_cut"] == [] and "deny-list" not in stderr


def test_many_cut_deny_items_take_ten_lines_the_weightiest_first(
        capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.simulate import warn_cut_deny

    cut = [{"item": f"long{i}", "bits": 684, "needs_bits": 900, "also_denies": []}
           for i in range(30)]
    cut[17]["also_denies"] = [{"item": "sibling", "users_holding": 0.4}]
    cut[25]["also_denies"] = [{"item": "other", "users_holding": 0.1}]
    warn_cut_deny(cut)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 11
    assert "long17 " in lines[0] and "sibling (40.0% of the users)" in lines[0]
    assert "long25 " in lines[1] and "other (10.0% of the users)" in lines[1]
    assert lines[10] == ("fedhh simulate: warning: 20 more deny-list items are longer than the "
                         "codes, 0 of them denying other items of the dataset too (--json's "
                         "deny_list_cut lists them all)")


@pytest.mark.parametrize("extra, blocker", [(["--algorithm", "triehh"], "--algorithm triehh"),
                                            (["--two-runs"], "--two-runs")])
def test_a_cut_deny_item_of_a_run_without_completion_rounds_names_only_max_bits(
        population: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, extra: list[str], blocker: str) -> None:
    """A baseline (or another setting that rules completion rounds out) has codes of
    --max-bits: its warning names that, as the truncation note does, and the setting; before,
    it offered more --completion-rounds or a larger --dim-limit, which change nothing there."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    deny = tmp_path / "deny.txt"
    deny.write_text("1\ufe0f\u20e3\n", encoding="utf-8")  # (a keycap: 66 bits, past 60)
    code, _, stderr = run_cli(["simulate", "--dataset", str(population), "--eps-agg", "0.5",
                               "--seed", "1", "--quiet", "--deny-list", str(deny), *extra],
                              capsys)
    assert code == 0, stderr
    [warning] = [line for line in stderr.splitlines() if "deny-list item" in line]
    assert "longer than the codes (60 bits)" in warning
    assert (f"which wider codes reach (--max-bits, with as many more --rounds (completion "
            f"rounds do not run with {blocker}): docs/codecs.md)") in warning
    assert "--completion-rounds" not in warning and "--dim-limit" not in warning
