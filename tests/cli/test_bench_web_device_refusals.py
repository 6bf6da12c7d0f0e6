"""bench/bench_web_device.py refuses, before any service, page or browser starts, a --total the
coordinator would refuse (SecAgg+ has no (k, t) for so few devices), in one line naming the
least --total it takes. Before, the services and Chromium started and the first round's
StartRun ended the bench in a gRPC traceback ("no (k, t) for n=30")."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_web_device.py"


def _bench(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> Any:
    spec = importlib.util.spec_from_file_location("bench_web_device_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def started(*args: object) -> None:
        raise AssertionError("the bench started its services")

    monkeypatch.setattr(bench, "measure", started)
    monkeypatch.setattr(sys, "argv", ["bench_web_device.py", *argv])
    return bench


def test_too_few_devices_are_refused_naming_the_least_total(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench(monkeypatch, ["--total", "30"])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == 2
    error = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(error) == 1 and "no (k, t) for n=30" in error[0], error
    found = re.search(r"the least --total it takes is (\d+)$", error[0])
    assert found, error
    least = int(found.group(1))
    assert bench._refusal(least, 12, 20_000) is None
    assert bench._refusal(least - 1, 12, 20_000) is not None


@pytest.mark.parametrize("web", ["0", "41"])
def test_a_web_count_outside_the_total_is_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], web: str) -> None:
    bench = _bench(monkeypatch, ["--total", "40", "--web", web])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == 2
    assert f"--web must be from 1 to --total (40), got {web}" in capsys.readouterr().err


def test_a_total_below_the_devices_floor_is_refused_naming_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The coordinator takes --total 33, but every device (Python and web) refuses a round
    whose n_min is below its floor of 100: before, the bench started everything and the run
    failed after 5 attempts with no device in them ('bad_config: n_min=33 < floor 100')."""
    bench = _bench(monkeypatch, ["--total", "33"])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == 2
    error = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(error) == 1, error
    assert "is below its floor of 100" in error[0], error
    assert error[0].endswith("the least --total it takes is 100"), error
