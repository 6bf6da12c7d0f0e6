"""`fedhh device` refuses, before anything starts, what every service's start refuses
(``serving.check_start``): a --ready-file it could not write and a metrics listener it cannot
bind. Before, the device process wrote its ready file only once every device had enrolled, so
a missing folder failed the process after their tokens were spent."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fedhh_device.main
from fedhh.cli import device
from fedhh.cli.main import build_parser
from fedhh.errors import ConfigError


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    # (neither --ca nor --insecure: no coordinator's health is asked)
    return build_parser("device").parse_args([
        "device", "--coordinator", "127.0.0.1:9", "--state-dir", str(tmp_path / "state"),
        *extra])


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    runs: list[argparse.Namespace] = []

    def run(args: argparse.Namespace, check_peers: Callable[[], None]) -> int:
        check_peers()
        runs.append(args)
        return 0

    monkeypatch.setattr(fedhh_device.main, "run", run)
    return runs


def test_a_ready_file_in_a_missing_folder_is_refused_before_the_devices_start(
        tmp_path: Path, started: list[Any]) -> None:
    ready = tmp_path / "missing" / "ready.json"
    with pytest.raises(ConfigError, match=r"--ready-file .*does not exist"):
        device.run(_args(tmp_path, "--ready-file", str(ready)))
    assert started == [] and not (tmp_path / "state").exists()


def test_a_taken_metrics_port_is_refused_before_the_devices_start(
        tmp_path: Path, started: list[Any]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        with pytest.raises(ConfigError, match=f"--metrics-port: cannot listen on .*:{port}"):
            device.run(_args(tmp_path, "--metrics-port", port))
    assert started == []


def test_a_writable_ready_file_and_a_free_metrics_port_start_the_devices(
        tmp_path: Path, started: list[Any]) -> None:
    args = _args(tmp_path, "--ready-file", str(tmp_path / "ready.json"), "--metrics-port", "0")
    assert device.run(args) == 0 and started == [args]
