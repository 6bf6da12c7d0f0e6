"""What the consoles say of lists they do not show whole and of cut prefixes: `fedhh simulate`
cut at --top says how many more heavy hitters there are and the rounds that found them (the
list is by round: a dataset's most held item, found in round 6, was below the default --top,
unmentioned); cut prefixes are listed the latest round first, each with why it was not
completed (``no rounds left`` or ``lost in round N``), in the JSON and on both consoles."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fedhh.cli.main import main
from fedhh.cli.simulate import cut_cause, more_hitters
from fedhh.cli.up import _print_results
from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.config import Mode, RunConfig
from fedhh.rpc.run_config import to_proto
from fedhh.server import PrefixTree, TreeConfig
from fedhh.server.mechanisms import LocalRandomizer, TailKind
from fedhh.server.prefixtree import Found, TreeState
from fedhh.v1 import coordinator_pb2 as pb

LONG = "https://example.com/" + "abcdefghij" * 8  # ~500 bits: past 6 completion rounds


def test_cut_prefixes_are_listed_the_latest_round_first() -> None:
    codec = Codec("unicode", 200)
    short, long_ = cw.to_ints(codec.encode_many(["https://www.example.org/a", LONG]).codes)
    early = Found(short >> 140 << 140, 900.0, 2, bits=60)
    late = Found(long_ >> 20 << 20, 300.0, 9, bits=180)
    also_early = Found(long_ >> 150 << 150, 50.0, 2, bits=50)
    tree = PrefixTree(TreeConfig(rounds=13, dim_limit=2**16), codec,
                      LocalRandomizer(3.0, TailKind.BINOMIAL))
    state = TreeState(discovered=(early, also_early, late))
    assert [(h.round, h.estimate) for h in tree.cut_prefixes(state)] == [
        (9, 300.0), (2, 900.0), (2, 50.0)]


def test_a_cut_prefixes_cause() -> None:
    assert cut_cause(20, 370, 460, last=20) == "no rounds left"
    assert cut_cause(7, 460, 460, last=20) == "no rounds left"  # the code's width reached
    assert cut_cause(4, 64, 460, last=20) == "lost in round 5"


def test_the_line_under_a_list_cut_at_top() -> None:
    hitters = [{"round": r, "item": str(r), "truncated": False, "estimate": 50.0 - 10 * i}
               for i, r in enumerate((1, 1, 2, 6, 6))]
    assert more_hitters(hitters, 2) == "(3 more, found in rounds 2 to 6: --top 5 or --json " \
        "lists them)"
    assert more_hitters(hitters, 4) == "(1 more, found in round 6: --top 5 or --json lists them)"


def test_simulate_says_what_top_hides_and_why_each_prefix_is_cut(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(1)
    words = ["2017", "für", "👍🏽", "+1-555-123-4567", LONG]
    lines = [" ".join(rng.choice(words, size=2, replace=False)) for _ in range(3000)]
    data = tmp_path / "users.txt"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out_json = tmp_path / "r.json"
    assert main(["simulate", "--dataset", str(data), "--eps-local", "8", "--dim-limit", "1e6",
                 "--completion-rounds", "6", "--json", str(out_json), "--seed", "3",
                 "--top", "1"]) == 0
    out = capsys.readouterr().out
    payload = json.loads(out_json.read_text(encoding="utf-8"))
    hitters = payload["heavy_hitters"]
    assert {h["item"] for h in hitters} == set(words[:4])
    rest = sorted({h["round"] for h in hitters[1:]})
    assert f"(3 more, found in rounds {rest[0]} to {rest[-1]}: --top 4 or --json lists them)" \
        in out
    [cut] = payload["cut_prefixes"]
    # (its whole characters, then the bits it holds of the next one's codeword: ⟨+N bits⟩)
    assert LONG.startswith(cut["item"].rstrip("…").split("⟨+")[0])
    assert cut["cause"] == "no rounds left"
    row = next(line for line in out.splitlines() if line.strip().startswith("https://"))
    assert row.endswith("no rounds left")


def test_up_says_why_each_prefix_is_cut(capsys: pytest.CaptureFixture[str]) -> None:
    config = RunConfig(completion_rounds=4, eps_agg=8.0).validate(Mode.NETWORK)
    rounds = [pb.RoundSummary(round=i, attempt=1, state="released", participants=1000,
                              prefixes=1, segment_bits=16, domain_size=65536, kept=1)
              for i in range(1, 8)]
    # (at eps_local 5 a 5th completion round would still fit, 5 + ln 0.0125 > 0, and the
    # planner, which fedhh up asks, funds it at eps_agg 8 (at 1, eps_local 5 is no run's and
    # it refuses): the rounds asked for, not the budget, ran out;
    # test_cause_when_budget_fits_no_completion.py has the budget's words)
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=5.0,
                          rounds_released=7, config=to_proto(config), rounds=rounds)
    cut = [pb.HeavyHitter(item="https://example…", estimate=285.0, round=7, truncated=True,
                          bits=121),
           pb.HeavyHitter(item="東京…", estimate=85.0, round=4, truncated=True, bits=52)]
    _print_results(run, SimpleNamespace(heavy_hitters=[], cut_prefixes=cut))
    out = capsys.readouterr().out
    # (and how much of its items each is: before, its … alone said it was cut)
    assert ("(round 7; no rounds left; cut at 121 bits: the first 15 bytes of every item "
            "starting so)") in out
    assert "(round 4; lost in round 5; cut at 52 bits: the first 6 bytes of every item " in out


def test_up_shows_each_rounds_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: fedhh up's table had no threshold, and a user whose long items were all lost
    in the first completion round (its threshold 260 of 2,000 devices, the main rounds' ~100)
    saw only that it kept nothing."""
    rounds = [pb.RoundSummary(round=4, attempt=1, state="released", participants=2000,
                              prefixes=11, segment_bits=12, domain_size=45056, kept=12,
                              threshold=98.4),
              pb.RoundSummary(round=5, attempt=1, state="aborted", reason="too few devices"),
              pb.RoundSummary(round=5, attempt=2, state="released", participants=2000,
                              prefixes=12, segment_bits=12, domain_size=49152,
                              threshold=1260.2)]
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=4.0,
                          rounds_released=2, config=to_proto(RunConfig()), rounds=rounds)
    _print_results(run, SimpleNamespace(heavy_hitters=[], cut_prefixes=[]))
    lines = capsys.readouterr().out.splitlines()
    assert any(line.endswith("exp-fp  found  threshold") for line in lines)
    rows = [line.split() for line in lines if line.startswith("    ")]
    assert [row[10] for row in rows[:3]] == ["98", "-", "1,260"]
    assert rows[1][-3:] == ["too", "few", "devices"]
