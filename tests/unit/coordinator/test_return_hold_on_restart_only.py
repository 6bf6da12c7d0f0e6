"""The coordinator holds a check-in short of min_devices after it starts (``Lobby.
expect_return``, ``lobby.RETURN_S``) only where its store holds enrolled devices: those are the
devices that could have asked a previous process and be reconnecting. A first start, its store
empty, closes its check-in at its window as before 5d312b2, which held it up to 20 s after any
start and logged "check-in held for the devices reconnecting after the start" where no device
had ever been enrolled."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from in_process_coordinator_kit import in_process

from fedhh.rpc import serving
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.store import Store


def _holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The bounds a coordinator's start asked its lobby to hold for, serving until stopped."""
    asked: list[float] = []
    expect_return = Lobby.expect_return

    def recording(lobby: Lobby, until: float) -> None:
        asked.append(until)
        expect_return(lobby, until)

    async def idle(runner: Runner) -> None:
        await asyncio.Event().wait()

    async def signalled(server: object) -> None:  # (a SIGTERM once serving)
        return None

    monkeypatch.setattr(Lobby, "expect_return", recording)
    monkeypatch.setattr(Runner, "serve", idle)
    monkeypatch.setattr(serving, "wait_for_signal", signalled)
    monkeypatch.setattr(coordinator_main, "import_accountant_libraries", lambda: None)
    args, checked = in_process(tmp_path)
    assert asyncio.run(coordinator_main.serve(args, checked)) == 0
    return asked


def test_a_first_start_holds_nothing_a_restart_with_devices_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _holds(tmp_path, monkeypatch) == []  # (a store made by this start: no device)
    assert _holds(tmp_path, monkeypatch) == []  # (a store with no device enrolled yet)
    store = Store(tmp_path / "c.sqlite")
    store.add_device(b"h" * 32, b"k" * 32, "device 1")
    store.close()
    assert len(_holds(tmp_path, monkeypatch)) == 1
