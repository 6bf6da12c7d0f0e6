"""`fedhh loadtest` end to end, small: real services and device processes on 127.0.0.1, one
round with injected dropouts, and the report's figures (latencies, bytes, CPU, stage profile)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedhh.cli.main import main

pytestmark = pytest.mark.slow


def test_a_small_load_test_reports_every_figure(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    code = main(["loadtest", "--devices", "60", "--dim", "256", "--dropout", "0.1",
                 "--processes", "2", "--stage-ms", "20000", "--quiet-close-ms", "3000",
                 "--seed", "4",
                 "--workdir", str(tmp_path / "work"), "--json", str(out)])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert code == 0, printed
    assert report["state"] == "done"
    released = [r for r in report["rounds"] if r["state"] == "released"]
    assert len(released) == 1 and released[0]["participants"] >= 43  # n_min = 60 * 0.9 * 0.8
    devices = report["devices"]
    assert devices["tasks"] == 60 and devices["failed"] == 0
    assert devices["completed"] + devices["dropped"] == 60
    assert 0 < devices["dropped"] < 17  # seeded draws at rate 0.1
    # The vector (256 x 2 bytes) dominates what a device sends.
    assert 512 < report["bytes_per_device_round"] < 8192
    for rpc in ("GetTask", "AdvertiseKeys", "SubmitShares", "SubmitMaskedVector",
                "SubmitConsistency", "SubmitUnmask"):
        assert report["rpc_latency_ms"][rpc]["count"] > 0, rpc
    stages = [s["stage"] for s in report["stages"]]
    assert stages == ["ADVERTISE_KEYS", "SHARE_KEYS", "MASKED_INPUT", "CONSISTENCY_CHECK",
                      "UNMASK"]
    assert all(s["seconds"] > 0 and s["cpu_s"]["devices"] >= 0 for s in report["stages"])
    for service in ("aggregator", "coordinator", "devices (all processes)"):
        assert report["usage"][service]["cpu_s"] > 0
        assert report["usage"][service]["peak_mib"] > 10
    assert "stages at the aggregator" in printed


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:  # the process ended meanwhile
            continue
    return found


def test_a_load_test_stopped_with_sigterm_stops_the_services_it_started(tmp_path: Path) -> None:
    # A benchmark killed by hand (or by a CI timeout) used to leave its coordinator,
    # aggregators and device processes running: SIGTERM ended the Python process before the
    # topology's teardown ran.
    work = tmp_path / "work"
    process = subprocess.Popen(
        [sys.executable, "-m", "fedhh.cli.main", "loadtest", "--devices", "24", "--dim", "256",
         "--processes", "1", "--rounds", "1000", "--stage-ms", "20000",
         "--quiet-close-ms", "2000", "--seed", "5", "--workdir", str(work)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not (work / "devices-0.ready.json").exists():  # every service is up
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the load test never started its devices"
            time.sleep(0.1)  # polling a file, not synchronising on time
        assert _processes_mentioning(str(work)), "no service found to stop"
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        assert _processes_mentioning(str(work)) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in _processes_mentioning(str(work)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
