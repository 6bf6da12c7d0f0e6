"""A computing command stopped by `timeout` gets its signal twice (timeout(1) sends it to the
command, then to the command's process group): the second, while the first is being reported,
is the same request and changes nothing. Before: "fedhh experiments: interrupted", then a
KeyboardInterrupt traceback out of main (seen under `timeout 20 fedhh experiments all`). A
signal a second or more later still interrupts."""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys

import pytest

import fedhh.cli.main as cli_main
from fedhh.cli import privacy


class SignalOnWrite(io.StringIO):
    """stderr that sends this process SIGTERM as the "interrupted" line is written."""

    def write(self, text: str) -> int:
        if "interrupted" in text:
            os.kill(os.getpid(), signal.SIGTERM)  # (handled at the next bytecode)
        return super().write(text)


def stopped(args: argparse.Namespace) -> int:
    os.kill(os.getpid(), signal.SIGTERM)  # the first: raises KeyboardInterrupt here
    raise AssertionError("SIGTERM did not interrupt")


def test_a_second_signal_while_reporting_the_first_changes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # One clock reading for both signals: how near they come does not hang on this machine's
    # load, and a clock that has not moved between them (a coarse one, Windows's 15.6 ms tick)
    # still tells the second from the first (before, a second signal read at the first's time
    # was taken for the first and interrupted the report).
    monkeypatch.setattr(cli_main.time, "monotonic", lambda: 100.0)
    monkeypatch.setattr(privacy, "run", stopped)
    err = SignalOnWrite()
    monkeypatch.setattr(sys, "stderr", err)
    before = signal.getsignal(signal.SIGTERM)
    code = cli_main.main(["privacy", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4"])
    assert code == cli_main.INTERRUPTED
    assert err.getvalue() == "fedhh privacy: interrupted\n"
    assert signal.getsignal(signal.SIGTERM) == before  # (restored, as before)


def test_a_signal_a_second_later_interrupts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 100.2, 101.5])
    monkeypatch.setattr(cli_main.time, "monotonic", lambda: next(clock))
    cli_main._first_signal.clear()
    with pytest.raises(KeyboardInterrupt):
        cli_main._interrupt(signal.SIGINT, None)
    assert cli_main._interrupt(signal.SIGINT, None) is None  # 0.2 s later: the duplicate
    with pytest.raises(KeyboardInterrupt):
        cli_main._interrupt(signal.SIGINT, None)  # 1.5 s after the first
