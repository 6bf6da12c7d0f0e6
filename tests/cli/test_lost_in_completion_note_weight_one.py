"""The note after a run whose completion rounds lost prefixes suggests a larger
--completion-weight only where weight 1 completes some of the dataset's items more (`fedhh up`
and `fedhh simulate`, which know the items), and says where it helps elsewhere (`fedhh admin`,
the dashboard). Before, it suggested it whatever: 300 devices holding a URL (152 bits) and an
e-mail address (118) reach 115 bits at weight 1 by the rounds whose thresholds their counts
clear (`fedhh simulate --completion-weight 1`, seed 1: neither found whole), where a 100-bit
item held by 150 of them, found whole at 0.2 in none of seeds 0-3 (round 5's threshold ~270),
came back whole at weight 1 in seeds 0 and 2 (~86). The decision is computed from the plan,
not from the run's noise; the run's seed is fixed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_run_items_past_the_codes import FakeTopology, Started, _write

from fedhh.config import Mode, RunConfig
from fedhh.rpc import topology
from fedhh.rpc.run_config import to_proto
from fedhh.server.causes import lost_in_completion_note
from fedhh.v1 import coordinator_pb2 as pb

URL, ADDRESS = "https://www.example.com/products/item43", "john.sam@example.com"  # 152, 118 bits
MIDDLE = "hello.world.xyz"  # (100 bits: past the main rounds' 87-92, within 115)
SUGGESTED = "A larger weight (up to 1) raises each completion round's budget"
NOT_SUGGESTED = "a larger --completion-weight completes none of the dataset's items more here"
CONDITIONAL = "which helps only where the rounds it brings within the devices complete items"


def _users(long: list[str]) -> list[list[str]]:
    return [[f"w{u % 5}", long[u % len(long)]] for u in range(300)]


def _simulated(tmp_path: Path, long: list[str]) -> str:
    from fedhh.cli.main import main

    out = tmp_path / "out.json"
    assert main(["simulate", "--dataset", str(_write(tmp_path, _users(long))), "--seed", "1",
                 "--quiet", "--json", str(out)]) == 0
    note = json.loads(out.read_text(encoding="utf-8"))["completion_note"]
    assert note.startswith(("1 prefix was lost", "2 prefixes were lost")), note
    return str(note)


def test_simulate_names_no_weight_where_weight_one_completes_nothing_more(
        tmp_path: Path) -> None:
    note = _simulated(tmp_path, [URL, ADDRESS])
    assert SUGGESTED not in note and NOT_SUGGESTED in note, note


def test_simulate_names_the_weight_where_weight_one_completes_an_item_more(
        tmp_path: Path) -> None:
    note = _simulated(tmp_path, [URL, MIDDLE])
    assert SUGGESTED in note and CONDITIONAL not in note and NOT_SUGGESTED not in note, note


def _lost_run() -> tuple[Any, Any]:
    """A networked run's reply that lost 30 prefixes in its first completion round."""
    config = RunConfig(rounds=4, completion_rounds=4).validate(Mode.NETWORK)
    rounds = [pb.RoundSummary(round=i, attempt=1, state="released", participants=300,
                              prefixes=1, segment_bits=16, domain_size=65536, kept=1,
                              threshold=60.0 if i <= 4 else 270.0) for i in range(1, 9)]
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=2.0,
                          rounds_released=8, config=to_proto(config), rounds=rounds)
    cut = [pb.HeavyHitter(item=f"https://example{i}…", estimate=200.0, round=4, truncated=True,
                          bits=52) for i in range(30)]
    return run, SimpleNamespace(heavy_hitters=[], cut_prefixes=cut)


@pytest.mark.parametrize(("long", "helps"), [([URL, ADDRESS], False), ([URL, MIDDLE], True)])
def test_up_tells_the_note_whether_weight_one_completes_an_item_more(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        long: list[str], helps: bool) -> None:
    import fedhh.cli.up as up
    from fedhh.cli.main import main

    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(topology, "LocalTopology", FakeTopology)
    told: list[Any] = []
    warn = up.warn_past_run_codes
    monkeypatch.setattr(up, "warn_past_run_codes",
                        lambda *args, **kwargs: told.append(warn(*args, **kwargs)) or told[0])
    with pytest.raises(Started):
        main(["up", "--dataset", str(_write(tmp_path, _users(long))), "--insecure"])
    assert told and told[0] is not None and told[0]() is helps
    capsys.readouterr()
    up._print_results(*_lost_run(), told[0])
    out = capsys.readouterr().out
    assert (SUGGESTED in out) is helps and (NOT_SUGGESTED in out) is not helps, out
    assert CONDITIONAL not in out


def test_where_the_items_are_unknown_the_weight_is_said_to_help_only_so() -> None:
    """`fedhh admin ... results` and the dashboard know no items: the note says when it helps."""
    note = lost_in_completion_note(["lost in round 5"] * 30, [], 4, 0.2, {4: 60.0, 5: 270.0})
    assert note is not None and SUGGESTED in note and CONDITIONAL in note, note
    at_one = lost_in_completion_note(["lost in round 5"] * 30, [], 4, 1.0, {4: 60.0, 5: 270.0},
                                     lambda: True)
    assert at_one is not None and "larger weight" not in at_one.lower(), at_one
