"""What `fedhh up`'s closing report tells a newcomer: a listed item no device holds is marked a
false positive, as `fedhh simulate` marks it (up hosts the data); the two epsilons are told
apart, with the pages that say more; and why an item many devices hold can be missing (a
device reports one of its items a round). Before, 400 users holding three fruits each got
``apit'sw`` listed beside apple, a note saying only that an item "may be" noise, no word on
eps_local against eps_agg, and no word on why banana, held by 27% of them against a threshold of
7.6%, was missing."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedhh.cli.up import _print_results, explain, held_by_no_device
from fedhh.config import RunConfig
from fedhh.data.registry import resolve_dataset
from fedhh.v1 import coordinator_pb2 as pb


@pytest.fixture
def fruit(tmp_path: Path) -> object:
    """Three users; the third (beyond --devices 2) alone holds 'kiwi'."""
    path = tmp_path / "users.jsonl"
    path.write_text("\n".join(json.dumps(items) for items in
                              (["apple", "banana"], ["Banana", "東京"], ["kiwi"])) + "\n")
    return resolve_dataset(str(path), cache_dir=tmp_path / "cache")


def _run(config: pb.RunConfig | None = None) -> SimpleNamespace:
    config = config or pb.RunConfig(eps_agg=2.0, delta=1e-6, fp_ratio=0.5, rounds=4)
    rounds = [pb.RoundSummary(round=1, attempt=1, state="released", participants=400,
                              prefixes=1, segment_bits=16, domain_size=65536, kept=5, finished=5,
                              threshold=30.0, expected_false_positives=2.5)]
    return SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.574,
                           eps_local=3.605, rounds_released=1, config=config, rounds=rounds)


def test_an_item_no_device_holds_is_marked_and_counted(
        fruit: object, capsys: pytest.CaptureFixture[str]) -> None:
    hitters = [pb.HeavyHitter(item=item, estimate=50.0, round=1, ended=ended,
                              truncated=truncated)
               for item, ended, truncated in (("apple", True, False), ("apit'sw", True, False),
                                              ("東京", True, False), ("kiwi", True, False),
                                              ("bana…", False, True))]
    config = RunConfig(rounds=4, codec="unicode")
    # (kiwi is the third user's, whom --devices 2 leaves out; a cut prefix is no item)
    noise = held_by_no_device(fruit, 2, config, hitters)
    assert noise == [False, True, False, True, False]
    assert held_by_no_device(fruit, 3, config, hitters) == [False, True, False, False, False]
    run = _run()
    _print_results(run, SimpleNamespace(heavy_hitters=hitters[:4], cut_prefixes=[]),
                   noise_made=noise[:4])
    explain(run, None, sum(noise))
    out = capsys.readouterr().out
    marked = [line.split()[1] for line in out.splitlines()
              if line.endswith("; false positive (held by no user))")]
    assert marked == ["apit'sw", "kiwi"]
    assert ("so an item in the list may be one of them; here, the data at hand, 2 listed are "
            "held by no device, and marked so.") in out


def test_the_epsilons_and_a_missing_item_are_explained(
        capsys: pytest.CaptureFixture[str]) -> None:
    run = _run()
    _print_results(run, SimpleNamespace(heavy_hitters=[], cut_prefixes=[]))
    explain(run, None)
    lines = capsys.readouterr().out.splitlines()
    spent = lines.index("privacy spent: eps_agg 1.574 of 2.0 at delta 1e-06 over 1 released "
                        "round (eps_local 3.605)")
    assert lines[spent + 1] == (
        "(eps_local: what one device's report of a round can reveal of its data, randomized "
        "on the device; eps_agg: what the released sums, all the coordinator sees, reveal of "
        "any one device's data over the whole run, less, as each sum hides a report among the "
        "others'; smaller is more private: README, \"Privacy in one paragraph\", and "
        "docs/privacy.md)")
    said = " ".join(lines)
    assert ("the same privacy finds items held by a far smaller share. Each device reports one "
            "of its items a round (one that extends a kept prefix; --selection says how it is "
            "drawn), so an item counts its holders' reports, not its holders: one held by 100 "
            "devices that hold 3 items each counts about 33.") in said
    assert "held by no device" not in said  # (nothing marked: nothing said of it)
