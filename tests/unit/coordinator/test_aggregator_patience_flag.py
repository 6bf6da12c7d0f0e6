"""`fedhh coordinator --aggregator-patience-seconds`: the one budget for an aggregation service
that does not answer (before an attempt; settling a round past its deadline, its cancel and
its outcome together), given to the runner that hands it to each run's link. Before, it was
600 s in the code, and nothing an operator could set."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fedhh.cli.main import build_parser
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator.runner import Runner


class Built(Exception):
    """Raised by the first part the coordinator builds after its runner: the start stops."""


def test_the_flag_is_the_runners_patience(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    runners: list[Runner] = []

    class Recorded(Runner):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            runners.append(self)

    def stop_here() -> None:
        raise Built

    monkeypatch.setattr(coordinator_main, "Runner", Recorded)
    monkeypatch.setattr(coordinator_main, "KeyOwners", stop_here)
    monkeypatch.setattr(coordinator_main, "import_accountant_libraries", lambda: None)
    args = build_parser().parse_args([
        "coordinator", "--insecure", "--aggregator", "127.0.0.1:9",
        "--db", str(tmp_path / "c.sqlite"), "--signing-key", str(tmp_path / "signing.pem"),
        "--listen", "127.0.0.1:0", "--aggregator-patience-seconds", "42.5"])
    with pytest.raises(Built):
        asyncio.run(coordinator_main.serve(args, coordinator_main.Checked(b"c" * 32, b"a" * 32,
                                                                          None)))
    (runner,), = [runners]
    assert runner.aggregator_patience_s == 42.5


@pytest.mark.parametrize("value", ["0", "-1", "nan", "10m"])
def test_a_patience_that_is_not_a_positive_number_is_refused(
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["coordinator", "--aggregator", "127.0.0.1:9",
                                   "--aggregator-patience-seconds", value])
    assert "--aggregator-patience-seconds" in capsys.readouterr().err


def test_the_default_is_ten_minutes() -> None:
    args = build_parser().parse_args(["coordinator", "--aggregator", "127.0.0.1:9"])
    assert args.aggregator_patience_seconds == 600.0
