"""A second SIGTERM or Ctrl-C while `fedhh up` stops its services does not cut the stopping short.

Before: `up` made SIGINT and SIGTERM raise KeyboardInterrupt every time. timeout(1) sends its
SIGTERM to the command and again to its process group (0.2 s apart here), and an impatient
user presses Ctrl-C twice: the second struck inside LocalTopology's clean-up, `up` printed
"the services are stopped; their temporary folder is removed", and the aggregator, the
coordinator and three device processes ran on, their folder gone. Now the first signal
interrupts and every later one is ignored until the command ends."""

from __future__ import annotations

import argparse
import os
import signal
import time

import pytest

from fedhh.cli import up


def test_signals_after_the_first_do_not_interrupt_the_clean_up(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cleaned: list[str] = []

    def fake_run(args: argparse.Namespace) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # (the handler runs on the next bytecodes)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # (the interrupt ends this wait)
                time.sleep(0.01)
            raise AssertionError("the first SIGTERM did not interrupt")
        finally:
            # the clean-up the interrupt started (LocalTopology.__exit__ stopping services)
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            cleaned.append("services stopped")

    monkeypatch.setattr(up, "_run", fake_run)
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(KeyboardInterrupt):
            up.run(argparse.Namespace(workdir=None))
        assert cleaned == ["services stopped"]
        assert "the services are stopped" in capsys.readouterr().err
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
