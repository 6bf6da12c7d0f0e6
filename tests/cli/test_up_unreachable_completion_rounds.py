"""With few devices the later completion rounds' local epsilon (eps_local + ln of their weight)
is so small that their threshold is above every device: `fedhh up` says so before the run, with
the bits of code the rounds before them reach. Before, the warning on items past the codes
counted those rounds in the codes' width (300 devices at eps_agg 2: 112 bits, where items past
80 bits came back cut whatever their count)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_run_items_past_the_codes import FakeTopology, Started, _write

from fedhh.config import Mode, RunConfig
from fedhh.rpc import topology
from fedhh.server.causes import (
    completion_threshold,
    completion_thresholds,
    first_past_devices,
    unreachable_completion_note,
)
from fedhh.server.mechanisms import LocalRandomizer, TailKind
from fedhh.server.prune import prune_hh

# (the plan of 300 devices, n_min 270, at eps_agg 2: `fedhh up` budgets 3 completion rounds
# at eps_local 3.341; the 2nd and 3rd run at 3.341 + ln 0.05 = 0.345)
SMALL = RunConfig(eps_agg=2.0, completion_rounds=3, min_devices=270, target_devices=300)
EPS_LOCAL = 3.341
LONG = ["https://www.example.com/products/item43", "john.sam@example.com", "👩🏽‍💻"]


def test_a_round_keeps_no_element_below_its_least_threshold() -> None:
    # (PruneHH over domains of P/2 + 1 and P entries, all at 0 but one just under the bound:
    # it is not kept, so no count under the bound comes through the round)
    p = SMALL.resolved_dim_limit(Mode.NETWORK)
    for index in (1, 2, 3):
        bound = completion_threshold(SMALL, EPS_LOCAL, index, 300, Mode.NETWORK)
        offset = np.log(SMALL.completion_weights()[index - 1] / 1.0)
        tail = LocalRandomizer(EPS_LOCAL + offset, TailKind(SMALL.tail)).null_tail(300)
        for size in (p // 2 + 1, p):
            estimates = np.zeros(size)
            estimates[7] = bound * (1 - 1e-9)
            kept = prune_hh(estimates, tail, SMALL.completion_fp_ratios()[index - 1],
                            SMALL.tau0, SMALL.eta).kept
            assert kept.size == 0, (index, size, bound)


def test_the_rounds_past_the_devices_are_named_with_the_bits_reached() -> None:
    thresholds = completion_thresholds(SMALL, EPS_LOCAL, 300, Mode.NETWORK)
    assert thresholds[0] < 300 < thresholds[1] <= thresholds[2], thresholds
    assert first_past_devices(thresholds, 300) == 2
    note = unreachable_completion_note(SMALL, thresholds, 300, Mode.NETWORK)
    assert note is not None
    assert note.startswith(f"rounds 6 to 7 (completion rounds) need an estimate of about "
                           f"{thresholds[1]:,.0f} devices, above the 300 devices here")
    assert "a little fewer devices where they leave fewer" in note
    # (4 main rounds of 16 bits at P = 2^16, and round 5's 16)
    assert "round 5 (at about" in note and "within 80 bits of code" in note
    # (at 1,387 devices, Shakespeare's, its 7 rounds are within the devices: nothing said)
    many = RunConfig(eps_agg=2.0, completion_rounds=7, min_devices=1248, target_devices=1387)
    within = completion_thresholds(many, 4.79, 1387, Mode.NETWORK)
    assert unreachable_completion_note(many, within, 1387, Mode.NETWORK) is None


def test_up_says_which_completion_rounds_no_count_reaches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.main import main

    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(topology, "LocalTopology", FakeTopology)
    users = [[f"w{u % 5}", LONG[u % 3]] for u in range(300)]
    with pytest.raises(Started):
        main(["up", "--dataset", str(_write(tmp_path, users)), "--insecure"])
    err = capsys.readouterr().err
    assert "fedhh up: note: rounds 6 to 7 (completion rounds) need an estimate of" in err, err
    assert "within 80 bits of code, and longer ones cut whatever their count" in err


def test_up_says_nothing_where_the_items_end_within_the_rounds_reached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.main import main

    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(topology, "LocalTopology", FakeTopology)
    users = [[f"w{u % 5}", f"v{u % 3}"] for u in range(300)]
    with pytest.raises(Started):
        main(["up", "--dataset", str(_write(tmp_path, users)), "--insecure"])
    assert "need an estimate of" not in capsys.readouterr().err


def test_simulate_says_which_completion_rounds_no_count_reaches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # (a simulation counts every user in every round: the 300 users are the cohort, not the
    # configuration's target_devices, 1,000 by default, which would have hidden the note)
    from fedhh.cli.main import main

    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = [[f"w{u % 5}", LONG[u % 3]] for u in range(300)]
    assert main(["simulate", "--dataset", str(_write(tmp_path, users)), "--eps-agg", "2",
                 "--seed", "1", "--quiet", "--top", "0"]) == 0
    err = capsys.readouterr().err
    assert "fedhh simulate: note: rounds 6 to 7 (completion rounds) need an estimate of" in err, err
    assert "above the 300 devices here" in err and "round 5 (at about" in err, err
