"""`fedhh loadtest` with too few devices for secure aggregation is refused before any service
starts, naming this command's options. Before, the services and devices started and the
coordinator then refused the run, naming expected_dropout and corrupt_fraction, which a load
test does not have."""

from __future__ import annotations

import pytest

import fedhh.rpc.loadtest
from fedhh.cli.main import main

PARAMETERS = "no (k, t) for n={n}, dropout={d}, corrupt=0.05, threat=lying meets 2^-40.0 " \
             "security and 2^-20.0 robustness"


@pytest.mark.parametrize(("argv", "line"), [
    (["--devices", "10"], "--devices 10: a cohort of 10 cannot run secure aggregation ("
     + PARAMETERS.format(n=10, d=0.05) + "): give more --devices"),
    (["--devices", "40", "--drop-rate", "0.3"], "--devices 40: a cohort of 40 cannot run "
     "secure aggregation (" + PARAMETERS.format(n=40, d=0.3) + "): give more --devices, or a "
     "lower --drop-rate"),
    (["--devices", "40", "--shards", "4"], "40 devices in 4 shards make shards of 10: a cohort "
     "of 10 cannot run secure aggregation (" + PARAMETERS.format(n=10, d=0.05) + "): give more "
     "--devices, or fewer --shards (or a larger --shard-size)"),
])
def test_a_cohort_too_small_for_secure_aggregation_is_refused_first(
        argv: list[str], line: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def started(*args: object) -> None:
        raise AssertionError("the services were started")

    monkeypatch.setattr(fedhh.rpc.loadtest, "run_load", started)
    with pytest.raises(SystemExit) as end:
        main(["loadtest", *argv, "--dim", "64"])
    assert end.value.code == 2
    assert capsys.readouterr().err == f"fedhh loadtest: error: {line}\n"


def test_a_cohort_secure_aggregation_can_serve_goes_on_to_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def started(*args: object) -> None:
        raise RuntimeError("started")

    monkeypatch.setattr(fedhh.rpc.loadtest, "run_load", started)
    with pytest.raises(RuntimeError, match="started"):
        main(["loadtest", "--devices", "150", "--dim", "64", "--drop-rate", "0.1"])
