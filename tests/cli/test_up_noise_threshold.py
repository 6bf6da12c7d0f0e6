"""`fedhh up` with a budget too small for its devices: the closing explanation says that a
threshold above the device count lets only noise through, and shows the tiny local epsilon.

Before (`fedhh up --eps-agg 0.001`): "An item is found only if its estimated count clears the
threshold: 139006 of 1387 devices (10022.0%) in round 2, at eps_local 0.00. With so few devices
only the most common items stand out", beside a "heavy hitter" estimated at 126,734 of the
1,387 devices: noise, presented as a find.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fedhh.cli.up import explain
from fedhh.v1 import coordinator_pb2 as pb


def _round(number: int, threshold: float, kept: int = 1) -> pb.RoundSummary:
    return pb.RoundSummary(round=number, attempt=1, state="released", participants=1387,
                           prefixes=1, segment_bits=16, domain_size=65536, kept=kept,
                           finished=kept, threshold=threshold, expected_false_positives=0.5)


def _explained(eps_local: float, thresholds: list[float],
               capsys: pytest.CaptureFixture[str]) -> str:
    config = pb.RunConfig(eps_agg=0.001, delta=1e-6, fp_ratio=0.5, rounds=4)
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=0.001,
                          eps_local=eps_local, rounds_released=len(thresholds), config=config,
                          rounds=[_round(i + 1, t) for i, t in enumerate(thresholds)])
    explain(run, None)
    return " ".join(capsys.readouterr().out.split())


def test_a_threshold_above_every_device_in_every_round_says_the_finds_are_noise(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _explained(0.00196, [128_487.0, 139_006.0], capsys)
    assert ("clears the threshold: 139,006 of 1387 devices (10022.1%) in round 2, at eps_local "
            "0.002. That is more than there are devices: no item's true count reaches it, so "
            "whatever this run found cleared it by noise alone. Give the run a larger "
            "--eps-agg") in out
    assert "only the most common items stand out" not in out


def test_only_the_last_round_beyond_every_device_names_that_round(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _explained(0.5, [900.0, 1500.0], capsys)
    assert "at eps_local 0.50. That is more than there are devices" in out
    assert "so whatever that round found cleared it by noise alone" in out


def test_a_threshold_within_the_devices_keeps_the_usual_explanation(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _explained(4.85, [29.0, 31.0], capsys)
    assert "31 of 1387 devices (2.2%) in round 2, at eps_local 4.85. With so few devices only " \
        "the most common items stand out" in out
    assert "noise alone" not in out
