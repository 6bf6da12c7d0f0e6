"""`fedhh up` with a privacy target no local epsilon meets is refused before any device starts.

Before: `fedhh up --eps-agg 0.0001` started the aggregator, the coordinator and every device
(~15 s), and only the coordinator's StartRun refused it ("FAILED_PRECONDITION: eps_agg=0.0001,
... needs an eps_local below 0.001953"). Now the coordinator's own plan is solved on a thread
while the services start, and `up` waits for it before the first device process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from cli_kit import one_line_error

from fedhh.cli.up import TargetCheck
from fedhh.config import RunConfig
from fedhh.errors import ConfigError
from fedhh.rpc import topology


class Started(Exception):
    """What the fake topology raises when `up` starts a device process."""


class FakeTopology:
    """LocalTopology's start-up calls, recorded; no process is started."""

    calls: ClassVar[list[str]] = []

    def __init__(self, workdir: Any = None, tls: bool = True) -> None:
        self.workdir = Path("/nonexistent")

    def __enter__(self) -> FakeTopology:
        return self

    def __exit__(self, *exc: object) -> None:
        FakeTopology.calls.append("stopped")

    def start_aggregator(self, *args: Any, **kwargs: Any) -> None:
        FakeTopology.calls.append("aggregator")

    def start_coordinator(self, *args: Any, **kwargs: Any) -> None:
        FakeTopology.calls.append("coordinator")

    def start_devices(self, *args: Any, **kwargs: Any) -> None:
        FakeTopology.calls.append("devices")
        raise Started


def test_an_unmet_target_is_refused_before_any_device_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))  # (the file is imported there)
    monkeypatch.setattr(topology, "LocalTopology", FakeTopology)
    FakeTopology.calls = []
    users = tmp_path / "users.txt"
    users.write_text("".join(f"apple w{u % 50}\n" for u in range(300)))
    line = one_line_error(["up", "--dataset", str(users), "--eps-agg", "0.0001"], capsys)
    assert line.startswith("fedhh up: error: --eps-agg 0.0001 --delta 1e-06: the coordinator "
                           "would refuse the run (270 devices are n_min, --devices or "
                           "--min-fraction raise it): eps_agg=0.0001, delta=1e-06 over 4 "
                           "rounds among 270 devices"), line
    assert "devices" not in FakeTopology.calls
    assert FakeTopology.calls[-1] == "stopped"  # (what had started is stopped)


def test_a_target_the_coordinator_can_budget_is_let_through() -> None:
    config = replace(RunConfig(eps_agg=2.0), target_devices=1387, min_devices=1248)
    TargetCheck(config).refuse_if_unmet()
    with pytest.raises(ConfigError, match="needs an eps_local below"):
        TargetCheck(replace(config, eps_agg=1e-4)).refuse_if_unmet()


def test_the_exit_waits_for_a_solve_up_left_running() -> None:
    """`up` ended before it waited for the check (a start that failed, Ctrl-C): the
    interpreter's exit waits for the solve rather than stop its daemon thread where it stands
    (inside numpy or scipy, that can abort the process or print noise). Before, the process
    exited under it: the solve below never finished."""
    program = textwrap.dedent("""
        import sys, threading, time
        from dataclasses import replace
        import fedhh_coordinator.runs as runs
        from fedhh.cli.up import TargetCheck
        from fedhh.config import RunConfig

        def joined():
            # Whether the main thread is joining this one (the exit waiting for the solve).
            frame = sys._current_frames().get(threading.main_thread().ident)
            while frame is not None:
                if frame.f_code.co_name == "join" \\
                        and frame.f_locals.get("self") is threading.current_thread():
                    return True
                frame = frame.f_back
            return False

        def solving(config):
            # Still solving when the main thread ends, until the exit waits for it: an exit
            # that does not wait stops this thread first, "solved" unprinted.
            while not joined():
                time.sleep(0.005)
            print("solved", flush=True)

        runs.open_ledger = solving
        TargetCheck(replace(RunConfig(eps_agg=2.0), target_devices=1387, min_devices=1248))
        print("exiting", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "exiting\nsolved\n", "")
