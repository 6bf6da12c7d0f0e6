"""One `fedhh device` process per --state-dir at a time: a second one waits, saying so, until
the first stops (or it is stopped itself), as a second tab of a web device waits for the first.

Before, two processes over one state directory (a restart begun before the old process ended, a
rolling update whose new replica mounts the old one's volume) ran the same devices at once: each
read a device's budget file once and spent from its own copy (up to twice the lifetime cap), and
each wrote devices.json whole, so one could overwrite the other's enrolments.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fedhh_device import main
from fedhh_device.main import LOCK_FILE, hold_state_dir

DEADLINE_S = 60.0


def test_a_second_holder_waits_until_the_first_lets_go(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=main.log.name)

    async def scenario() -> None:
        first = await hold_state_dir(tmp_path, asyncio.Event())
        assert first is not None
        second = asyncio.create_task(hold_state_dir(tmp_path, asyncio.Event()))
        deadline = time.monotonic() + DEADLINE_S
        while not any("waiting for the other" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline and not second.done()
            await asyncio.sleep(0.01)
        assert not second.done()
        os.close(first)  # (the first process ends)
        fd = await asyncio.wait_for(second, DEADLINE_S)
        assert fd is not None
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        os.close(fd)

    asyncio.run(scenario())
    waiting = next(r for r in caplog.records if "waiting for the other" in r.getMessage())
    assert waiting.holder == str(os.getpid())  # type: ignore[attr-defined]
    assert any("let go" in r.getMessage() for r in caplog.records)


def test_a_holder_stopped_while_waiting_returns_none(tmp_path: Path) -> None:
    async def scenario() -> int | None:
        first = await hold_state_dir(tmp_path, asyncio.Event())
        assert first is not None
        stop = asyncio.Event()
        second = asyncio.create_task(hold_state_dir(tmp_path, stop))
        await asyncio.sleep(0)  # (it has tried once)
        stop.set()
        try:
            return await asyncio.wait_for(second, DEADLINE_S)
        finally:
            os.close(first)

    assert asyncio.run(scenario()) is None


def _closed_port() -> int:
    with socket.socket() as probe:  # a port the OS just handed out, now closed: refused
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_a_second_device_process_on_a_state_dir_waits_and_enrolls_nothing(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    data = tmp_path / "users.txt"
    data.write_text("tea coffee\ncoffee\n", encoding="utf-8")
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"0 {'a' * 64}\n1 {'b' * 64}\n", encoding="ascii")
    holder = os.open(state / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)  # (the first process)
    os.write(holder, b"4242\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "fedhh.cli.main", "device", "--coordinator",
         f"127.0.0.1:{_closed_port()}", "--insecure", "--dataset", str(data), "--users", "0:2",
         "--enrollment-tokens-file", str(tokens), "--state-dir", str(state)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "FEDHH_CACHE": str(tmp_path / "cache")})
    lines: queue.Queue[str] = queue.Queue()
    assert process.stderr is not None
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stderr],
                              daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if "waiting for the other fedhh device process" in line:
                break
        assert "4242" in line
        assert process.poll() is None
        assert not (state / "devices.json").exists()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE_S) == 0
        assert not (state / "devices.json").exists()  # nothing enrolled, no token spent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(holder)
