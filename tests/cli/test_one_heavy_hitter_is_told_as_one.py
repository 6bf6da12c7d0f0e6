"""One heavy hitter, or one released round, reads as one. A data set of one item (500 users
holding `hello`) printed "1 distinct items" and "1 heavy hitters discovered" (fedhh
simulate), "1 heavy hitters found by the first run" (--two-runs) and "1 heavy hitters (by
round, ...)" (fedhh up), and a run whose tree ended in its first round "over 1 released
rounds"."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_kit import run_cli

from fedhh.cli.up import _print_results, close_demo
from fedhh.v1 import coordinator_pb2 as pb


@pytest.fixture
def one_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "one.txt"
    path.write_text("hello\n" * 500)
    return path


def test_simulate_tells_one_heavy_hitter_as_one(
        one_item: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_cli(["simulate", "--dataset", str(one_item), "--eps-agg", "4",
                               "--seed", "2"], capsys)
    assert code == 0
    assert stdout.startswith("dataset one: 500 users, 1 distinct item\n"), stdout
    assert "\n1 heavy hitter discovered\n" in stdout, stdout
    code, stdout, _ = run_cli(["simulate", "--dataset", str(one_item), "--eps-agg", "4",
                               "--seed", "2", "--two-runs"], capsys)
    assert code == 0
    assert "\n1 heavy hitter found by the first run (the second run's deny list)\n" in stdout
    assert "\n0 heavy hitters discovered by the second run" in stdout


def _run(released: int) -> SimpleNamespace:
    rounds = [pb.RoundSummary(round=r, attempt=1, state="released", participants=500,
                              prefixes=1, segment_bits=16, domain_size=65536, kept=1,
                              finished=1, threshold=20.0) for r in range(1, released + 1)]
    return SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.2, eps_local=5.0,
                           rounds_released=released, rounds=rounds,
                           config=pb.RunConfig(eps_agg=4.0, delta=1e-6, fp_ratio=0.5))


@pytest.mark.parametrize(("found", "released", "hitters", "rounds"), [
    (1, 1, "1 heavy hitter (by round", "over 1 released round (eps_local"),
    (2, 2, "2 heavy hitters (by round", "over 2 released rounds (eps_local"),
])
def test_up_tells_one_heavy_hitter_and_one_round_as_one(
        capsys: pytest.CaptureFixture[str], found: int, released: int, hitters: str,
        rounds: str) -> None:
    listed = [pb.HeavyHitter(item=item, estimate=490.0, round=1, ended=True)
              for item in ["hello", "world"][:found]]
    _print_results(_run(released), SimpleNamespace(heavy_hitters=listed, cut_prefixes=[]))
    out = capsys.readouterr().out
    assert hitters in out and rounds in out, out


def test_the_web_demo_page_tells_one_released_round_as_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    said: list[str] = []
    demo = SimpleNamespace(say=said.append, wait_settled=lambda seconds: None,
                           devices=lambda: [], follow=lambda run: None)
    close_demo(demo, _run(1), SimpleNamespace(heavy_hitters=[]))
    assert said == ["run demo: done; eps_agg spent 1.200 over 1 released round; heavy hitters: "
                    "none"]
