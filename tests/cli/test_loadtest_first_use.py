"""`fedhh loadtest` refuses what its run cannot have before anything starts, naming its option.

Before: `fedhh loadtest --devices 100000000` drew the devices' data for minutes, growing
gigabytes, with nothing refused; `--rounds 100000` and `--dim 1099511627776` (a power of two)
started every service and device, then ended with the coordinator's "INVALID_ARGUMENT: rounds
must be at most 1024", naming no option of this command.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import one_line_error

import fedhh.rpc.loadtest
from fedhh.config import MAX_DEVICES, MAX_ROUNDS
from fedhh.secagg.config import MAX_DIMENSION


@pytest.mark.parametrize("extra, line", [
    (["--devices", str(MAX_DEVICES + 1)],
     f"--devices {MAX_DEVICES + 1}: at most {MAX_DEVICES:,} (a run's target_devices can be no "
     "more)"),
    (["--devices", "200", "--rounds", str(MAX_ROUNDS + 1)],
     f"--rounds {MAX_ROUNDS + 1}: at most {MAX_ROUNDS:,} (a run's rounds can be no more)"),
    (["--devices", "200", "--dim", str(MAX_DIMENSION * 2)],
     f"--dim {MAX_DIMENSION * 2}: at most {MAX_DIMENSION:,} (secure aggregation's vector "
     "length can be no more)"),
])
def test_beyond_a_runs_limits_is_refused_before_anything_starts(
        extra: list[str], line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def started(*_: object, **__: object) -> None:
        raise AssertionError("the load test started")

    monkeypatch.setattr(fedhh.rpc.loadtest, "run_load", started)
    workdir = tmp_path / "work"
    error = one_line_error(["loadtest", *extra, "--workdir", str(workdir)], capsys)
    assert error == f"fedhh loadtest: error: {line}"
    assert not workdir.exists()


def test_the_limits_themselves_pass_this_check() -> None:
    from fedhh.cli.loadtest import check_limits
    from fedhh.rpc.loadtest import LoadSpec

    check_limits(LoadSpec(MAX_DEVICES, MAX_DIMENSION, 0.0, MAX_ROUNDS, 1, None, None))
