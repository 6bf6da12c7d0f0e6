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
from fedhh_coordinator.db.interface import StoreUnavailable
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


def test_what_the_hold_needs_is_read_before_serving_begins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store lost from the moment the server is about to start (a database restarting):
    the start goes on, the hold asked, and the runner meets the outage as it meets any (it
    waits for the store). Before, the enrolled devices were read after the server had started
    (``store.enrollment()``), and the start failed with devices already served."""
    assert _holds(tmp_path, monkeypatch) == []  # (the first start: the store, its key)
    store = Store(tmp_path / "c.sqlite")
    store.add_device(b"h" * 32, b"k" * 32, "device 1")
    store.close()
    lost = False
    bind, transaction = serving.bind, Store._tx

    def binding(*args: object) -> int:
        nonlocal lost
        port = bind(*args)  # type: ignore[arg-type]
        lost = True  # (the server starts next)
        return port

    def losing(self: Store) -> object:
        if lost:
            raise StoreUnavailable("the database connection was lost")
        return transaction(self)

    monkeypatch.setattr(serving, "bind", binding)
    monkeypatch.setattr(Store, "_tx", losing)
    assert len(_holds(tmp_path, monkeypatch)) == 1
