"""A networked run's progress lines (`fedhh up`, `fedhh admin wait`) in the order things
happened: an answer that holds a round already released and a progress still on that round's
release told "released" and then "releasing" (`fedhh up` on a 1,500-device mixed dataset:
rounds 3 and 4). A stale progress of an attempt already told is not told again."""

from __future__ import annotations

import pytest

from fedhh.cli.narrator import Narrator
from fedhh.v1 import coordinator_pb2 as pb


def test_a_released_rounds_stale_progress_is_not_told(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    released = pb.RoundSummary(round=3, attempt=1, state="released", participants=1500,
                               kept=33, finished=6, seconds=80)
    narrator = Narrator()
    narrator(pb.Run(run_id="r", state="running", progress=pb.Progress(
        round=3, attempt=1, phase="secure aggregation", stage="UNMASK", devices=1500)))
    narrator(pb.Run(run_id="r", state="running", rounds=[released], progress=pb.Progress(
        round=3, attempt=1, phase="releasing", devices=1500)))
    narrator(pb.Run(run_id="r", state="running", rounds=[released], progress=pb.Progress(
        round=4, attempt=1, phase="check-in", devices=12)))
    assert capsys.readouterr().out.splitlines() == [
        "  round 3 attempt 1: secure aggregation with 1500 devices: unmask",
        "  round 3 attempt 1: released: 1500 contributors, 33 kept, 6 found (80 s)",
        "  round 4 attempt 1: check-in (12 devices so far)",
    ]


def test_the_release_of_a_round_not_yet_stored_is_told(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    narrator = Narrator()
    narrator(pb.Run(run_id="r", state="running", progress=pb.Progress(
        round=1, attempt=2, phase="releasing", devices=900)))
    assert capsys.readouterr().out == "  round 1 attempt 2: releasing the sum of 900 proven " \
                                      "contributors\n"


@pytest.mark.parametrize(("devices", "told"), [(0, "0 devices"), (1, "1 device"),
                                               (2, "2 devices")])
def test_a_check_in_counts_its_devices_in_words(devices: int, told: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `fedhh admin wait` told a check-in its first device had joined as
    "check-in (1 devices so far)" (docs/networked.md's sequence, round 4)."""
    Narrator()(pb.Run(run_id="r", state="running", progress=pb.Progress(
        round=4, attempt=1, phase="check-in", devices=devices)))
    assert capsys.readouterr().out == f"  round 4 attempt 1: check-in ({told} so far)\n"
